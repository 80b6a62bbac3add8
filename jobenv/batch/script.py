"""The batch script of `jobenv submit`, rendered from data.

Directives come from two places, each once: the machine profile's `submit` key (the site's
lines: `-l select={nodes}:system=polaris`, `-C gpu`; profiles.submit validates them)
and the scheduler descriptor's `Batch` (its prefix, where output goes, the job's name).
The body runs `jobenv save` and then `jobenv launch -- CMD`, each word quoted by
jobenv.core.quoting, through the interpreter and jobenv that wrote it by absolute path (the
batch shell may have no venv on PATH, PBS passes no environment), with the store and the
submitting shell's PATH exported (so `status` and the records agree, and the job finds the
mpiexec the user's shell finds), and writes the launch's exit code to a file beside the
script: Slurm forgets a job MinJobAge seconds after it ends, Cobalt at once, so that file is
how `jobenv status` still tells the exit state later.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence

from jobenv.core.errors import BadInput
from jobenv.profiles.check import PLACEHOLDER
from jobenv.profiles.submit import SUBMIT_WORD
from jobenv.profiles.load import Profile
from jobenv.core.quoting import quote
from ..schedulers.base import Batch

JOBNAME = "jobenv"
MAX_NODES = 1_000_000
MAX_MINUTES = 366 * 24 * 60
# a path inside a directive line: no blank (a directive is split on blanks), no `%` (Slurm's
# -o pattern), no `:` (PBS reads `host:path`)
_PATH_WORD = re.compile(r"[A-Za-z0-9_./+=,@-]{1,4000}")


class Paths:
    """Where one submission's files live: its own directory in the store (jobenv.store.submissions)."""

    def __init__(self, directory: str) -> None:
        import os

        if not _PATH_WORD.fullmatch(directory):
            raise BadInput(f"the submission directory {directory!r} has characters a batch directive cannot hold "
                           "(blank, %, :); set JOBENV_HOME to a plainer path")
        self.dir = directory
        self.script = os.path.join(directory, "job.sh")
        self.output = os.path.join(directory, "job.out")
        self.error = os.path.join(directory, "job.err")
        self.ranks = os.path.join(directory, "ranks")
        self.exit = os.path.join(directory, "exit")


def parse_walltime(text: str) -> int:
    """Minutes (`30`) or H:MM:SS (`1:30:00`, as PBS and Slurm write it) -> whole seconds."""
    m = re.fullmatch(r"([0-9]{1,6})|([0-9]{1,4}):([0-5][0-9]):([0-5][0-9])", text.strip())
    if not m:
        raise BadInput(f"--time {text[:40]!r}: expected minutes (30) or H:MM:SS (1:30:00)")
    secs = int(m.group(1)) * 60 if m.group(1) else int(m.group(2)) * 3600 + int(m.group(3)) * 60 + int(m.group(4))
    if not 0 < secs <= MAX_MINUTES * 60:
        raise BadInput(f"--time {text[:40]!r}: must be more than 0 and at most {MAX_MINUTES} minutes")
    return secs


# interpreters and wrappers whose first argument is the program that names the job
_RUNNERS = re.compile(r"(python[0-9.]*|pypy[0-9.]*|env|bash|sh|zsh|torchrun|uv|apptainer|singularity|nsys|time)")
_NAME_MAX = 32  # PBS Pro takes up to 236 characters, older PBS 15, Slurm and Flux many: short and plain


def job_name(command: Sequence[str]) -> str:
    """The job's name from its command, as a scheduler's queue listing shows it: `train` for
    `python3 train.py`, `mod` for `python -m pkg.mod`, `ior` for `./ior -w`; JOBNAME when
    none can be told (`python -c ...`).  Letters, digits, `_.-`, starting with a letter; a
    word that leaves nothing of that (an option's value such as `4`) is passed over."""
    words = list(command)
    i = 0
    while i < len(words):
        w, i = words[i], i + 1
        if w == "-c":
            break
        base = w.rsplit("/", 1)[-1]
        if w == "-m" and i < len(words):
            base, i = words[i].rsplit(".", 1)[-1], i + 1
        elif w.startswith("-") or "=" in w or _RUNNERS.fullmatch(base):
            continue
        elif base.endswith((".py", ".sh")):
            base = base[:-3]
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", base).lstrip("0123456789_.-")[:_NAME_MAX]
        if name:
            return name
    return JOBNAME


def word(value: str, what: str) -> str:
    """A queue or account as it goes into a directive line: one plain word."""
    if not SUBMIT_WORD.fullmatch(value):
        raise BadInput(f"{what} {value[:40]!r}: expected one word (letters, digits, _.:@%+=,/-)")
    return value


def values(profile: Profile, nodes: int, walltime: int, queue: Optional[str], account: Optional[str],
           ranks_per_host: Optional[int], jobname: str = JOBNAME) -> Dict[str, str]:
    """Every placeholder a directive may name: the request, the profile's defaults and vars."""
    given = {"queue": queue, "account": account}
    out = dict(profile.vars)
    out.update(profile.submit.get("defaults", {}))
    out.update({k: word(v, f"--{k}") for k, v in given.items() if v is not None})
    out.update(nodes=str(nodes), walltime=f"{walltime // 3600}:{walltime // 60 % 60:02d}:{walltime % 60:02d}",
               minutes=str(-(-walltime // 60)), jobname=jobname)
    if ranks_per_host is not None:
        out["ranks_per_host"] = str(ranks_per_host)
    if profile.gpus_per_host is not None:
        out["gpus_per_host"] = str(profile.gpus_per_host)
    return out


def _fill(text: str, vals: Dict[str, str], profile: Profile) -> str:
    def one(m: "re.Match[str]") -> str:
        if m.group(1) not in vals:
            raise BadInput(f"profile {profile.name}: directive {text!r} needs --{m.group(1).replace('_', '-')}")
        return vals[m.group(1)]

    line = PLACEHOLDER.sub(one, text)
    if not line.isprintable() or not line.isascii():  # a profile var may hold a newline: never a second line
        raise BadInput(f"profile {profile.name}: directive {text!r} filled in is not one printable line")
    return line


def directives(profile: Profile, batch: Batch, vals: Dict[str, str], paths: Paths) -> List[str]:
    """The directive lines: the job's name and output (the scheduler's), then the site's."""
    lines = [batch.name.format(jobname=vals["jobname"])]
    lines += [t.format(output=paths.output, error=paths.error) for t in batch.output]
    for item in profile.submit.get("directives", []):
        if isinstance(item, dict):
            if item["when"] in vals:
                lines += [_fill(t, vals, profile) for t in item["args"]]
        else:
            lines.append(_fill(item, vals, profile))
    return [f"{batch.prefix} {line}" for line in lines]


def jobenv_argv(python: str, package_parent: str) -> List[str]:
    """This very jobenv by absolute path, never the cwd's (jobenv.core.interpreter)."""
    from jobenv.core.interpreter import code_argv

    return code_argv(python, "from jobenv.__main__ import main; sys.exit(main(sys.argv[1:]))", pin=package_parent)


def render(lines: Sequence[str], jobenv: Sequence[str], home: str, cwd: str, save_args: Sequence[str],
           launch_args: Sequence[str], command: Sequence[str], paths: Paths, version: str,
           path: Optional[str] = None) -> str:
    """The whole script: POSIX sh, directives first (schedulers stop reading them at the
    first command), every value single-quoted.  `path` is the submitting shell's PATH: PBS
    starts a batch job with a PATH of its own (qsub passes no environment), where save and
    launch would find another mpiexec than the one the user's shell finds (Debian's Open MPI
    instead of the venv's MPICH: issue 25)."""
    q = " ".join
    body = [
        "#!/bin/sh",
        *lines,
        f"# Written by `jobenv submit` (jobenv {version}): save the job, then launch the command on every rank.",
        f"jobenv() {{ {q(quote(a) for a in jobenv)} \"$@\"; }}",
        f"JOBENV_HOME={quote(home)}; export JOBENV_HOME",
        *([f"PATH={quote(path)}; export PATH"] if path else []),
        f"cd {quote(cwd)} || exit 1",
        # cancelled (scancel, qdel: SIGTERM, then SIGKILL): the exit file still says how it ended
        # (Paths holds plain characters only, so the path needs no quoting inside the trap)
        f"trap 'echo 143 > {paths.exit}; exit 143' TERM",
        f"jobenv save --quiet {q(quote(a) for a in save_args)} || {{ rc=$?; echo \"$rc\" > {quote(paths.exit)}; "
        'exit "$rc"; }',
        f"jobenv launch {q(quote(a) for a in launch_args)} -- {q(quote(a) for a in command)}",
        "rc=$?",
        f"echo \"$rc\" > {quote(paths.exit)}",
        'exit "$rc"',
    ]
    return "\n".join(body) + "\n"
