"""A pre-empted PBS job, brought back: what `qstat -f -F json ID` says a resubmission needs,
and where the script PBS ran is found to keep a copy of it (jobenv.launch.requeue.keptscript).

How PBS records the qsub command line (openpbs src/cmds/qsub.c, Libifl/xml_encode_decode.c,
cmds/qstat.c): qsub stores its argv in `Submit_arguments` one word per
`<jsdl-hpcpa:Argument>` element, each word XML-escaped; qstat decodes the elements and
joins them with one space, and `-F json` then writes that string (escaped by cJSON since
PBS 2021).  So the words are the string split at single spaces -- exactly, unless a word
held a space (`-N "my job"`, `-v "A=x y"`), which that split cannot see.  A word holding a
space splits into more words: an extra operand (qsub takes one, the script), or a value
that no longer matches what PBS recorded for it (Job_Name, Account_Name, Variable_List,
Output_Path, Error_Path).  (A space in a value no attribute echoes, with the script on
stdin, stays unseen: its word's tail then looks like the script's path, which a
resubmission never uses.)  Either makes the arguments ambiguous, and nothing is resubmitted.  Never
shlex: PBS never quoted them.

The script is never the file at Submit_arguments' path (relative to PBS_O_WORKDIR): after
the submission anyone who can write there may have replaced it.  PBS copied the script at
submission; the mother superior runs its copy, `$PBS_HOME/mom_priv/jobs/<id>.SC`, made the
job owner's (openpbs src/resmom/start_exec.c) in a directory only root writes (0751,
pbs_postinstall: the job's user may open a file there by name).  Its name is the job id
(req_runjob.c sets the job's hashname to its id, and req_quejob.c names the MOM's files by
it), PBS_JOBID inside the job.
"""
from __future__ import annotations

import os

from . import pbs_qstat
from .base import JobFacts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Mapping, Optional, Tuple

# qsub's getopt string (openpbs src/cmds/qsub_sup.c): a letter followed by ':' takes a value
_GETOPT = "a:A:c:C:e:fhIj:J:k:l:m:M:N:o:p:q:r:R:S:u:v:VW:XzP:"
_VALUED = frozenset(c for i, c in enumerate(_GETOPT) if c != ":" and _GETOPT[i + 1:i + 2] == ":")
_BARE = frozenset(c for c in _GETOPT if c != ":") - _VALUED
MAX_SCRIPT = 16 << 20


def split_arguments(text: str) -> Tuple[List[Tuple[str, str]], List[str], str]:
    """(options as (letter, value), operands, why not) of a decoded Submit_arguments, read
    as qsub's getopt reads argv (glibc's: options may follow operands, `--` ends them)."""
    if text == "":
        return [], [], ""
    words = text.split(" ")
    if "" in words:
        return [], [], "it holds an empty word or two spaces in a row"
    opts: List[Tuple[str, str]] = []
    operands: List[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        i += 1
        if w == "--":
            return [], [], "it runs a program (`qsub -- prog`), not a script"
        if not w.startswith("-") or w == "-":
            operands.append(w)
            continue
        j = 1
        while j < len(w):
            c = w[j]
            if c in _BARE:
                opts.append((c, ""))
                j += 1
            elif c in _VALUED:
                if j + 1 < len(w):
                    opts.append((c, w[j + 1:]))
                elif i < len(words):
                    opts.append((c, words[i]))
                    i += 1
                else:
                    return [], [], f"-{c} has no value"
                break
            else:
                return [], [], f"-{c} is not a qsub option"
    return opts, operands, ""


def _same(recorded: Any, given: str) -> bool:
    """A value as qstat printed it (cJSON turns `4` into a number) and as qsub was given it."""
    import json

    if isinstance(recorded, str):
        return recorded == given
    try:
        return bool(json.loads(given) == recorded)
    except ValueError:
        return False


def _variables(value: str) -> List[Tuple[str, Optional[str]]]:
    """`-v A=1,B,C=x\\,y`: (name, value or None) each, as PBS splits the list (at commas not escaped)."""
    out: List[Tuple[str, Optional[str]]] = []
    item, esc = "", False
    for ch in value + ",":
        if esc:
            item, esc = item + ch, False
        elif ch == "\\":
            esc = True
        elif ch == ",":
            name, eq, val = item.partition("=")
            out.append((name, val if eq else None))
            item = ""
        else:
            item += ch
    return out


def _mismatch(opts: List[Tuple[str, str]], attrs: Dict[str, Any], workdir: str) -> str:
    """The first option whose value is not what PBS recorded for it ("" when all are)."""
    variables = attrs.get("Variable_List")
    names = variables if isinstance(variables, dict) else {}
    for c, value in opts:
        if c == "N" and not _same(attrs.get("Job_Name"), value):
            return "-N"
        if c == "A" and not _same(attrs.get("Account_Name"), value):
            return "-A"
        if c == "v" and not all(n in names and (v is None or _same(names[n], v)) for n, v in _variables(value)):
            return "-v"
        if c in "oe":
            path = pbs_qstat.text(attrs, "Output_Path" if c == "o" else "Error_Path").partition(":")[2]
            given = value.partition(":")[2] if ":" in value else value
            if path and given and os.path.normpath(os.path.join(workdir, given)) != os.path.normpath(path) \
                    and not path.startswith(os.path.join(workdir, given).rstrip("/") + "/"):
                return f"-{c}"
    return ""


def submit_flags(attrs: Dict[str, Any], workdir: str) -> Tuple[Tuple[str, ...], str]:
    """(qsub's flags, script apart; why not) from a job's attributes."""
    raw = attrs.get("Submit_arguments", "")
    if not isinstance(raw, str):
        return (), "its Submit_arguments is not text"
    opts, operands, why = split_arguments(raw)
    if not why and len(operands) > 1:
        why = f"it has {len(operands)} operands where qsub takes one script"
    bad = "" if why else _mismatch(opts, attrs, workdir)
    if bad:
        why = f"its {bad} is not the value PBS recorded"
    if why:
        return (), (f"qstat's Submit_arguments is ambiguous ({why}; qstat joins qsub's words with spaces, so a "
                    "word holding a space cannot be told apart): jobenv resubmits nothing it would have to guess")
    flags: List[str] = []
    for c, value in opts:
        flags += [f"-{c}", value] if c in _VALUED else [f"-{c}"]
    return tuple(flags), ""


def parse_show(out: str) -> JobFacts:
    """The facts of `qstat -f -F json ID`: qsub's flags from `Submit_arguments`, PBS_O_WORKDIR,
    `Rerunable`, `run_count`, `job_state`, `substate` (pbs_qstat.jobs, the one reader)."""
    found = pbs_qstat.jobs(out)
    attrs = next(iter(found.values()), {}) if len(found) == 1 else {}
    runs = pbs_qstat.number(attrs, "run_count")
    state, requeueable = pbs_qstat.text(attrs, "job_state"), {"True": True, "False": False}.get(
        pbs_qstat.text(attrs, "Rerunable"))
    restarts, substate = runs - 1 if runs else None, pbs_qstat.number(attrs, "substate")
    if not attrs or pbs_qstat.AMBIGUOUS in attrs:
        return JobFacts(why="qstat did not describe the job unambiguously: jobenv passes on no flag read from it")
    if pbs_qstat.PARTIAL in attrs:
        return JobFacts(state=state, requeueable=requeueable, restarts=restarts, substate=substate,
                        why="qstat's JSON does not parse (a value PBS printed unescaped), so its Submit_arguments "
                            "cannot be read")
    variables = attrs.get("Variable_List")
    workdir = variables.get("PBS_O_WORKDIR", "") if isinstance(variables, dict) else ""
    if not isinstance(workdir, str) or not os.path.isabs(workdir):
        return JobFacts(state=state, requeueable=requeueable, restarts=restarts, substate=substate,
                        why="qstat names no PBS_O_WORKDIR to submit from")
    flags, why = submit_flags(attrs, workdir)
    return JobFacts(state=state, workdir=workdir, submit=flags, requeueable=requeueable, restarts=restarts,
                    substate=substate, why=why,
                    keeps_vars=_script_vars(flags, variables if isinstance(variables, dict) else {}))


def _script_vars(flags: Tuple[str, ...], variables: Dict[str, Any]) -> str:
    """Why a `-v` on qsub's command line would lose variables of the job's own ("" when it
    would not).  qsub takes the last -v it is given, and the command line's over the
    script's `#PBS -v` (openpbs qsub.c: `if_cmd_line`): a variable PBS recorded that is
    neither PBS's (PBS_O_*) nor on the command line's -v came from the script's directives
    (or its `#PBS -V`), and a -v added now would drop it."""
    if "-V" in flags:
        return ""
    given = {n for i, f in enumerate(flags[:-1]) if f == "-v" for n, _ in _variables(flags[i + 1])}
    lost = sorted(n for n in variables if not n.startswith("PBS_O_") and n not in given)
    return "" if not lost else (f"the job's batch script sets {', '.join(lost[:3])}{' ...' if len(lost) > 3 else ''} "
                                "by `#PBS -v`, which a `qsub -v` would override")


def pass_vars(facts: JobFacts, add: Mapping[str, str]) -> Tuple[Tuple[str, ...], str]:
    """qsub's flags with `add` passed by `-v` (qsub passes no environment without -V): merged
    into the command line's last -v, whose earlier entries of those names are dropped (qsub
    keeps only the last -v), else a -v of their own.  (facts.submit, why not) where a -v
    would lose the job's own variables (facts.keeps_vars) or a value holds a comma."""
    flags = list(facts.submit)
    if facts.keeps_vars:
        return facts.submit, f"{facts.keeps_vars}: the resubmitted job is not told it was resubmitted"
    if any("," in v or "\\" in v for v in add.values()):
        return facts.submit, "a value to pass by qsub -v holds a comma or backslash"
    mine = ",".join(f"{k}={v}" for k, v in add.items())
    at = max((i for i, f in enumerate(flags[:-1]) if f == "-v"), default=-1)
    if at < 0:
        return (*flags, "-v", mine), ""
    kept = [item for item in _raw_items(flags[at + 1]) if item.partition("=")[0] not in add]
    flags[at + 1] = ",".join([*kept, mine])
    return tuple(flags), ""


def _raw_items(value: str) -> List[str]:
    """A -v list split at its unescaped commas, each item as written (escapes kept)."""
    out, item, esc = [], "", False
    for ch in value:
        if esc:
            item, esc = item + ch, False
        elif ch == "\\":
            item, esc = item + ch, True
        elif ch == ",":
            out.append(item)
            item = ""
        else:
            item += ch
    return [*out, item] if item or out else []


def pbs_home(env: Mapping[str, str]) -> str:
    """PBS_HOME: the environment's, else pbs.conf's (PBS_CONF_FILE, default /etc/pbs.conf)."""
    if env.get("PBS_HOME", "").startswith("/"):
        return env["PBS_HOME"]
    from jobenv.core.readfile import read_bytes

    try:
        conf = read_bytes(env.get("PBS_CONF_FILE") or "/etc/pbs.conf", 1 << 16).decode("utf-8", "replace")
    except OSError:
        conf = ""
    for line in conf.splitlines():
        key, _, val = line.strip().partition("=")
        if key == "PBS_HOME" and val.startswith("/"):
            return val
    return "/var/spool/pbs"


def script(jobid: str, env: Mapping[str, str]) -> Tuple[Optional[bytes], str]:
    """The script PBS runs for `jobid`: the mother superior's copy, read only where no other
    user can have put or changed it (every directory on the way root's or ours and not
    writable by others; the file ours or root's, a regular file, not writable by others)."""
    import stat

    from jobenv.core.errors import BadRecord
    from jobenv.core.readfile import Refused, open_regular, read_open
    from jobenv.core.trust import check_ancestors

    if not jobid or "/" in jobid or jobid.startswith("."):
        return None, f"job id {jobid!r} names no file"
    path = os.path.join(pbs_home(env), "mom_priv", "jobs", jobid + ".SC")
    try:
        check_ancestors(path, "PBS's copy of the job script", hint="ask the site to fix PBS_HOME's permissions")
        fd, st = open_regular(path, nofollow=True)
    except BadRecord as exc:
        return None, str(exc)
    except (OSError, Refused) as exc:
        return None, f"PBS's copy of the job script, {path}, cannot be read ({exc.strerror or exc})"
    try:
        if st.st_uid not in (0, os.getuid()) or st.st_mode & 0o022 or not stat.S_ISREG(st.st_mode):
            return None, f"{path} is not the job owner's or root's alone"
        return read_open(fd, st, MAX_SCRIPT), ""
    except (OSError, Refused) as exc:
        return None, f"{path} cannot be read ({exc})"
    finally:
        os.close(fd)
