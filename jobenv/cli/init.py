"""`jobenv init SHELL [--auto] [--install]` as a click command: its help, completion and usage
errors.  Every login shell runs `jobenv init`, so jobenv/__main__.py answers the plain forms
through restore/init.py's click-free fast path (`run`) before click loads; this command is what
answers the rest (`--help`, `--install`, a typo)."""
from __future__ import annotations

import os
import sys

import click

from jobenv.restore.init import SHELLS, exe_path, output


@click.command("init")
@click.argument("shell", type=click.Choice(SHELLS))
@click.option("--auto", is_flag=True,
              help="Also save a new allocation in its first shell and restore a saved job in other shells "
                   "on its hosts (JOBENV_AUTO=0 turns it off again, JOBENV_AUTO=1 turns it on without this).")
@click.option("--install", is_flag=True,
              help="Add the line that evaluates this to your rc file (~/.bashrc, ~/.zshrc, fish's conf.d) and to "
                   "the file a login shell reads (bash: ~/.bash_profile, ~/.bash_login or ~/.profile; zsh: "
                   "~/.zlogin), naming this jobenv by its absolute path; running it again replaces those lines.")
def init_cmd(shell: str, auto: bool, install: bool) -> None:
    """Print shell code for your rc file: eval "$(jobenv init bash)" (fish: jobenv init fish | source)."""
    if install:
        from jobenv.restore.init_install import install as add_line

        for path, line, changed in add_line(shell, exe_path(sys.argv[0], sys.executable), auto, os.environ):
            click.echo(f"{'added to' if changed else 'already in'} {path}:\n  {line}")
        click.echo("new shells, login shells too, now have getjobenv, savejobenv and `jobenv` itself (as $JOBENV_EXE)")
        return
    click.echo(output(shell, auto), nl=False)
