"""`jobenv init fish`: fish's integration, a language of its own.

The POSIX shells (bash, zsh, sh) share shell/jobenv.sh and jobenv.restore.init's templates; fish
shares no syntax with them, so its whole script (savejobenv, getjobenv, the lazy
completion, `_jobenv_auto`) is one template here, rendered by `render_fish`.  Imported
only by `jobenv init fish`: a POSIX shell's init never loads it.
"""
from __future__ import annotations

from jobenv.core.errors import EXIT_NO_RECORD
from jobenv.core.quoting import fish_quote
from jobenv.schedulers import all_jobid_vars

_FISH = """\
# jobenv shell integration for fish, from `jobenv init fish` (jobenv {version}).
#   in ~/.config/fish/config.fish:  jobenv init fish | source
#   faster:  jobenv init fish > ~/.jobenv/init.fish   then   source ~/.jobenv/init.fish
if not set -q JOBENV_EXE
    if test -x {exe}; set -g JOBENV_EXE {exe}; else; set -g JOBENV_EXE jobenv; end
end
# `jobenv` itself where no venv is active (see jobenv.restore.init._SH_JOBENV); PATH's, once it has one, wins
if not command -q jobenv; and not functions -q jobenv; and command -q $JOBENV_EXE
    function jobenv --description 'the jobenv that `jobenv init` pinned (JOBENV_EXE)'
        if command -q jobenv; command jobenv $argv; else; command $JOBENV_EXE $argv; end
    end
end
function savejobenv --description 'capture this allocation: jobenv save'
    command $JOBENV_EXE save $argv
end
function getjobenv --description 'restore the saved job into this shell: jobenv get'
    set -l code (command $JOBENV_EXE get --shell fish $argv); or return $status
    string join \\n -- $code | source
end
# Completion: click writes the real script; loading it costs a Python start, so on first TAB.
function _jobenv_lazy_complete
    complete -e -c jobenv
    command $JOBENV_EXE completion fish 2>/dev/null | source
    functions -q {func}; and {func}
end
complete -c jobenv -f -a '(_jobenv_lazy_complete)'
function _jobenv_auto
    status is-interactive; or return 0
    set -l d $HOME/.jobenv/jobs
    set -q JOBENV_HOME; and test -n "$JOBENV_HOME"; and set d $JOBENV_HOME/jobs
    if test -n "{jobids}"  # an allocation's shell (see _SH_AUTO)
        command -q $JOBENV_EXE; or return 0
        __jobenv_auto_get; and return 0
        test $status -eq {no_record}; or return 0
        command $JOBENV_EXE save --quiet >/dev/null 2>&1; or return 0
        __jobenv_auto_get
        return 0
    end
    test -d "$d"; or return 0
    set -l h $hostname
    set -q JOBENV_HOSTNAME; and test -n "$JOBENV_HOSTNAME"; and set h $JOBENV_HOSTNAME
    set h (string split -m1 . -- "$h")[1]
    test -n "$h"; or return 0
    set -l files $d/*.hosts
    test (count $files) -gt 0; or return 0
    grep -qsE "^$h(\\.|\\$)" $files </dev/null; or return 0
    command -q $JOBENV_EXE; or return 0
    __jobenv_auto_get
    return 0
end
function __jobenv_auto_get  # getjobenv, silent (fish sends a substitution's stderr past redirections)
    set -l code (command $JOBENV_EXE get --shell fish 2>/dev/null); or return $status
    string join \\n -- $code | source >/dev/null 2>&1
    return 0
end
if test (set -q JOBENV_AUTO; and echo $JOBENV_AUTO; or echo {auto}) = 1; _jobenv_auto; end
"""


def render_fish(exe: str, auto: bool, version: str, func: str) -> str:
    """fish's init script: `exe` pinned as JOBENV_EXE, `func` click's completion function."""
    return _FISH.format(version=version, exe=fish_quote(exe), auto="1" if auto else "0", func=func,
                        no_record=EXIT_NO_RECORD, jobids="".join("$" + v for v in all_jobid_vars()))
