"""The one reader of PBS job attributes: `qstat -f -F json [ID...]` as {qstat id: attributes}.

Liveness (pbs.parse_json), `save --job` (pbs.parse_job, parse_found), `jobenv status`
(jobenv.batch.jobstate) and a requeue (pbs_requeue.parse_show) all read qstat through
`jobs`, so a rule about what to trust in qstat's answer is made once.

PBS Pro 2021 and later print the document with cJSON, escaped; older qstat wrote some
values (Job_Name, Variable_List) as they were, so a job name holding `"` or a newline can
make the text invalid JSON, or valid JSON with a key of its own making.  Hence:
- valid JSON: an object that names a key twice marks its job AMBIGUOUS (Python's json
  would keep the last one silently, and a value PBS left unescaped can add a key);
- not JSON: each job's simple attributes (KEYS, never the free text of Submit_arguments or
  Variable_List) are read from whole lines only (`"key":value` alone on its line, so a
  value holding `"job_state":"F"` inside it is no field), the job marked PARTIAL; a job
  header, or a key within one job, seen twice marks the job AMBIGUOUS, keeping nothing else.
A real qstat prints Job_Name before job_state, euser and exec_host, so a name that opens a
forged job block hands that block the real job's own later keys: naming one of them too
repeats it.
"""
from __future__ import annotations

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

# The attributes the line reader takes (values PBS may write unescaped, such as
# Variable_List and Submit_arguments, are never among them).
KEYS = ("Job_Name", "job_state", "euser", "Job_Owner", "exec_host", "exec_vnode", "queue", "Account_Name", "ngpus",
        "nodect", "select", "Exit_status", "Output_Path", "Rerunable", "run_count", "substate")
# Set on a job whose attributes cannot be told apart from a value's text: the key named twice.
AMBIGUOUS = "_ambiguous"
# Set on a job read line by line: its free-text attributes (Submit_arguments) were not read.
PARTIAL = "_partial"

_HEAD = r'^[ \t]*"([0-9]+(?:\[[0-9]*\])?(?:\.[^"\n]*)?)"[ \t]*:[ \t]*\{[ \t]*$'


class _Twice(dict):  # type: ignore[type-arg]
    """A JSON object with a key named twice (its first such key in `twice`)."""

    twice = ""


def _pairs(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k, v in pairs:
        if k in out and not isinstance(out, _Twice):
            out = _Twice(out)
            out.twice = k
        out[k] = v
    return out


def jobs(text: str) -> Dict[str, Dict[str, Any]]:
    """{qstat id: attributes} (Resource_List's entries merged in) from `qstat -f -F json`."""
    import json

    start = text.find("{")
    if start < 0:
        return {}
    try:
        data = json.JSONDecoder(object_pairs_hook=_pairs).raw_decode(text, start)[0]
    except (ValueError, RecursionError):  # deep nesting: not PBS's
        return _lines(text)
    found = data.get("Jobs") if isinstance(data, dict) else None
    if isinstance(data, _Twice) or isinstance(found, _Twice):  # a job id twice, or "Jobs" twice
        return {}
    out: Dict[str, Dict[str, Any]] = {}
    for qid, attrs in (found if isinstance(found, dict) else {}).items():
        if not isinstance(attrs, dict):
            continue
        res = attrs.get("Resource_List")
        twice = next((d.twice for d in (attrs, res) if isinstance(d, _Twice)), "")
        out[qid] = {AMBIGUOUS: twice} if twice else {**attrs, **(res if isinstance(res, dict) else {})}
    return out


def _lines(text: str) -> Dict[str, Dict[str, Any]]:
    import re

    out: Dict[str, Dict[str, Any]] = {}
    current: Optional[Dict[str, Any]] = None
    keys = "|".join(KEYS)
    for m in re.finditer(_HEAD + r'|^[ \t]*"(' + keys + r')"[ \t]*:[ \t]*(?:"([^"\\\n]*)"|(-?[0-9]{1,18}))[ \t]*,?[ \t]*$',
                         text, re.M):
        if m.group(1) is not None:
            qid = m.group(1)
            if qid in out:  # a second block of one job: one of them came from a value
                out[qid] = {AMBIGUOUS: "the job's id"}
            else:
                out[qid] = {PARTIAL: True}
            current = out[qid]
        elif current is not None and AMBIGUOUS not in current:
            if m.group(2) in current:  # a second `"euser": ...` line: one came from a user's value
                current.clear()
                current[AMBIGUOUS] = m.group(2)
            else:
                current[m.group(2)] = m.group(3) if m.group(3) is not None else int(m.group(4))
    return out


def text(attrs: Dict[str, Any], key: str) -> str:
    """An attribute as text ("" when absent or not text; cJSON prints numbers as numbers)."""
    val = attrs.get(key)
    return val if isinstance(val, str) else str(val) if isinstance(val, int) and not isinstance(val, bool) else ""


def number(attrs: Dict[str, Any], key: str) -> Optional[int]:
    """An attribute that is a count or a code (run_count, substate): None when absent or not a
    whole number (a bool is none: cJSON's true is not 1)."""
    val = attrs.get(key)
    return val if isinstance(val, int) and not isinstance(val, bool) and 0 <= val < 10**9 else None


# Substates PBS reports while it reruns a job itself (openpbs src/include/job.h:
# JOB_SUBSTATE_RERUN..RERUN3; req_rerun.c sets R/60 until the MoM has ended the job).
RERUNNING = (60, 61, 62, 63)
# R while a job runs, and still after `qdel` or at the walltime while the MoM delivers
# SIGTERM (req_delete.c; seen on a real server: R/41 right after qdel returns).
RUNNING = (41, 42)


def match(jobids: List[str], qid: str) -> List[str]:
    """Record ids that a qstat id names: exactly, or by the numeric part (`123` vs
    `123.server.domain`; plain `qstat` cuts long ids to `123.polaris-*`)."""
    base = qid.rstrip("*").split(".")[0]
    return [j for j in jobids if j == qid or j.split(".")[0] == base]


def job(text_: str, jobid: str) -> Tuple[str, Optional[Dict[str, Any]]]:
    """(qstat id, attributes) of `jobid` in the answer, ("", None) when it is not there."""
    return next(((q, a) for q, a in jobs(text_).items() if match([jobid], q)), ("", None))
