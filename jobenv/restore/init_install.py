"""`jobenv init SHELL --install`: the one rc-file line that puts jobenv in every new shell.

A new shell (ssh to a compute node, tmux, an IDE terminal) has no venv active, so a bare
`jobenv` in an rc file or in `source <(jobenv get)` is "command not found" there.  The
line written here names this jobenv by its absolute path; the code it evaluates pins
JOBENV_EXE, so `getjobenv` and `launch` work without jobenv on PATH.  Installing is
idempotent: the line carries a mark, and a second install replaces the marked line (a
moved venv) instead of adding another.

Which files each shell reads: an interactive bash ~/.bashrc; a login bash (ssh, a batch
job's `bash -l`, a terminal that starts login shells) only the first of ~/.bash_profile,
~/.bash_login, ~/.profile that exists, which often sources ~/.bashrc, but Debian's
~/.bashrc returns at once when the shell is not interactive, so `bash -l -c CMD` would miss
a line there.  The login file therefore gets a line of its own (a new ~/.profile when none
exists, the file a plain sh reads too, hence the line's BASH_VERSION test), skipped when
getjobenv is already defined (an interactive login bash whose profile sourced ~/.bashrc
first): nothing else of the user's start-up changes, and no ~/.bashrc is sourced where the
site did not.  zsh: ${ZDOTDIR:-~}/.zshrc, and .zlogin for login shells (read after .zshrc,
so the same skip applies).  fish reads ${XDG_CONFIG_HOME:-~/.config}/fish/conf.d/jobenv.fish
(a file of its own, read before config.fish) in every shell, login or not.  POSIX sh has no
such file (dash reads $ENV only when set): the line is printed for the user to place.
"""
from __future__ import annotations

import os
from typing import List, Mapping, Optional, Tuple

from jobenv.core.errors import BadInput
from jobenv.core.quoting import fish_quote, quote

MARK = "# jobenv: added by `jobenv init --install`"
INSTALLABLE = ("bash", "zsh", "fish")


def rc_file(shell: str, environ: Mapping[str, str]) -> str:
    """The file `shell` reads in every new interactive shell of this user."""
    home = environ.get("HOME") or os.path.expanduser("~")
    if shell == "bash":
        return os.path.join(home, ".bashrc")
    if shell == "zsh":
        return os.path.join(environ.get("ZDOTDIR") or home, ".zshrc")
    if shell == "fish":
        conf = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        return os.path.join(conf, "fish", "conf.d", "jobenv.fish")
    raise BadInput(f"jobenv init {shell} --install: {shell} has no rc file of its own; put "
                   f"this line where your shell reads it ($ENV for dash): {rc_line(shell, '/path/to/jobenv', False)}")


BASH_LOGIN = (".bash_profile", ".bash_login", ".profile")  # bash's order: it reads the first that exists


def login_file(shell: str, environ: Mapping[str, str]) -> Optional[str]:
    """The file a login `shell` reads where its rc file may not bring jobenv (None: fish,
    whose conf.d file every fish reads)."""
    home = environ.get("HOME") or os.path.expanduser("~")
    if shell == "bash":
        return next((os.path.join(home, n) for n in BASH_LOGIN if os.path.exists(os.path.join(home, n))),
                    os.path.join(home, ".profile"))
    if shell == "zsh":
        return os.path.join(environ.get("ZDOTDIR") or home, ".zlogin")
    return None


def login_line(shell: str, exe: str, auto: bool) -> str:
    """rc_line for the login file: only where no getjobenv is defined yet, and (for bash,
    whose login file may be ~/.profile, which sh reads too) only in bash."""
    only = '[ -z "${BASH_VERSION-}" ] || ' if shell == "bash" else ""
    return f"{only}command -v getjobenv >/dev/null 2>&1 || {rc_line(shell, exe, auto)}"


def rc_line(shell: str, exe: str, auto: bool) -> str:
    """The marked line that evaluates `exe init SHELL` (an absolute path: no PATH lookup)."""
    flag = " --auto" if auto else ""
    if shell == "fish":
        return f"{fish_quote(exe)} init fish{flag} | source  {MARK}"
    return f'eval "$({quote(exe)} init {shell}{flag})"  {MARK}'


def updated(text: str, line: str) -> Optional[str]:
    """`text` with `line` in place of any marked line (or appended); None when it is there."""
    lines = text.splitlines()
    marked = [i for i, old in enumerate(lines) if old.rstrip().endswith(MARK)]
    if [lines[i] for i in marked] == [line]:
        return None
    kept = [old for i, old in enumerate(lines) if i not in marked]
    at = marked[0] if marked else len(kept)
    kept.insert(at, line)
    return "\n".join(kept) + "\n"


TRUST_HINT = "point HOME, ZDOTDIR or XDG_CONFIG_HOME at a directory of your own, or add the line by hand"


def _target(path: str) -> str:
    """The file that writing `path` changes, after judging the way there by the store's rule
    (jobenv.core.trust.check_ancestors, the rc file's own link included): every directory
    and link yours or root's, no directory writable by others unless sticky.  Otherwise
    another user (ZDOTDIR, XDG_CONFIG_HOME or HOME in a shared /tmp) could point it at any
    file of yours, or at a new file anywhere, for jobenv to rewrite."""
    from jobenv.core.trust import check_ancestors

    check_ancestors(path, "the rc file", TRUST_HINT, last=True)
    return os.path.realpath(path)


def _read(path: str, real: str) -> Tuple[str, Optional[int]]:
    """The rc file's text and mode ('' and None when it does not exist yet): a regular file
    of this user's only (`real`: `path` with its links followed, see _target)."""
    from jobenv.core.readfile import read_bytes

    try:
        st = os.stat(real)
    except FileNotFoundError:
        return "", None
    if not os.path.isfile(real) or st.st_uid != os.geteuid():
        raise BadInput(f"{path}: not a regular file of yours; add the line by hand")
    return read_bytes(real, 16 << 20).decode("utf-8", "surrogateescape"), st.st_mode & 0o777


def install(shell: str, exe: str, auto: bool, environ: Mapping[str, str]) -> List[Tuple[str, str, bool]]:
    """Write the line into the shell's rc file and its login file: (file, line, whether the
    file changed) for each.  Every file's way is judged before any is written."""
    from jobenv.core.atomic import write_atomic

    if not exe or not os.path.isabs(exe):
        raise BadInput("cannot tell this jobenv's absolute path (run it as the `jobenv` program of its "
                       "venv, e.g. .venv/bin/jobenv init bash --install)")
    login = login_file(shell, environ)
    wanted = [(rc_file(shell, environ), rc_line(shell, exe, auto))]
    if login is not None:
        wanted.append((login, login_line(shell, exe, auto)))
    plans = []
    for path, line in wanted:
        real = _target(path)
        text, mode = _read(path, real)
        plans.append((path, line, real, mode, updated(text, line)))
    out = []
    for path, line, real, mode, new in plans:
        if new is not None:
            os.makedirs(os.path.dirname(real), mode=0o755, exist_ok=True)
            _target(path)  # the directories just made (or found made by someone else meanwhile) too
            # an rc file keeps its mode; a new one gets the umask's, as the shell would give it
            write_atomic(real, new.encode("utf-8", "surrogateescape"), mode=0o666 if mode is None else mode,
                         exact_mode=mode is not None)
        out.append((path, line, new is not None))
    return out
