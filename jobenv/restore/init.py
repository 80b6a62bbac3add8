"""`jobenv init SHELL`: the code an rc file evaluates, as conda, direnv, pyenv and starship do.

    eval "$(jobenv init bash)"          # ~/.bashrc   (zsh, sh likewise)
    jobenv init fish | source           # ~/.config/fish/config.fish

It defines `savejobenv`, `getjobenv` and, where no jobenv is on PATH, `jobenv` (for bash, zsh and sh: the text of shell/jobenv.sh,
the one definition of them), completions that load click's script on the first TAB, and,
opt-in (`--auto` or JOBENV_AUTO=1), `_jobenv_auto`: in an interactive shell of an
allocation not yet saved, save it; in any other interactive shell on a host of a saved
job, restore it.

Every login shell pays for this, so this module is click-free (`jobenv init` takes a fast
path in `jobenv.__main__`, like `get`; the click command for the rest is jobenv/cli/init.py), and the emitted code starts no process when no job
is around.  The emitted code never prints on its own and never fails the shell: no
`jobenv` on PATH, a corrupt store, `set -eu` or zsh's err_exit/nounset all leave the shell
as it was (tests/test_init.py runs real bash, zsh, fish and dash from empty environments).
fish's script is its own template (jobenv.restore.init_fish); this module renders the POSIX ones.
"""
from __future__ import annotations

import os
import sys

from jobenv.core.errors import EXIT_NO_RECORD
from jobenv.core.quoting import quote
from jobenv.schedulers import all_jobid_vars

TYPE_CHECKING = False  # `import typing` costs ~5 ms per login shell
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

SHELLS = ("bash", "zsh", "fish", "sh")
# click's name for the completion function (ShellComplete.func_name; test_init checks it)
CLICK_FUNC = "_jobenv_completion"
OPTIONS = {"--auto": "auto"}  # mirrors `command()` below; tests check it

_SH_HEAD = """\
# jobenv shell integration for {shell}, from `jobenv init {shell}` (jobenv {version}).
#   in {rc}:  eval "$(jobenv init {shell})"
#   faster:   jobenv init {shell} > ~/.jobenv/init.{shell}   then   . ~/.jobenv/init.{shell}
# JOBENV_EXE pins the jobenv that wrote this, so a shell without its venv activated finds it.
if [ -z "${{JOBENV_EXE-}}" ] && [ -x {exe} ]; then JOBENV_EXE={exe}; fi
# An alias of a name defined here would be expanded inside its definition and break it
# (shell/jobenv.sh clears its own names likewise).
unalias _jobenv_lazy_complete _jobenv_compdef_hook _jobenv_auto >/dev/null 2>&1 || true
"""

# `jobenv` itself in a new shell with no venv active (ssh, tmux): when no `jobenv` command,
# alias or function answers at rc time, a function runs the pinned one; a jobenv that PATH
# gains later (a venv activated) still wins.  Defined through `eval`, so that the check runs
# before the definition is parsed: a user's own alias or function of jobenv is left alone.
_SH_JOBENV = {
    "bash": """if [ -n "${JOBENV_EXE-}" ] && ! command -v jobenv >/dev/null 2>&1; then
    eval 'jobenv() { if type -P jobenv >/dev/null 2>&1; then command jobenv "$@"; else command "$JOBENV_EXE" "$@"; fi; }'
fi
""",
    "zsh": """if [ -n "${JOBENV_EXE-}" ] && ! command -v jobenv >/dev/null 2>&1; then
    eval 'jobenv() { if whence -p jobenv >/dev/null 2>&1; then command jobenv "$@"; else command "$JOBENV_EXE" "$@"; fi; }'
fi
""",
    "sh": """if [ -n "${JOBENV_EXE-}" ] && ! command -v jobenv >/dev/null 2>&1; then
    eval 'jobenv() { command "$JOBENV_EXE" "$@"; }'
fi
""",
}

_BASH_COMPLETION = """\
# Completion: click writes the real script; loading it costs a Python start, so on first TAB.
_jobenv_lazy_complete() {
    local _jobenv_src _jobenv_fn
    _jobenv_src="$(command "${JOBENV_EXE:-jobenv}" completion bash 2>/dev/null)" || return 0
    eval "$_jobenv_src" || return 0
    _jobenv_fn="$(complete -p jobenv 2>/dev/null)" || return 0
    _jobenv_fn="${_jobenv_fn##*-F }"
    _jobenv_fn="${_jobenv_fn%% *}"
    if [ -n "$_jobenv_fn" ] && [ "$_jobenv_fn" != _jobenv_lazy_complete ]; then "$_jobenv_fn" "$@"; fi
    return 0
}
complete -o nosort -F _jobenv_lazy_complete jobenv 2>/dev/null || complete -F _jobenv_lazy_complete jobenv 2>/dev/null || true
"""

_ZSH_COMPLETION = """\
# Completion: click writes the real script; loading it costs a Python start, so on first TAB.
_jobenv_lazy_complete() {
    emulate -L zsh
    local _jobenv_src _jobenv_fn
    _jobenv_src="$(command "${JOBENV_EXE:-jobenv}" completion zsh 2>/dev/null)" || return 1
    eval "$_jobenv_src" || return 1
    _jobenv_fn="${_comps[jobenv]-}"
    if [[ -n "$_jobenv_fn" && "$_jobenv_fn" != _jobenv_lazy_complete ]]; then "$_jobenv_fn" "$@"; fi
}
if (( ${+functions[compdef]} )); then
    compdef _jobenv_lazy_complete jobenv
else  # before compinit: register at the first prompt, once compinit has run
    _jobenv_compdef_hook() {
        emulate -L zsh
        add-zsh-hook -d precmd _jobenv_compdef_hook
        if (( ${+functions[compdef]} )); then compdef _jobenv_lazy_complete jobenv; fi
        unfunction _jobenv_compdef_hook
    }
    autoload -Uz add-zsh-hook && add-zsh-hook precmd _jobenv_compdef_hook
fi
"""

# Shared by bash, zsh and sh ({jobids}: every scheduler's job-id variables, from
# jobenv.schedulers).  In a shell of an allocation the shell does not name the
# job's record itself (store.key_for hashes ids such as PBS array subjobs' `123[4].srv`):
# it asks `jobenv get`, which it runs anyway there, and saves only on its "no record of
# this job" (errors.EXIT_NO_RECORD), so a save of the user's own is never overwritten.
_SH_AUTO = """\
# Automatic save/restore (JOBENV_AUTO=1 or `jobenv init --auto`): silent, never fails.
_jobenv_auto() {
    {zsh_opts}case $- in *i*) ;; *) return 0 ;; esac
    local _jobenv_d _jobenv_h _jobenv_rc
    _jobenv_d="${JOBENV_HOME:-${HOME-}/.jobenv}/jobs"
    if [ -n "{jobids}" ]; then  # an allocation's shell
        command -v "${JOBENV_EXE:-jobenv}" >/dev/null 2>&1 || return 0
        getjobenv >/dev/null 2>&1 && return 0 || _jobenv_rc=$?
        [ "$_jobenv_rc" = {no_record} ] || return 0
        command "${JOBENV_EXE:-jobenv}" save --quiet >/dev/null 2>&1 || return 0
        getjobenv >/dev/null 2>&1 || true
        return 0
    fi
    [ -d "$_jobenv_d" ] || return 0  # no store: the common login shell stops here
    _jobenv_h="${JOBENV_HOSTNAME:-${HOSTNAME:-${HOST:-}}}"
    if [ -z "$_jobenv_h" ]; then _jobenv_h="$(uname -n 2>/dev/null)" || return 0; fi
    _jobenv_h="${_jobenv_h%%.*}"
    [ -n "$_jobenv_h" ] || return 0
{hostmatch}    command -v "${JOBENV_EXE:-jobenv}" >/dev/null 2>&1 || return 0
    getjobenv >/dev/null 2>&1 || true
    return 0
}
if [ "${JOBENV_AUTO-{auto}}" = 1 ]; then _jobenv_auto; fi
"""


# Is this host in a saved job?  dash: one grep.  bash and zsh read host files below 4 KiB
# with a builtin (no process: the common login node with records of compute jobs pays
# microseconds) and leave bigger ones to one grep.
_GREP = """grep -qsE "^${_jobenv_h}(\\.|\\$)" "$_jobenv_d"/*.hosts </dev/null"""
_HOSTMATCH_SH = """\
    local _jobenv_hit _jobenv_o
    _jobenv_hit=
{glob_on}    """ + _GREP + """ && _jobenv_hit=1
{glob_off}    [ -n "$_jobenv_hit" ] || return 0
"""
_HOSTMATCH_READ = """\
    local _jobenv_f _jobenv_c _jobenv_hit _jobenv_big _jobenv_nl _jobenv_o
    _jobenv_hit= _jobenv_big= _jobenv_nl=$'\\n'
{glob_on}    for _jobenv_f in "$_jobenv_d"/*.hosts; do
        [ -f "$_jobenv_f" ] || continue
        _jobenv_c=
        if IFS= read -r {readn} _jobenv_c <"$_jobenv_f" 2>/dev/null; then _jobenv_big=1; continue; fi
        case "$_jobenv_nl$_jobenv_c$_jobenv_nl" in *"$_jobenv_nl$_jobenv_h"[.$_jobenv_nl]*) _jobenv_hit=1; break ;; esac
    done
    if [ -z "$_jobenv_hit" ] && [ -n "$_jobenv_big" ] && """ + _GREP + """; then _jobenv_hit=1; fi
{glob_off}    [ -n "$_jobenv_hit" ] || return 0
"""
READN = {"bash": "-N 4096", "zsh": "-u 0 -k 4096"}
# The user's shell options must not change what the code means: zsh functions start with
# `emulate -L zsh`; bash has no such switch, so its code assigns nothing on a `local` line
# (`set -k` would take it as the command's environment) and turns off noglob and
# failglob around its one glob, putting them back after.
GLOB_ON = {"bash": "    _jobenv_o=$-; shopt -q failglob && _jobenv_o=F$_jobenv_o; set +f; shopt -u failglob\n",
           "sh": "    _jobenv_o=$-; set +f\n"}
GLOB_OFF = {"bash": "    case $_jobenv_o in *f*) set -f ;; esac; case $_jobenv_o in F*) shopt -s failglob ;; esac\n",
            "sh": "    case $_jobenv_o in *f*) set -f ;; esac\n"}


def functions_path() -> str:
    """shell/jobenv.sh (savejobenv, getjobenv): package data when installed, else the clone's."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # jobenv/, from jobenv/restore/init.py
    for p in (os.path.join(here, "data", "jobenv.sh"), os.path.join(os.path.dirname(here), "shell", "jobenv.sh")):
        if os.path.isfile(p):
            return p
    raise FileNotFoundError("jobenv.sh is missing from this installation (jobenv/data/jobenv.sh); reinstall jobenv")


def exe_path(argv0: str, executable: str) -> str:
    """The `jobenv` command running now, to pin in the output ('' if it cannot be told)."""
    if os.path.basename(argv0) == "jobenv" and os.access(argv0, os.X_OK):
        return os.path.abspath(argv0)
    beside = os.path.join(os.path.dirname(executable), "jobenv")  # `python -m jobenv` in a venv
    return beside if os.access(beside, os.X_OK) else ""


def render(shell: str, functions_text: str, exe: str, auto: bool, version: str) -> str:
    """The whole init script for `shell`: pure, so tests can feed it anything."""
    if shell == "fish":
        from jobenv.restore.init_fish import render_fish

        return render_fish(exe, auto, version, CLICK_FUNC)
    flag = "1" if auto else "0"
    rc = {"bash": "~/.bashrc", "zsh": "~/.zshrc", "sh": "~/.profile or $ENV"}[shell]
    parts = [_SH_HEAD.format(shell=shell, version=version, rc=rc, exe=quote(exe)), _SH_JOBENV[shell],
             functions_text.rstrip("\n") + "\n"]
    if shell == "bash":
        parts.append(_BASH_COMPLETION)
    elif shell == "zsh":
        parts.append(_ZSH_COMPLETION)
    zsh_opts = "emulate -L zsh; setopt no_nomatch\n    " if shell == "zsh" else ""
    match = ((_HOSTMATCH_READ.replace("{readn}", READN[shell]) if shell in READN else _HOSTMATCH_SH)
             .replace("{glob_on}", GLOB_ON.get(shell, "")).replace("{glob_off}", GLOB_OFF.get(shell, "")))
    parts.append(_SH_AUTO.replace("{zsh_opts}", zsh_opts).replace("{auto}", flag).replace("{hostmatch}", match)
                 .replace("{no_record}", str(EXIT_NO_RECORD))
                 .replace("{jobids}", "".join("${%s-}" % v for v in all_jobid_vars())))
    return "".join(parts)


def parse(args: List[str]) -> Optional[Dict[str, Any]]:
    """`init SHELL [--auto]`; None hands the command line to click (help, errors)."""
    out: Dict[str, Any] = {"shell": None, "auto": False}
    for a in args:
        if a in OPTIONS:
            out[OPTIONS[a]] = True
        elif a in SHELLS and out["shell"] is None:
            out["shell"] = a
        else:
            return None
    return out if out["shell"] else None


def output(shell: str, auto: bool) -> str:
    from jobenv import __version__

    with open(functions_path(), encoding="utf-8") as f:
        text = f.read()
    return render(shell, text, exe_path(sys.argv[0], sys.executable), auto, __version__)


def run(args: List[str]) -> Optional[int]:
    """The click-free fast path of `jobenv init`."""
    opts = parse(args)
    if opts is None:
        return None
    try:
        text = output(opts["shell"], opts["auto"])
    except OSError as exc:
        from jobenv.core.errors import report_error

        return report_error(exc)
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0
