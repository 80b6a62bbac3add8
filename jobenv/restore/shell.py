"""Write a restore Plan (jobenv.restore.plan) out as shell code: bash/zsh, POSIX sh, fish, env file.

The renderers decide nothing: the plan says what to unset, set and define.  They only
quote, and they quote every value, so that whatever bytes a record holds, sourcing the
output runs nothing but the plan and every shell reads every byte back exactly:
- bash and zsh: single quotes; a newline is written `$'\\n'` outside them, because zsh
  with CSH_JUNKIE_QUOTES refuses a newline inside quotes, and a quoted value never
  meets zsh's `=cmd`, `a:=b` or `~` expansions.
- POSIX sh (dash, busybox ash, the env file): single quotes; a newline comes from
  `"$_jobenv_nl"`, built without one in quotes (dash has no `$'...'`); `launch() {...}`
  syntax, no `local`, no `function`.
- fish: printable ASCII in single quotes (`\\\\` and `\\'` escaped), every other byte
  as a `\\xHH` escape, which fish turns back into that exact byte.
"""
from __future__ import annotations

from jobenv.core.errors import one_line
from jobenv.core.numparse import plural
from jobenv.restore.plan import Plan
from jobenv.core.quoting import fish_quote, join_argv, quote

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import List, Mapping, Optional, Sequence

    from jobenv.store.record import JobRecord

DIALECTS = ("bash", "zsh", "sh", "fish")
# What the process running `jobenv get` is called -> the dialect it reads.
_COMM = {"bash": "bash", "zsh": "zsh", "fish": "fish", "sh": "sh", "dash": "sh", "ash": "sh",
         "busybox": "sh", "ksh": "sh", "ksh93": "sh", "mksh": "sh", "pdksh": "sh", "yash": "sh",
         "posh": "sh", "lksh": "sh"}
_NL_SH = '"$_jobenv_nl"'
_NL_BASH = "$'\\n'"


def _quote_lines(s: str, newline: str) -> str:
    """Single-quoted runs, with each newline written as `newline` outside the quotes."""
    return newline.join(quote(p) if p else "" for p in s.split("\n")) or "''"


def quote_bash(s: str) -> str:
    """For bash and zsh under any options: no newline ever inside quotes."""
    return _quote_lines(s, _NL_BASH)


def quote_sh(s: str) -> str:
    """For any POSIX sh; needs `_jobenv_nl` defined first when `s` holds a newline."""
    return _quote_lines(s, _NL_SH)


def join(argv: Sequence[str]) -> str:
    """One POSIX-quoted command line."""
    return join_argv(argv)


def _header(plan: Plan) -> str:
    return one_line(f"# jobenv: {plan.scheduler} job {plan.jobid} on {plural(plan.nhosts, 'host')}, profile "
                    f"{plan.machine}; {plan.why}; {plan.state} ({plan.state_reason})")


def render_posix(plan: Plan, dialect: str = "bash", warnings: bool = False) -> str:
    """bash/zsh (dialect bash or zsh) or POSIX sh (dialect sh) code carrying out `plan`."""
    q = quote_sh if dialect == "sh" else quote_bash
    lines = [_header(plan)]
    if warnings:  # the cached snippet says what `jobenv get` would have said
        lines += [f"printf 'jobenv: warning: %s\\n' {q(one_line(w))} >&2" for w in plan.warnings]
    values = list(plan.set.values()) + plan.path_prepend + plan.launch + plan.warnings
    nl = dialect == "sh" and any("\n" in v for v in values)
    if nl:  # a newline made without a newline inside quotes (zsh CSH_JUNKIE_QUOTES)
        lines.append("_jobenv_nl=$(printf '\\nx'); _jobenv_nl=${_jobenv_nl%x}")
    if plan.unset:
        lines.append("unset " + " ".join(plan.unset))
    # Assignments stand alone and `export` takes names only: under bash's `set -k` an
    # `export NAME=value` word goes into export's own environment and assigns nothing.
    lines += [f"{k}={q(v)}" for k, v in plan.set.items()]
    if plan.path_prepend:  # PATH's own copies of them go (plan.apply does the same): no dir twice
        dirs = " ".join(q(p) for p in plan.path_prepend)
        lines.append(f'_jobenv_p=":${{PATH-}}:"; for _jobenv_d in {dirs}; do while case $_jobenv_p in '
                     '*":$_jobenv_d:"*) true;; *) false;; esac; do _jobenv_p="${_jobenv_p%%":$_jobenv_d:"*}:'
                     '${_jobenv_p#*":$_jobenv_d:"}"; done; done; _jobenv_p=${_jobenv_p#:}; _jobenv_p=${_jobenv_p%:}')
        lines.append("PATH=" + ":".join(q(p) for p in plan.path_prepend) + '"${_jobenv_p:+:$_jobenv_p}"')
        lines.append("unset _jobenv_p _jobenv_d")
    names = list(plan.set) + (["PATH"] if plan.path_prepend else [])
    if names:
        lines.append("export " + " ".join(names))
    lines.append("unalias launch 2>/dev/null || true")
    lines.append("launch() { " + " ".join(q(a) for a in plan.launch) + ' "$@"; }')
    if nl:
        lines.append("unset _jobenv_nl")
    return "\n".join(lines) + "\n"


def render_fish(plan: Plan) -> str:
    """fish code with the same meaning as render_posix."""
    lines = [_header(plan)]
    lines += [f"set -e {k}" for k in plan.unset]
    lines += [f"set -gx {k} {fish_quote(v)}" for k, v in plan.set.items()]
    if plan.path_prepend:  # as render_posix: PATH's own copies of them go
        dirs = " ".join(fish_quote(p) for p in plan.path_prepend)
        lines.append(f"set -l _jobenv_p; for _jobenv_d in $PATH; contains -- $_jobenv_d {dirs}; "
                     "or set -a _jobenv_p $_jobenv_d; end")
        lines.append(f"set -gx PATH {dirs} $_jobenv_p; set -e _jobenv_p _jobenv_d")
    lines.append("function launch; " + " ".join(fish_quote(a) for a in plan.launch) + " $argv; end")
    return "\n".join(lines) + "\n"


def render(dialect: str, plan: Plan) -> str:
    return render_fish(plan) if dialect == "fish" else render_posix(plan, dialect)


def env_file(record: JobRecord, record_path: str, jobenv_argv: Sequence[str]) -> str:
    """The record's env file: POSIX sh that any sh-family shell can source on its own.

    It is the plan for a shell with no job of its own (nothing to unset or keep); a shell
    that has one should use `jobenv get`, which also checks the store and the job.
    """
    from jobenv.restore.plan import build

    p = build(record, record_path, {}, why="env file written at save", jobenv_argv=jobenv_argv,
              state=("unknown", "the env file does not check"), allow_stale=True)
    return render_posix(p, "sh")


def dialect_of(comm: str) -> Optional[str]:
    """The dialect a process called `comm` reads (login shells are `-bash`), or None."""
    name = comm.strip().lstrip("-").rsplit("/", 1)[-1]
    return _COMM.get(name)


def parent_dialect() -> Optional[str]:
    """The dialect of the shell running `jobenv get` (`source <(jobenv get)`), from /proc."""
    import os

    try:
        with open(f"/proc/{os.getppid()}/comm", "rb") as f:
            return dialect_of(f.read().decode("ascii", "replace"))
    except OSError:
        return None


def shell_from_env(env: Mapping[str, str], default: Optional[str] = None) -> str:
    """$SHELL, the login shell: only a fallback when the parent process says nothing."""
    return dialect_of(env.get("SHELL", "")) or default or "bash"


def jobenv_argv() -> List[str]:
    """How `launch` calls this very jobenv: this interpreter running the `jobenv` module,
    never from the caller's working directory (jobenv.core.interpreter says how)."""
    import sys

    from jobenv.core.interpreter import module_argv

    return module_argv(sys.executable, "jobenv")


def render_sh(record: JobRecord, record_path: str) -> str:
    """The env file (what `jobenv save` writes beside the record)."""
    return env_file(record, record_path, jobenv_argv())
