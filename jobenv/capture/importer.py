"""`jobenv import FILE`: turn an env file written by other tools (`~/.pbsenv`,
`~/.cobaltenv`, `~/.slurmenv`: `export VAR=value` lines, often unquoted, or raw
`env | grep PBS` output) into a record.

The file is parsed as data, never sourced: `$(...)`, backquotes and `;` stay text.  Only
the scheduler's variables, HOSTFILE and NGPU_PER_HOST are taken from it: jobenv's own
settings (JOBENV_*, XDG_CONFIG_HOME, PATH...) come from this shell, never from a file that
another tool or person wrote, since they choose the store, the profile and so the
`launch` command; so do the scheduler variables that choose a program, a configuration
file or the tasks' environment (schedulers.PROGRAM_VARS: SLURM_TASK_PROLOG, SLURM_CONF...).  Only a regular file of at most MAX_BYTES is read (a FIFO would hang,
/dev/zero would exhaust memory), and the nodefile or HOSTFILE it names is read as
`jobenv save` reads one (jobenv.core.readfile).  The variables then go through the same
capture as `jobenv save`.
"""
from __future__ import annotations

import os

from jobenv.core.errors import BadInput
from jobenv.schedulers import JOBID_VARS, NODEFILE_VARS, all_prefixes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Mapping

SCHEDULER_PREFIXES = all_prefixes()
EXTRA_NAMES = ("HOSTFILE", "NGPU_PER_HOST")  # written by ezpz-style tools beside the scheduler's
MAX_BYTES = 4 << 20


def _unquote(raw: str, lineno: int, path: str) -> str:
    """The value of one assignment's right-hand side, without any expansion."""
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return raw[1:-1].replace("'\\''", "'")
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        out, i, body = [], 0, raw[1:-1]
        while i < len(body):
            if body[i] == "\\" and i + 1 < len(body) and body[i + 1] in '"\\$`':
                out.append(body[i + 1])
                i += 2
            else:
                out.append(body[i])
                i += 1
        return "".join(out)
    if raw[:1] in ("'", '"'):
        raise BadInput(f"{path} line {lineno}: unterminated quote")
    return raw  # unquoted (e.g. `export SLURM_TASKS_PER_NODE=4(x2)`): taken literally


def parse(text: str, path: str = "env file") -> Dict[str, str]:
    """Variable assignments in the file; aliases, functions and comments are ignored."""
    out: Dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#") or s.startswith(("alias ", "unalias ", "function ", "echo ")):
            continue
        if s.startswith("export "):
            s = s[len("export "):].lstrip()
        name, eq, value = s.partition("=")
        if not eq or not (name.isidentifier() and name.isascii()):
            continue  # not an assignment (a command, a function body): never run, never kept
        out[name] = _unquote(value, lineno, path)
    return out


def import_env(parsed: Mapping[str, str], base: Mapping[str, str]) -> Dict[str, str]:
    """The environment to capture from: this shell's settings (store, profiles, PATH)
    without any scheduler variables, plus the imported ones."""
    from jobenv.schedulers import PROGRAM_VARS

    chooser = {n for names in PROGRAM_VARS.values() for n in names}  # they choose what srun/qstat run
    parsed = {k: v for k, v in parsed.items()
              if (k.startswith(SCHEDULER_PREFIXES) or k in EXTRA_NAMES) and k not in chooser}
    env = {k: v for k, v in base.items() if not k.startswith(SCHEDULER_PREFIXES)}
    env.update((k, v) for k, v in parsed.items() if k.startswith(SCHEDULER_PREFIXES))
    env.update(_nodefile_fallback(parsed))
    if parsed.get("NGPU_PER_HOST") and "JOBENV_GPUS_PER_HOST" not in base:
        from jobenv.core.numparse import MAX_PER_HOST, parse_uint

        env["JOBENV_GPUS_PER_HOST"] = str(parse_uint(parsed["NGPU_PER_HOST"].strip(), "NGPU_PER_HOST", MAX_PER_HOST))
    if not any(k.startswith(SCHEDULER_PREFIXES) for k in parsed):
        names = ", ".join(p + "*" for p in SCHEDULER_PREFIXES)
        raise BadInput(f"no scheduler variables ({names}) in the file: nothing to import")
    return env


def _nodefile_fallback(parsed: Mapping[str, str]) -> Dict[str, str]:
    """The nodefile vanished with the job; ezpz-style files also name a HOSTFILE copy: it
    stands in for the nodefile of the scheduler whose job id the file holds."""
    hostfile = parsed.get("HOSTFILE", "")
    if not hostfile or not os.path.exists(hostfile):
        return {}
    for name, var in NODEFILE_VARS.items():
        ids = JOBID_VARS.get(name, ())
        if any(v in parsed for v in ids) and not os.path.exists(parsed.get(var, "")):
            return {var: hostfile}
    return {}


def read(path: str) -> str:
    """The file's text: a regular file of at most MAX_BYTES (jobenv.core.readfile), else BadInput."""
    from jobenv.core.readfile import read_regular

    return read_regular(path, MAX_BYTES, "env file")
