"""Render a record as shell code: bash/zsh (one dialect) and fish.

Every value goes through `quote`/`fish_quote`, so sourcing the output runs nothing but
assignments and one function definition, whatever bytes the record holds.  `launch` is a
shell function with "$@" (aliases are not expanded in bash scripts).

Variables the live scheduler already set in this shell for the same job are left alone;
variables of *another* job of any scheduler are unset (`stale`), so two jobs never mix.
"""
from __future__ import annotations

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Dict, Iterable, List, Mapping, Optional, Sequence

    from .record import JobRecord

# Characters that need no quoting in bash, zsh and fish.
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-")


def is_name(name: str) -> bool:
    """A shell variable name: ASCII letters, digits, underscore, not starting with a digit."""
    return name.isidentifier() and name.isascii()


JOBID_VAR = {"pbs": "PBS_JOBID", "slurm": "SLURM_JOB_ID", "cobalt": "COBALT_JOBID"}


def quote(s: str) -> str:
    """POSIX single-quote a string for bash and zsh."""
    if s and _SAFE.issuperset(s):
        return s
    return "'" + s.replace("'", "'\\''") + "'"


def fish_quote(s: str) -> str:
    """Single-quote for fish, where backslash and quote are escaped inside quotes."""
    if s and _SAFE.issuperset(s):
        return s
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def join(argv: Sequence[str]) -> str:
    return " ".join(quote(a) for a in argv)


def exports(record: JobRecord, record_path: str) -> Dict[str, str]:
    """The jobenv variables derived from the record, beside the scheduler's own."""
    out = dict(record.launch_env)
    out.update(
        HOSTFILE=record.hostfile or "",
        NHOSTS=str(record.nhosts),
        NGPU_PER_HOST=str(record.gpus_per_host),
        NGPUS=str(record.ngpus),
        NRANKS_PER_HOST=str(record.ranks_per_host),
        NRANKS=str(record.nranks),
        DIST_LAUNCH=join(record.launch),
        JOBENV_JOBID=record.jobid,
        JOBENV_SCHEDULER=record.scheduler,
        JOBENV_RECORD=record_path,
    )
    return out


def stale_vars(record: JobRecord, env: Mapping[str, str], prefixes: Mapping[str, Sequence[str]]) -> List[str]:
    """Variables in `env` that belong to a different job than `record` (to be unset)."""
    out: List[str] = []
    for sched, prefs in prefixes.items():
        same = sched == record.scheduler and env.get(JOBID_VAR[sched]) == record.jobid
        if same:
            continue
        out.extend(k for k in env if k.startswith(tuple(prefs)) and k not in record.env and is_name(k))
    return sorted(out)


def _header(record: JobRecord) -> str:
    return f"# jobenv: {record.scheduler} job {record.jobid} on {record.nhosts} host(s), profile {record.machine}"


def render_sh(record: JobRecord, record_path: str, stale: Iterable[str] = ()) -> str:
    """bash/zsh code: unset stale vars, restore the job's, define `launch`."""
    lines = [_header(record).replace("\n", " ")]
    stale = list(stale)
    if stale:
        lines.append("unset " + " ".join(stale))
    jid_var = JOBID_VAR.get(record.scheduler)
    if jid_var and record.env:
        # Same live job in this shell: keep what the scheduler set here.
        lines.append(f'if [ "${{{jid_var}-}}" = {quote(record.jobid)} ]; then _jobenv_keep=1; else _jobenv_keep=; fi')
        for k, v in record.env.items():
            if is_name(k):
                lines.append(f'[ -n "$_jobenv_keep" ] && [ -n "${{{k}+x}}" ] || export {k}={quote(v)}')
        lines.append("unset _jobenv_keep")
    for k, v in exports(record, record_path).items():
        lines.append(f"export {k}={quote(v)}")
    lines.append("unalias launch 2>/dev/null || true")
    # JOBENV_LAUNCH_TIME lets the selftest time launcher start -> process start
    lines.append(f'function launch {{ JOBENV_LAUNCH_TIME=$(date +%s.%N) {join(record.launch)} "$@"; }}')
    return "\n".join(lines) + "\n"


def render_fish(record: JobRecord, record_path: str, stale: Iterable[str] = ()) -> str:
    """fish code with the same meaning as render_sh."""
    lines = [_header(record).replace("\n", " ")]
    for k in stale:
        lines.append(f"set -e {k}")
    jid_var = JOBID_VAR.get(record.scheduler)
    if jid_var and record.env:
        lines.append(f'if test "${jid_var}" = {fish_quote(record.jobid)}; set -g _jobenv_keep 1; else; set -g _jobenv_keep 0; end')
        for k, v in record.env.items():
            if is_name(k):
                lines.append(f"test $_jobenv_keep = 1; and set -q {k}; or set -gx {k} {fish_quote(v)}")
        lines.append("set -e _jobenv_keep")
    for k, v in exports(record, record_path).items():
        lines.append(f"set -gx {k} {fish_quote(v)}")
    argv = " ".join(fish_quote(a) for a in record.launch)
    lines.append(f"function launch; env JOBENV_LAUNCH_TIME=(date +%s.%N) {argv} $argv; end")
    return "\n".join(lines) + "\n"


def render(shell: str, record: JobRecord, record_path: str, stale: Iterable[str] = ()) -> str:
    return (render_fish if shell == "fish" else render_sh)(record, record_path, stale)


def shell_from_env(env: Mapping[str, str], default: Optional[str] = None) -> str:
    name = env.get("SHELL", "").rsplit("/", 1)[-1]
    return name if name in ("bash", "zsh", "fish") else (default or "bash")
