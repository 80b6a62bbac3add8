"""The typed interface of a scheduler file (`Scheduler`), what its capture returns
(`Capture`), and how jobenv runs a scheduler's commands (found on PATH's absolute entries,
bounded).  Reading a scheduler's nodefile and variables is parse.py's.

A scheduler file (`jobenv/schedulers/<name>.py`) defines `SCHEDULER = Scheduler(...)`: its
facts as data (job-id variables, prefixes, marks, site variables, secrets, nodefile,
detection priority, generic profile) and its behaviour as functions (capture, the liveness
query and its parser).  Everything else reads the facts through the tables in
`jobenv/schedulers/tables.py`, which `python -m jobenv.schedulers.render` writes from
these descriptors (a test proves they are that rendering), so a shell in no job loads
no scheduler file.
"""
from __future__ import annotations

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

    Reader = Callable[[str], str]
    Verdicts = Dict[str, Tuple[str, str]]
    # (jobids, env, timeout) -> {jobid: ('live'|'ended', reason)}: one bounded scheduler query
    Query = Callable[[Sequence[str], Optional[Mapping[str, str]], float], Verdicts]
    # (scheduler output, its exit code, jobids asked) -> verdicts: pure, tested on recorded outputs
    Parser = Callable[[str, int, Sequence[str]], Verdicts]
    CaptureFn = Callable[[Mapping[str, str]], "Capture"]
    # (the CLI's text about one job, the job id asked) -> its Capture: pure, tested on recorded outputs
    JobParser = Callable[[str, str], "Capture"]
    # (the CLI's text listing jobs, this host, this user) -> ids of this user's running jobs on this host
    FindParser = Callable[[str, str, str], List[str]]


class Scheduler:
    """One scheduler's facts and behaviour: the one place a newcomer edits to add one.

    Detection: the shell holds a job of this scheduler when one of `detect_any` is set and
    all of `detect_all` are; `priority` orders the check (lower first) and, when two
    schedulers' variables are both present, one whose `nodefile_var` names a file that no
    longer exists loses (its variables are left over from an ended job).
    `marks` (with the job-id and `detect_any` variables) are every variable only a job of
    this scheduler sets: a shell holding one is in such a job, so a restore of another job
    clears this scheduler's variables and the shell's cached no-job snippet is not for it; `site_vars` describe the site (never cleared, restored only where the
    shell has none); `query_vars` are the site variables its CLI needs, taken from the
    record where a shell lacks them; `secrets` are names never persisted beyond the common
    rule (`schedulers.is_secret`).  `nodefile_var` is where its host list lives when it is a
    file (`import` falls back to an ezpz-style HOSTFILE when that file is gone); `hosts`
    says, for people, where the host list comes from.  `profile` is the shipped profile
    used when no machine profile matches.  `query` asks the scheduler about jobs; `parse`
    turns its output into verdicts.
    `requeue` (jobenv.launch.requeue.preempt reads it) says how a pre-empted job goes back in its
    queue, and how it is resubmitted where it cannot; None where jobenv cannot do either.

    Three facts tell jobenv where a scheduler's job differs from a batch job's (each read
    from its rendered table, so no path loads a scheduler file to ask): `allocates`, the
    scheduler gives the job its hosts and slots (without it a job takes this host's cores,
    and a launch may put more ranks on it than the record's); `asks_command`, what jobenv
    knows of a job's state comes from the scheduler's commands (so a verdict is worth
    caching, and only an id of its shape may reach one); `this_host_only`, the job's one
    host is the host jobenv runs on (ranks meet on the loopback, a per-host command runs
    directly, and a report from it is that host's whatever it calls itself).
    """

    __slots__ = ("requeue", "name", "jobid_vars", "prefixes", "detect_any", "detect_all", "marks", "site_vars",
                 "query_vars", "secrets", "program_vars", "nodefile_var", "hosts", "priority", "profile", "capture",
                 "query", "parse", "batch", "outside", "allocates", "asks_command", "this_host_only")

    def __init__(self, name: str, *, jobid_vars: Tuple[str, ...], prefixes: Tuple[str, ...],
                 detect_any: Tuple[str, ...], detect_all: Tuple[str, ...] = (),
                 marks: Tuple[str, ...] = (), site_vars: Tuple[str, ...] = (),
                 query_vars: Tuple[str, ...] = (), secrets: Tuple[str, ...] = (),
                 program_vars: Tuple[str, ...] = (),
                 nodefile_var: str = "", hosts: str, priority: int, profile: str,
                 capture: CaptureFn, query: Query, parse: Optional[Parser] = None,
                 batch: Optional[Batch] = None, outside: Optional[Outside] = None,
                 requeue: Optional[Requeue] = None, allocates: bool = True, asks_command: bool = True,
                 this_host_only: bool = False) -> None:
        self.name, self.jobid_vars, self.prefixes = name, jobid_vars, prefixes
        self.detect_any, self.detect_all = detect_any, detect_all
        self.marks = tuple(dict.fromkeys(jobid_vars + detect_any + marks))
        self.site_vars, self.query_vars, self.secrets = site_vars, query_vars, secrets
        self.program_vars = program_vars
        self.nodefile_var, self.hosts, self.priority, self.profile = nodefile_var, hosts, priority, profile
        self.capture, self.query, self.parse = capture, query, parse
        self.batch = batch  # how `jobenv submit` hands it a script (None: it takes none)
        self.outside = outside  # how `jobenv save --job ID` reads the job from outside it
        self.requeue = requeue
        self.allocates, self.asks_command, self.this_host_only = allocates, asks_command, this_host_only


class Batch:
    """How a batch script reaches this scheduler and comes back out (`jobenv submit`,
    `status`, `cancel`): facts as data, read by jobenv.batch.

    `prefix` starts each directive line (`#SBATCH`); `output` are the directives that send
    the script's stdout and stderr to `{output}`, `name` the one that names the job
    `{jobname}`; `submit` is the argv that submits `{script}` (`stdin`: the script goes to
    its standard input instead, as `bsub < script`), `jobid` the regular expression whose
    first group is the job id in what it prints; `cancel` is the argv that cancels a job
    (its id appended); `id_ok` says whether a text is shaped like this scheduler's job id
    (only such a text goes on its command line); `executable`: the scheduler runs the
    script file itself (Cobalt), so it must be mode 0700.
    """

    __slots__ = ("prefix", "output", "name", "submit", "stdin", "jobid", "cancel", "id_ok", "executable")

    def __init__(self, prefix: str, *, output: Tuple[str, ...], name: str, submit: Tuple[str, ...], jobid: str,
                 cancel: Tuple[str, ...], id_ok: Callable[[str], bool], stdin: bool = False,
                 executable: bool = False) -> None:
        self.prefix, self.output, self.name, self.submit, self.jobid = prefix, output, name, submit, jobid
        self.cancel, self.id_ok, self.stdin, self.executable = cancel, id_ok, stdin, executable

    def read_jobid(self, out: str) -> Optional[str]:
        """The job id in what the submit command printed, if one of this scheduler's shape is there."""
        import re

        m = re.search(self.jobid, out, re.M)
        return m.group(1) if m and self.id_ok(m.group(1)) else None


class Outside:
    """How a job is captured from outside it (`jobenv save --job ID` on a login node): the
    scheduler's own description of one job, and of this user's jobs on this host.

    `show` + [jobid] is the argv describing one job, `parse` turns its text into a Capture
    (with `state`, `owner` and `sources` set); `find(host, user)` is the argv listing jobs
    and `found` picks this user's running ones on `host` from its text.  `id_ok` says
    which ids may go on the command line (never an option, never a second word)."""

    __slots__ = ("show", "parse", "find", "found", "id_ok", "running", "ended")

    def __init__(self, show: Tuple[str, ...], parse: JobParser, find: Callable[[str, str], List[str]],
                 found: FindParser, id_ok: Callable[[str], bool], running: Tuple[str, ...],
                 ended: Tuple[str, ...]) -> None:
        self.show, self.parse, self.find, self.found, self.id_ok = show, parse, find, found, id_ok
        self.running = running  # the job states in which the job holds its nodes
        self.ended = ended  # the states of a job that is over (any other: not started yet)


class JobFacts:
    """What the scheduler says of a running job that a requeue or a resubmission needs
    (a scheduler file's `Requeue.parse` makes it from the `show` command's output)."""

    def __init__(self, state: str = "", workdir: str = "", submit: Tuple[str, ...] = (),
                 requeueable: Optional[bool] = None, restarts: Optional[int] = None, why: str = "",
                 substate: Optional[int] = None, keeps_vars: str = "") -> None:
        self.state = state  # the scheduler's own word: RUNNING, PREEMPTED, CANCELLED; R, E
        self.substate = substate  # PBS's substate number (42 running, 60-63 being rerun); None elsewhere
        self.keeps_vars = keeps_vars  # why passing a variable by the submit flag would lose the job's own ("": it may)
        self.workdir = workdir  # where it was submitted from
        self.submit = submit  # the submission's flags (the script apart), as a resubmission passes them
        self.requeueable, self.restarts = requeueable, restarts
        self.why = why  # why `submit` is empty: what a resubmission needs


class Requeue:
    """How this scheduler puts a pre-empted job back in its queue: data, rendered by
    jobenv.launch.requeue.preempt.  Words in braces are filled in: {jobid}.

    `argv` requeues the job (it keeps its id; the rerun counts itself in `restart_var`);
    `show` asks about the job (state, flags), `parse` reads its output; `script(jobid, env)`
    reads the batch script as the scheduler keeps it, never from the path it was submitted
    from ((bytes, "") or (None, why not): jobenv.launch.requeue.keptscript keeps it); `submit`
    resubmits that copy; `running` are the states in which a SIGTERM means "you are
    pre-empted, the job stays" (in any other, such as Slurm's COMPLETING right after
    `scancel` or a time limit, someone or something ended the job: it is not brought back);
    `needs` says what a container without the client commands must bind in.

    `rules` come first: (signals, states, substates, verdict) each, the first whose three
    match decides (an empty tuple matches anything; a rule needs a substate in `substates`
    when it names some); its verdict, a key of jobenv.launch.requeue.preempt.VERDICTS, says why the
    job is not brought back.  `pass_vars(facts, {name: value})` gives the submit flags
    that hand the new job those variables ((flags, "") or (facts.submit, why not)), for a
    scheduler whose submit passes no environment (qsub); None: the environment passes."""

    __slots__ = ("argv", "show", "parse", "script", "submit", "restart_var", "running", "needs", "rules", "pass_vars")

    def __init__(self, argv: Tuple[str, ...], show: Tuple[str, ...], parse: Callable[[str], JobFacts], *,
                 submit: str, needs: str, script: Callable[[str, Mapping[str, str]], Tuple[Optional[bytes], str]],
                 restart_var: str = "", running: Tuple[str, ...] = (),
                 rules: Tuple[Tuple[Tuple[str, ...], Tuple[str, ...], Tuple[int, ...], str], ...] = (),
                 pass_vars: Optional[Callable[[JobFacts, Mapping[str, str]], Tuple[Tuple[str, ...], str]]] = None
                 ) -> None:
        self.argv, self.show, self.parse, self.script, self.submit = argv, show, parse, script, submit
        self.restart_var, self.running, self.needs, self.rules, self.pass_vars = (
            restart_var, running, needs, rules, pass_vars)


def run_parsed(argv: List[str], jobids: Sequence[str], parse: Parser, env: Optional[Mapping[str, str]],
                 timeout: float) -> Verdicts:
    """One bounded run of a scheduler CLI whose last arguments are `jobids`, parsed; no
    verdict at all when the CLI is absent or silent."""
    if not jobids:
        return {}
    res = run_query(argv, env, timeout)
    if res is None:
        return {}
    return parse(res[1], res[0], jobids)


class Capture:
    """A scheduler's view of the job, before devices and profile are added.

    (A plain class: this module is on the `jobenv get` path, where dataclasses cost too much.)
    """

    def __init__(self, scheduler: str, jobid: str, hosts: List[str], env: Dict[str, str],
                 jobname: Optional[str] = None, slots: Optional[List[int]] = None,
                 gpus_hint: Optional[int] = None, nodefile: Optional[str] = None,
                 warnings: Optional[List[str]] = None, state: str = "", owner: str = "",
                 sources: Optional[Dict[str, str]] = None) -> None:
        self.scheduler, self.jobid, self.hosts, self.env = scheduler, jobid, hosts, env
        self.jobname = jobname
        self.slots = slots  # MPI slots per host, in host order, when known
        self.gpus_hint = gpus_hint  # the scheduler's own per-node GPU count (Slurm gres)
        self.nodefile = nodefile  # the scheduler's hostfile, when it has one
        self.warnings = warnings if warnings is not None else []
        # set by a capture from outside the job (Outside.parse): the scheduler's job state,
        # the owner as it names them, and where each field came from
        self.state, self.owner = state, owner
        self.sources = sources if sources is not None else {}


def command_path(program: str, path: Optional[str] = None) -> Optional[str]:
    """The absolute path of the executable `program` (sbatch, qstat, scancel, ...) on PATH
    (os.environ's when None), found through absolute directories only: `.`, an empty entry
    or a relative one names the working directory, where another user may have put an
    `sbatch` of their own (the restore plan writes only absolute PATH entries, too).  The
    one lookup of the commands jobenv runs on its own behalf: run what it returns, never the
    bare name (exec would search PATH again, relative entries and all).  shutil.which
    without importing shutil, which with subprocess would cost `jobenv get` ~5 ms."""
    import os

    if "/" in program:  # a path already: only an absolute one
        return program if os.path.isabs(program) and _executable(program) else None
    path = os.environ.get("PATH", "") if path is None else path
    for d in path.split(os.pathsep):
        if d.startswith("/") and _executable(os.path.join(d, program)):
            return os.path.join(d, program)
    return None


def _executable(p: str) -> bool:
    import os
    import stat

    try:
        return stat.S_ISREG(os.stat(p).st_mode) and os.access(p, os.X_OK)
    except OSError:
        return False


def on_path(program: str, path: Optional[str] = None) -> bool:
    """Is `program` an executable on PATH (command_path's rule)?"""
    return command_path(program, path) is not None


def run_output(argv: List[str], env: Mapping[str, str], timeout: float, limit: int) -> Tuple[int, bytes, str]:
    """Run a scheduler CLI for its output as bytes (at most `limit`; more is an error), apart
    from its messages: (exit code, stdout, stderr's first line or why it did not run)."""
    import subprocess

    try:
        p = subprocess.run(argv, capture_output=True, timeout=timeout, env=dict(env), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return 127, b"", str(exc)
    said = " ".join(p.stderr.decode("utf-8", "replace").split())[:300]
    if len(p.stdout) > limit:
        return 1, b"", f"it wrote more than {limit >> 20} MiB"
    return p.returncode, p.stdout, said


def run_query(argv: List[str], env: Optional[Mapping[str, str]] = None, timeout: float = 5.0) -> Optional[Tuple[int, str]]:
    """Run a scheduler CLI; None when it is not installed or does not answer within
    `timeout` seconds (it is killed then).  Returns (exit code, stdout + stderr)."""
    exe = command_path(argv[0], env.get("PATH") if env else None)
    if exe is None:
        return None
    import subprocess
    try:
        p = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, errors="replace", timeout=timeout,
                           env=dict(env) if env is not None else None, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.returncode, (p.stdout or "") + (p.stderr or "")
