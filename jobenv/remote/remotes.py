"""Named remotes (`jobenv remote add NAME DEST`): where ssh goes and which jobenv runs there.

Kept in `$XDG_CONFIG_HOME/jobenv/remotes.json` (default ~/.config/jobenv), mode 0600, in a
directory of the user's own: the file says which program runs on the cluster, so a file
another user could change is refused, as the store is.  Every value is checked when it is
added and again when it is read (the file may have been edited by hand): DEST never starts
with `-` (it would be an ssh option), and the jobenv path and work directory are written
into the remote login shell's command line bare, so they may hold only the characters
every shell (sh, bash, zsh, fish, csh) reads as themselves.
"""
from __future__ import annotations

import json
import os
from typing import Dict, Mapping, NamedTuple, Optional

from jobenv.core.errors import BadInput, BadRecord, NoRecord, visible

# Characters that mean themselves in every login shell (jobenv.core.quoting's bare words);
# a path may also start with `~/` (the remote home, expanded by every shell).
_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+,./-")
_NAME = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


class Remote(NamedTuple):
    name: str
    dest: str  # what ssh takes: user@host, a ~/.ssh/config alias
    jobenv: str  # the jobenv program there (default: `jobenv` on the login shell's PATH)
    workdir: str  # where `submit --sync` copies a directory to (default: ~/jobenv-sync)


DEFAULT_JOBENV = "jobenv"
DEFAULT_WORKDIR = "~/jobenv-sync"


def config_path(env: Mapping[str, str]) -> str:
    config = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(os.path.abspath(config), "jobenv", "remotes.json")


def check_name(name: str) -> str:
    if not name or len(name) > 64 or not _NAME.issuperset(name) or name[0] in ".-":
        raise BadInput(f"remote name {visible(name[:80])!r}: use 1 to 64 letters, digits, '_', '.' or '-'")
    return name


def check_dest(dest: str) -> str:
    if not dest or len(dest) > 255 or dest.startswith("-") or not dest.isprintable() or any(c.isspace() for c in dest):
        raise BadInput(f"destination {visible(dest[:80])!r}: expected what ssh takes (user@host or a "
                       "~/.ssh/config alias), without spaces and not starting with '-'")
    return dest


def check_path(path: str, what: str) -> str:
    """A path for the remote shell's command line: only characters every shell reads as
    themselves (a link to the real path serves where it has others)."""
    rest = path[2:] if path.startswith("~/") else path
    if not rest or len(path) > 1024 or not _BARE.issuperset(rest) or rest.startswith("-"):
        raise BadInput(f"{what} {visible(path[:80])!r}: use letters, digits and _@%+,./- (a leading ~/ is fine; "
                       "make a link where the real path has other characters)")
    return path


def load(env: Mapping[str, str]) -> Dict[str, Remote]:
    """Every remote, checked; none when the file does not exist."""
    from jobenv.core.trust import check_ancestors
    from jobenv.store.paths import check_safe

    path = config_path(env)
    check_ancestors(path, "the remotes file")
    check_safe(path, False, "remotes file")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise BadRecord(f"cannot read the remotes file {path}: {exc}", kind="corrupt") from None
    out: Dict[str, Remote] = {}
    try:
        for name, v in data["remotes"].items():
            r = Remote(check_name(name), check_dest(v["dest"]), check_path(v["jobenv"], "--jobenv"),
                       check_path(v["workdir"], "--workdir"))
            out[name] = r
    except (KeyError, TypeError, AttributeError, BadInput) as exc:
        raise BadRecord(f"the remotes file {path} is not one jobenv wrote ({exc}): fix or remove it",
                        kind="corrupt") from None
    return out


def save(env: Mapping[str, str], remotes: Dict[str, Remote]) -> str:
    """Write every remote (atomically, 0600, in a 0700 directory of the user's own)."""
    from jobenv.core.atomic import write_atomic
    from jobenv.store.paths import own_dir, write_error

    path = config_path(env)
    own_dir(os.path.dirname(path), "config directory")
    data = {"remotes": {r.name: {"dest": r.dest, "jobenv": r.jobenv, "workdir": r.workdir}
                        for r in sorted(remotes.values())}}
    try:
        write_atomic(path, (json.dumps(data, indent=2) + "\n").encode(), mode=0o600)
    except OSError as exc:
        raise write_error(exc, f"the remotes file {path}") from None
    return path


def get(env: Mapping[str, str], name: str) -> Remote:
    r = load(env).get(name)
    if r is None:
        raise NoRecord(f"no remote named {visible(name[:80])!r}: add it with `jobenv remote add {visible(name[:80])} "
                       "USER@HOST` (see `jobenv remote list`)")
    return r


def make(name: str, dest: str, jobenv: Optional[str], workdir: Optional[str]) -> Remote:
    return Remote(check_name(name), check_dest(dest), check_path(jobenv or DEFAULT_JOBENV, "--jobenv"),
                  check_path(workdir or DEFAULT_WORKDIR, "--workdir"))
