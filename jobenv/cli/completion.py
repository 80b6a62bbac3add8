"""Shell completion: click's scripts, written at run time, plus job ids and profile names.

Nothing is committed under completions/: click's scripts change with click releases, so
`jobenv completion SHELL` asks the installed click for them every time (and `jobenv init`
loads them on the first TAB).  Values that only the store knows (job ids) or the profile
search path (profile names) complete dynamically through `attach`, which gives every
parameter named `job` or `profile` of every command the same completer, so a new command
gets it without remembering to.
"""
from __future__ import annotations

import os
from typing import Callable, Dict, List

import click
from click.shell_completion import CompletionItem, get_completion_class

SHELLS = ["bash", "zsh", "fish"]

# zsh: `compdef` exists only after compinit.  Sourced before it, click's script would fail
# with "command not found: compdef"; this keeps its registration for the first prompt.
# As `_jobenv` on fpath, click's script completes on the first TAB only (later calls just
# re-register it); the tail below completes on those calls too.
_ZSH_BEFORE = """\
#compdef jobenv
# jobenv completion for zsh, written by the installed click at run time.
#   on fpath:  jobenv completion zsh > ~/.zfunc/_jobenv   (fpath=(~/.zfunc $fpath) before compinit)
#   or in ~/.zshrc, before or after compinit:  eval "$(jobenv completion zsh)"
if [[ ${zsh_eval_context[-1]-} != loadautofunc ]] && (( ! $+functions[compdef] )); then
    typeset -ga _jobenv_compdef_args
    compdef() { _jobenv_compdef_args=("$@") }
    typeset -g _jobenv_compdef_shim=1
fi
"""
_ZSH_AFTER = """
if [[ ${funcstack[1]-} == _jobenv && ${zsh_eval_context[-1]-} != loadautofunc ]]; then
    # `_jobenv` from fpath, called again: click's script above only re-registered itself
    if [[ -n ${_comps[jobenv]-} && ${_comps[jobenv]-} != _jobenv ]]; then "${_comps[jobenv]}" "$@"; fi
elif (( ${+_jobenv_compdef_shim} )); then
    unset _jobenv_compdef_shim
    unfunction compdef
    _jobenv_compdef_late() {
        add-zsh-hook -d precmd _jobenv_compdef_late
        if (( $+functions[compdef] && ${#_jobenv_compdef_args} )); then compdef "${_jobenv_compdef_args[@]}"; fi
        unset _jobenv_compdef_args
        unfunction _jobenv_compdef_late
    }
    autoload -Uz add-zsh-hook && add-zsh-hook precmd _jobenv_compdef_late
fi
"""


def source(shell_name: str, group: click.Command) -> str:
    """The completion script for `jobenv` in `shell_name`, from the installed click."""
    text = get_completion_class(shell_name)(group, {}, "jobenv", "_JOBENV_COMPLETE").source()  # type: ignore[misc]
    if shell_name == "zsh":
        text = _ZSH_BEFORE + text.rstrip("\n") + "\n" + _ZSH_AFTER
    return text


def func_name(shell_name: str, group: click.Command) -> str:
    """click's name for the completion function (jobenv.restore.init hard-codes it; tests compare)."""
    return get_completion_class(shell_name)(group, {}, "jobenv", "_JOBENV_COMPLETE").func_name  # type: ignore[misc]


def complete_job_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> List[CompletionItem]:
    """Saved job ids; a broken store completes nothing rather than failing the TAB."""
    from jobenv.store import files as store
    from jobenv.core.errors import BadRecord, JobenvError
    from jobenv.core.numparse import plural

    out, seen = [], set()
    try:
        for _, rec in store.iter_records(dict(os.environ)):
            if isinstance(rec, BadRecord) or rec.jobid in seen or not rec.jobid.startswith(incomplete):
                continue
            seen.add(rec.jobid)
            out += _item(rec.jobid, f"{rec.scheduler}, {plural(rec.nhosts, 'host')}, {rec.machine}")
    except (JobenvError, OSError, ValueError):
        return []
    return out


def complete_profiles(ctx: click.Context, param: click.Parameter, incomplete: str) -> List[CompletionItem]:
    """Profile names from the shipped, user and JOBENV_PROFILES files."""
    from jobenv.profiles import load as profiles
    from jobenv.core.errors import JobenvError

    try:
        found = profiles.load_all(os.environ)
    except (JobenvError, OSError, ValueError):
        return []
    return [c for name, p in sorted(found.items()) if name.startswith(incomplete) for c in _item(name, p.description)]


def _item(value: str, help_text: str) -> List[CompletionItem]:
    """A candidate as the shell script prints it: help through errors.visible (a profile's
    description or a record may hold ESC or newlines, and click writes both raw), and no
    candidate whose value itself holds such a byte (the shell would type it into the line)."""
    from jobenv.core.errors import visible

    return [CompletionItem(value, help=visible(help_text))] if visible(value) == value else []


DYNAMIC: Dict[str, Callable[..., List[CompletionItem]]] = {"job": complete_job_ids, "job_pos": complete_job_ids, "profile": complete_profiles}


def attach(group: click.Group) -> None:
    """Give every `job` / `profile` parameter without a completer of its own the dynamic one."""
    for cmd in group.commands.values():
        for p in cmd.params:
            fn = DYNAMIC.get(p.name or "")
            if fn is not None and getattr(p, "_custom_shell_complete", False) is None:
                p._custom_shell_complete = fn  # click's slot for shell_complete=...


@click.command("completion")
@click.argument("shell_name", metavar="SHELL", type=click.Choice(SHELLS))
@click.pass_context
def completion_cmd(ctx: click.Context, shell_name: str) -> None:
    """Print the completion script for SHELL (bash, zsh, fish); see the docs (Shells) for where it goes."""
    root = ctx.find_root().command
    click.echo(source(shell_name, root), nl=False)
