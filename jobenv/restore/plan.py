"""The restore plan: everything a restore does, decided once, as data.

`build(record, record_path, environ, ...)` answers every question a restore asks: which
job and why, whether it is alive, whether the store was safe, which variables of this
shell to unset (job-scoped variables of *another* job, one whose marks this shell holds;
never site configuration, never a jobless shell's own settings),
which to keep (the same live job set them here), which to set, what to put first on
PATH, what `launch` runs, and what to warn about.  The bash/zsh, POSIX sh, fish and
env-file renderers (jobenv.restore.shell) only write a Plan out, and `apply` gives the
environment `jobenv launch` runs with, so no copy of these rules can drift from another.

Which names a record may restore is decided here too, whatever bytes the record holds:
the record's own scheduler variables (by prefix, minus secrets such as PBS_JOBCOOKIE)
and the profile's launch variables when their names are upper-case and not on the deny
list below (PATH, PROMPT_COMMAND, BASH_ENV, LD_PRELOAD, ... would run code in the shell
or in every program started from it).
"""
from __future__ import annotations

from jobenv.core.errors import JobEnded
from jobenv.core.numparse import plural
from jobenv.core.quoting import join_argv
from jobenv.schedulers import JOB_MARKERS, JOBID_VARS, PREFIXES, SHELL_ONLY, SITE_VARS, all_prefixes, is_secret

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Callable, Dict, Iterable, List, Mapping, Sequence, Tuple

    from jobenv.store.record import JobRecord

# SITE_VARS (each scheduler file's `site_vars`: they describe the site, not a job) are never
# cleared, and restored only where the shell has none of its own; is_secret (names that
# authenticate to the job's daemons) are never restored: both from jobenv.schedulers.
# Launch variables a record may never set: they make the shell, the loader or an
# interpreter run code, or they are jobenv's own, or read-only in some shell.
_LAUNCH_DENY = frozenset((
    "PATH", "HOME", "SHELL", "ENV", "BASH_ENV", "IFS", "CDPATH", "FPATH", "PROMPT_COMMAND",
    "PROMPT", "PROMPT2", "PROMPT3", "PROMPT4", "RPROMPT", "RPROMPT2", "RPS1", "RPS2", "PS0",
    "PS1", "PS2", "PS3", "PS4", "SHELLOPTS", "BASHOPTS", "GLOBIGNORE", "HISTFILE", "HISTCMD",
    "HOSTNAME", "HOST", "USER", "LOGNAME", "PWD", "OLDPWD", "SHLVL", "UID", "EUID", "PPID",
    "TMOUT", "TERM", "TERMINFO", "TMPDIR", "ZDOTDIR", "INPUTRC", "MAIL", "MAILPATH",
    "MAILCHECK", "EDITOR", "VISUAL", "PAGER", "MANPAGER", "BROWSER", "LESSOPEN", "LESSCLOSE",
    "GLIBC_TUNABLES", "GCONV_PATH", "HOSTALIASES", "LOCPATH", "NLSPATH", "RESOLV_HOST_CONF",
    "SSH_ASKPASS", "SUDO_ASKPASS", "NODE_OPTIONS", "RUBYOPT", "RUBYLIB", "PERL5OPT",
    "PERL5LIB", "PERLLIB", "HISTCONTROL", "HISTIGNORE", "FIGNORE", "EXECIGNORE",
    "OPTIND", "OPTARG", "RANDOM", "SECONDS", "LINENO", "MODULEPATH", "LOADEDMODULES",
    "DIST_LAUNCH", "HOSTFILE", "NHOSTS", "NGPUS", "NGPU_PER_HOST", "NRANKS", "NRANKS_PER_HOST",
))
# Every scheduler's prefixes too (SLURM without its underscore: also slurmd's SLURMD_*).
_LAUNCH_DENY_PREFIXES = ("LD_", "DYLD_", "BASH", "ZSH", "FISH", "KSH", "PYTHON", "JOBENV_",
                         "GIT_", "XDG_", "SSH_", "LC_", "SLURM", "HIST") + all_prefixes()
_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def is_name(name: str) -> bool:
    """A shell variable name: ASCII letters, digits, underscore, not starting with a digit."""
    return name.isidentifier() and name.isascii()


def job_var_ok(name: str, scheduler: str) -> bool:
    """May a record of `scheduler` restore `name`?  Its own prefixes, a valid name, no secret,
    nothing that chooses a program (SHELL_ONLY)."""
    return (is_name(name) and name.startswith(PREFIXES.get(scheduler, ())) and not is_secret(name)
            and name not in SHELL_ONLY)


def launch_var_ok(name: str) -> bool:
    """May a record's launch_env (the profile's `env:`) set `name`?"""
    return (bool(name) and not name[0].isdigit() and _UPPER.issuperset(name) and name not in _LAUNCH_DENY
            and not name.startswith(_LAUNCH_DENY_PREFIXES) and not is_secret(name))


# jobenv's own settings: never set by a restore (the derived JOBENV_* come from `derived`).
_JOBENV_SETTINGS = frozenset(("JOBENV_HOME", "JOBENV_HOSTNAME", "JOBENV_PROFILES", "JOBENV_LOCK",
                              "JOBENV_LOCK_STALE", "JOBENV_GPUS_PER_HOST", "JOBENV_RANKS_PER_HOST",
                              "JOBENV_JOBID", "JOBENV_SCHEDULER", "JOBENV_RECORD"))


def item_var_ok(name: str) -> bool:
    """May another concern's restore items (software, stage) set `name`?  As launch_env,
    plus jobenv's own JOBENV_* variables that are not its settings."""
    if name.startswith("JOBENV_"):
        return _UPPER.issuperset(name) and name not in _JOBENV_SETTINGS
    return launch_var_ok(name)


def job_scoped(name: str) -> bool:
    """A variable of some scheduler's job (not site configuration): cleared for another job."""
    return is_name(name) and name not in SITE_VARS and any(name.startswith(p) for ps in PREFIXES.values() for p in ps)


def other_job_prefixes(record: JobRecord, environ: Mapping[str, str]) -> Tuple[str, ...]:
    """The variable prefixes of each scheduler of which this shell holds a job (a job id, host
    list or nodefile: schedulers.JOB_MARKERS) other than the record's: that job's variables
    would mix with the restored one's, so they go.  A shell in no job keeps its own: a login
    shell's SLURM_MPI_TYPE or SLURM_ACCOUNT are the user's settings, not another job's (and
    the record's own values still win)."""
    out: List[str] = []
    for scheduler, names in JOB_MARKERS.items():
        if any(environ.get(n) for n in names) and not (scheduler == record.scheduler and in_same_job(record, environ)):
            out.extend(PREFIXES[scheduler])
    return tuple(out)


def in_same_job(record: JobRecord, environ: Mapping[str, str]) -> bool:
    """Is this shell inside the very job the record describes (its scheduler set our variables)?"""
    return any(environ.get(v) == record.jobid for v in JOBID_VARS.get(record.scheduler, ()))


class Plan:
    """Everything one restore does.  Plain slots: dataclasses cost the `get` path too much."""

    __slots__ = ("scheduler", "jobid", "record_path", "machine", "nhosts", "why", "state",
                 "state_reason", "store", "unset", "keep", "set", "path_prepend", "launch",
                 "warnings", "refused")

    def __init__(self, scheduler: str, jobid: str, record_path: str, machine: str, nhosts: int,
                 why: str, state: str, state_reason: str, store: str, unset: List[str],
                 keep: List[str], set: Dict[str, str], path_prepend: List[str], launch: List[str],
                 warnings: List[str], refused: List[str]) -> None:
        self.scheduler, self.jobid, self.record_path, self.machine = scheduler, jobid, record_path, machine
        self.nhosts, self.why, self.state, self.state_reason, self.store = nhosts, why, state, state_reason, store
        self.unset, self.keep, self.set, self.path_prepend = unset, keep, set, path_prepend
        self.launch, self.warnings, self.refused = launch, warnings, refused

    def to_dict(self) -> Dict[str, object]:
        return {k: getattr(self, k) for k in self.__slots__}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Plan) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"Plan({self.to_dict()!r})"


def derived(record: JobRecord, record_path: str) -> Dict[str, str]:
    """The jobenv variables computed from the record, beside the scheduler's own."""
    return {
        "HOSTFILE": record.hostfile or "", "NHOSTS": str(record.nhosts),
        "NGPU_PER_HOST": str(record.gpus_per_host), "NGPUS": str(record.ngpus),
        "NRANKS_PER_HOST": str(record.ranks_per_host), "NRANKS": str(record.nranks),
        "DIST_LAUNCH": join_argv(record.launch), "JOBENV_JOBID": record.jobid,
        "JOBENV_SCHEDULER": record.scheduler, "JOBENV_RECORD": record_path,
    }


def _allowed(values: Mapping[str, str], ok: Callable[[str], bool], refused: List[str]) -> Dict[str, str]:
    """The variables `ok` lets a record set, in name order; the others' names go to `refused`."""
    out: Dict[str, str] = {}
    for k in sorted(values):
        if ok(k):
            out[k] = values[k]
        else:
            refused.append(k)
    return out


def build(record: JobRecord, record_path: str, environ: Mapping[str, str], *,
          why: str = "", state: Tuple[str, str] = ("unknown", "not checked"), store: str = "ok",
          allow_stale: bool = False, jobenv_argv: Sequence[str] = ("jobenv",),
          extra: Iterable[Tuple[Dict[str, str], List[str], List[str]]] = (),
          warnings: Sequence[str] = ()) -> Plan:
    """The plan for restoring `record` into a shell whose environment is `environ`.

    `state` is the liveness verdict (live|ended|unknown, reason); `store` the store's
    safety verdict; `extra` the (set, path_prepend, warnings) items of other concerns
    (software environment, staged files), applied after the job's own variables, in order:
    a later item overrides an earlier one (the staged copy's VIRTUAL_ENV and `bin` win over
    the shared venv's).
    Raises JobEnded for an ended job unless allow_stale.
    """
    warn = list(warnings)
    if state[0] == "ended":
        if not allow_stale:
            raise JobEnded(f"job {record.jobid} has ended ({state[1]}); pass --allow-stale to restore "
                           "it anyway, or `jobenv rm` it")
        warn.append(f"job {record.jobid} has ended ({state[1]}); restoring it anyway (--allow-stale)")
    same = in_same_job(record, environ)
    refused: List[str] = []
    job_env = _allowed(record.env, lambda k: job_var_ok(k, record.scheduler), refused)
    launch_env = _allowed(record.launch_env, launch_var_ok, refused)
    keep: List[str] = []
    sets: Dict[str, str] = {}
    own = PREFIXES.get(record.scheduler, ())
    for k, v in job_env.items():
        if k in environ and (same or k in SITE_VARS):
            keep.append(k)
        else:
            sets[k] = v
    if same:  # the live job's other variables (its step, its tasks) are the scheduler's business
        keep.extend(k for k in environ if k.startswith(own) and k not in job_env and job_scoped(k))
    sets.update(launch_env)
    sets.update(derived(record, record_path))
    path_prepend: List[str] = []
    for item_set, item_path, item_warn in extra:
        for k, v in item_set.items():
            if item_var_ok(k):
                sets[k] = v
            else:
                refused.append(k)
        # a later concern overrides an earlier one: its variables replace, its PATH goes first
        path_prepend[:0] = [p for p in item_path if p.startswith("/") and ":" not in p and p not in path_prepend]
        warn.extend(item_warn)
    other = other_job_prefixes(record, environ)
    unset = sorted(k for k in environ if k.startswith(other) and job_scoped(k) and k not in sets and k not in keep)
    if unset:
        warn.append(f"clearing {plural(len(unset), 'variable')} of another job from this shell")
    if refused:
        warn.append(f"not restoring {plural(len(refused), 'variable')} a record may not set: "
                    + ", ".join(repr(k) for k in refused[:5]))
    return Plan(
        scheduler=record.scheduler, jobid=record.jobid, record_path=record_path, machine=record.machine,
        nhosts=record.nhosts, why=why, state=state[0], state_reason=state[1], store=store,
        unset=unset, keep=sorted(keep), set=sets, path_prepend=path_prepend,
        launch=[*jobenv_argv, "launch", "--job", record.jobid, "--"], warnings=warn, refused=refused,
    )


def apply(plan: Plan, environ: Mapping[str, str]) -> Dict[str, str]:
    """The environment after the plan: what sourcing the rendered plan leaves in a shell."""
    env = {k: v for k, v in environ.items() if k not in plan.unset}
    env.update(plan.set)
    if plan.path_prepend:  # each directory once, first: PATH's own copies of it go (as in the shells)
        old = env.get("PATH", "")
        rest = [d for d in old.split(":") if d not in plan.path_prepend] if old else []
        env["PATH"] = ":".join(plan.path_prepend + ([":".join(rest)] if ":".join(rest) else []))
    return env
