"""Write the scheduler tables and the shell gate from the scheduler files.

`python -m jobenv.schedulers.render` rewrites, from every `jobenv/schedulers/<name>.py`
that defines `SCHEDULER`, the tables block of `jobenv/schedulers/tables.py` (what the
`get` path reads without loading any scheduler file) and the fast-path gate of
`shell/jobenv.sh` (a job's marks and the site variables); `--check` only says whether they
are current (tests/test_schedulers.py runs it).  Adding a scheduler: write its file, add
its profile, run this.  A file named `<name>_<part>.py` is a part of scheduler <name>'s
(slurm_scontrol.py), not a scheduler.
"""
from __future__ import annotations

import os
import sys
from typing import Dict, Iterable, List, Optional, Sequence

from .base import Scheduler

HERE = os.path.dirname(os.path.abspath(__file__))
TABLES = os.path.join(HERE, "tables.py")
SHELL = os.path.join(os.path.dirname(os.path.dirname(HERE)), "shell", "jobenv.sh")
NOT_SCHEDULERS = ("__init__", "base", "parse", "render", "tables")
_BEGIN, _END = "# BEGIN tables:", "# END tables\n"
_FACTS = ("ALLOCATES", "ASKS_COMMAND", "THIS_HOST_ONLY")  # tables of the schedulers that have a fact
_GATE_BEGIN, _GATE_END = "    # a job's marks: schedulers.JOB_MARKERS;", '    d="${JOBENV_HOME'


def descriptors() -> List[Scheduler]:
    """Every scheduler file's descriptor, in detection order (priority, then name)."""
    found = []
    for entry in sorted(os.listdir(HERE)):
        name, ext = os.path.splitext(entry)
        if ext == ".py" and name not in NOT_SCHEDULERS and "_" not in name.strip("_"):
            module = __import__(f"{__package__}.{name}", fromlist=["SCHEDULER"])
            desc = getattr(module, "SCHEDULER", None)
            if not isinstance(desc, Scheduler) or desc.name != name:
                raise SystemExit(f"jobenv/schedulers/{entry}: no SCHEDULER = Scheduler({name!r}, ...)")
            found.append(desc)
    return sorted(found, key=lambda d: (d.priority, d.name))


def _names(names: Iterable[str]) -> str:
    names = list(names)
    return "(" + ", ".join(f'"{n}"' for n in names) + ("," if len(names) == 1 else "") + ")"


def tables(descs: Sequence[Scheduler]) -> Dict[str, object]:
    """The facts the rest of jobenv reads, as values (what the rendered block must equal)."""
    return {
        "NAMES": tuple(d.name for d in descs),
        "JOBID_VARS": {d.name: d.jobid_vars for d in descs if d.jobid_vars},
        "PREFIXES": {d.name: d.prefixes for d in descs if d.prefixes},
        "JOB_MARKERS": {d.name: d.marks for d in descs if d.marks},
        "DETECT": {d.name: (d.detect_any, d.detect_all) for d in descs if d.detect_any},
        "NODEFILE_VARS": {d.name: d.nodefile_var for d in descs if d.nodefile_var},
        "SITE_VARS": frozenset(v for d in descs for v in d.site_vars),
        "QUERY_VARS": tuple(v for d in descs for v in d.query_vars),
        "SECRETS": frozenset(v for d in descs for v in d.secrets),
        "PROGRAM_VARS": {d.name: d.program_vars for d in descs if d.program_vars},
        "PROFILES": {d.name: d.profile for d in descs},
        "ALLOCATES": frozenset(d.name for d in descs if d.allocates),
        "ASKS_COMMAND": frozenset(d.name for d in descs if d.asks_command),
        "THIS_HOST_ONLY": frozenset(d.name for d in descs if d.this_host_only),
    }


def table_text(descs: Sequence[Scheduler]) -> str:
    """The tables block of jobenv/schedulers/tables.py."""
    t = tables(descs)
    lines = [f"{_BEGIN} written by `python -m jobenv.schedulers.render`; edit the scheduler files instead"]
    for key, value in t.items():
        if isinstance(value, frozenset):
            order = ([d.name for d in descs if d.name in value] if key in _FACTS
                     else [v for d in descs for v in getattr(d, key.lower())])
            text = f"frozenset({_names(order)})"
        else:
            text = repr(value).replace("'", '"')
        lines.append(f"{key} = {text}")
    return "\n".join(lines) + "\n" + _END


def _sh_concat(words: List[str], indent: str) -> List[str]:
    """`[ -z "WORDS" ]`-style text split over lines of at most ~110 columns (backslash-newline
    inside double quotes joins them)."""
    lines, cur = [], indent + '[ -z "'
    for w in words:
        if len(cur) + len(w) > 108:
            lines.append(cur + "\\")
            cur = ""
        cur += w
    lines.append(cur + '" ]')
    return lines


def gate_text(descs: Sequence[Scheduler]) -> str:
    """shell/jobenv.sh's fast-path gate: a job's marks set, or any site variable set at all,
    sends getjobenv to Python (the cached snippet is for a shell in no job)."""
    marks = [f"${{{v}-}}" for d in descs for v in d.marks]
    site = [f"${{{v}+x}}" for d in descs for v in d.site_vars]
    out = [_GATE_BEGIN + " site variables: plan.SITE_VARS (python -m jobenv.schedulers.render)"]
    out += _sh_concat(marks, "    ")
    out[-1] += " || return 1"
    out += _sh_concat(site, "    ")
    out[-1] += " \\\n        || return 1"
    return "\n".join(out) + "\n"


def _splice(text: str, begin: str, end: str, new: str, keep_end: bool) -> str:
    i = text.index(begin)
    j = text.index(end, i)
    return text[:i] + new + text[j if keep_end else j + len(end):]


def rendered(descs: Optional[Sequence[Scheduler]] = None) -> Dict[str, str]:
    """{path: the text it must have}."""
    descs = descriptors() if descs is None else descs
    with open(TABLES) as f:
        tables = f.read()
    with open(SHELL) as f:
        shell = f.read()
    return {TABLES: _splice(tables, _BEGIN, _END, table_text(descs), keep_end=False),
            SHELL: _splice(shell, _GATE_BEGIN, _GATE_END, gate_text(descs), keep_end=True)}


def main(argv: Sequence[str]) -> int:
    stale = []
    for path, text in rendered().items():
        with open(path) as f:
            if f.read() == text:
                continue
        stale.append(path)
        if "--check" not in argv:
            with open(path, "w") as f:
                f.write(text)
    for path in stale:
        print(f"{'stale' if '--check' in argv else 'wrote'}: {os.path.relpath(path)}", file=sys.stderr)
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
