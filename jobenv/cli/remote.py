"""`jobenv remote add|list|rm|check|login|logout`, and `--remote NAME` on the job commands.

`--remote NAME` runs the same command with the same words in the remote's jobenv: the words
that go are the very tokens typed, less the laptop's own options (`--remote`, `--sync`), as
click's parser consumed them (LaptopOption notes where), never a re-rendering of parsed
values.  Exit codes: the remote command's own; 3 no such remote; 5 a bad name, destination
or path; 6 a remotes file or control directory another user could change; 7 the remote
cannot be reached or logged in to, or has no usable jobenv there (one line that says why).
"""
from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import click

from jobenv.core.errors import visible

ARGV, SPANS = "jobenv.remote.argv", "jobenv.remote.spans"


class LaptopOption(click.Option):
    """An option read here only: the span of tokens that gave it is left out of the call."""

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        opt = parser._long_opt[self.opts[0]]
        take = opt.process

        def process(value: Any, state: Any) -> None:
            raw = ctx.meta.get(ARGV, [])
            end = len(raw) - len(state.rargs)  # the tokens before `end` are consumed
            one = any(raw[end - 1] == f"{o}={value}" for o in self.opts)
            ctx.meta.setdefault(SPANS, []).append((end - (1 if one else 2), end))
            take(value, state)

        opt.process = process


# (environment, remote, the words to send, the laptop options' values, the command run here)
Handler = Callable[[Mapping[str, str], Any, List[str], Dict[str, Any], Callable[[], Any]], int]


def forward(env: Mapping[str, str], r: Any, words: List[str], cwd: Optional[str] = None) -> int:
    from jobenv.remote.ssh import call

    return call(env, r, "exec", {"argv": words, "cwd": cwd})


def attach(cmd: click.Command, laptop: Sequence[click.Option] = (), handler: Optional[Handler] = None) -> None:
    """Give `cmd` `--remote NAME` (and the laptop-only options `laptop`): with it, `handler`
    (default: forward) runs instead of the command, and its code is the exit code."""
    names = ["remote"] + [str(o.name) for o in laptop]
    cmd.params += [LaptopOption(["--remote"], metavar="NAME",
                                help="Run this on remote NAME over ssh (`jobenv remote add`)."), *laptop]
    parse, invoke = cmd.parse_args, cmd.invoke

    def parse_args(ctx: click.Context, args: List[str]) -> List[str]:
        ctx.meta[ARGV] = list(args)
        return parse(ctx, args)

    def run(ctx: click.Context) -> Any:
        opts = {n: ctx.params.pop(n, None) for n in names}
        name = opts.pop("remote")
        if name is None:
            given = [n for n, v in opts.items() if v not in (None, False, ())]
            if given:
                raise click.UsageError(f"--{given[0].replace('_', '-')} needs --remote NAME")
            return invoke(ctx)
        from jobenv.remote.remotes import get

        r = get(os.environ, name)
        spans = ctx.meta.get(SPANS, [])
        rest = [a for i, a in enumerate(ctx.meta[ARGV]) if not any(s <= i < e for s, e in spans)]
        words = ctx.command_path.split()[1:] + rest
        rc = (handler or (lambda env, r, w, o, here: forward(env, r, w)))(os.environ, r, words, opts,
                                                                           lambda: invoke(ctx))
        ctx.exit(rc)

    callback = cmd.callback
    if callback is not None:  # ctx.invoke(cmd) (`jobenv runs` runs `runs list`) passes every param's default
        @functools.wraps(callback)
        def bare(*args: Any, **kw: Any) -> Any:
            return callback(*args, **{k: v for k, v in kw.items() if k not in names})
        cmd.callback = bare
    cmd.parse_args = parse_args  # type: ignore[method-assign]
    cmd.invoke = run  # type: ignore[method-assign]


def submit_remote(env: Mapping[str, str], r: Any, words: List[str], opts: Dict[str, Any],
                  here: Callable[[], Any]) -> int:
    """`submit --remote NAME [--sync DIR]`: copy DIR first, then submit from the copy."""
    cwd = None
    if opts.get("sync"):
        from jobenv.remote.sync import sync

        cwd = sync(env, r, opts["sync"])
        sys.stderr.write(f"jobenv: copied {visible(os.path.abspath(opts['sync']))} to {visible(r.name)}:"
                         f"{visible(cwd)}\n")
    return forward(env, r, words, cwd)


def report_remote(env: Mapping[str, str], r: Any, words: List[str], opts: Dict[str, Any],
                  here: Callable[[], Any]) -> int:
    """`report --remote NAME`: the remote's run history fetched (`remote send-runs`), and
    the page made here from it by the report command itself."""
    import io
    import tarfile
    import tempfile

    from jobenv.remote.ssh import call

    got = bytearray()
    rc = call(env, r, "send-runs", {}, keep=got)
    if rc != 0:
        return rc
    with tempfile.TemporaryDirectory(prefix="jobenv-report-") as d:
        home = os.path.join(d, "jobenv")
        os.mkdir(home, 0o700)
        with tarfile.open(fileobj=io.BytesIO(bytes(got)), mode="r:*") as tar:
            tar.extractall(home, filter="data")
        old = os.environ.get("JOBENV_HOME")
        os.environ["JOBENV_HOME"] = home  # the report command reads its runs from os.environ
        try:
            here()
        finally:
            if old is None:
                del os.environ["JOBENV_HOME"]
            else:
                os.environ["JOBENV_HOME"] = old
    return 0


SYNC = LaptopOption(["--sync"], metavar="DIR", type=click.Path(file_okay=False, exists=True),
                    help="With --remote: copy DIR to the remote's workdir first and submit from the copy.")


# ---------------------------------------------------------------- jobenv remote ...
@click.group("remote")
def remote_cmd() -> None:
    """Remotes for --remote: clusters reached over your own ssh (one connection per session)."""


@remote_cmd.command("add")
@click.argument("name")
@click.argument("dest")
@click.option("--jobenv", "jobenv_path", metavar="PATH", help="The jobenv program there (default: jobenv on PATH).")
@click.option("--workdir", metavar="DIR", help="Where --sync copies go there (default: ~/jobenv-sync).")
def add_cmd(name: str, dest: str, jobenv_path: Optional[str], workdir: Optional[str]) -> None:
    """Name DEST (user@host, an ~/.ssh/config alias) as remote NAME."""
    from jobenv.remote import remotes

    r = remotes.make(name, dest, jobenv_path, workdir)
    have = remotes.load(os.environ)
    have[name] = r
    path = remotes.save(os.environ, have)
    click.echo(f"added remote {name}: {dest} (jobenv: {r.jobenv}, workdir: {r.workdir}) to {path}")


@remote_cmd.command("list")
def list_cmd() -> None:
    """Every remote."""
    from jobenv.core.output import print_table
    from jobenv.remote import remotes

    print_table([[r.name, r.dest, r.jobenv, r.workdir] for r in sorted(remotes.load(os.environ).values())],
                ["name", "destination", "jobenv", "workdir"])


@remote_cmd.command("rm")
@click.argument("name")
def rm_cmd(name: str) -> None:
    """Forget remote NAME (and end its connection)."""
    from jobenv.remote import remotes, ssh

    have = remotes.load(os.environ)
    r = remotes.get(os.environ, name)
    ssh.logout(os.environ, r)
    del have[name]
    remotes.save(os.environ, have)
    click.echo(f"removed remote {name}")


@remote_cmd.command("check")
@click.argument("name")
def check_cmd(name: str) -> None:
    """Reach NAME, find jobenv there and say its version (or, in one line, what is wrong)."""
    from jobenv import __version__
    from jobenv.remote import remotes, ssh

    r = remotes.get(os.environ, name)
    out = bytearray()
    rc = ssh.call(os.environ, r, "exec", {"argv": ["--version"], "cwd": None}, keep=out)
    said = visible(out.decode("utf-8", "replace").strip())
    if rc != 0:
        raise click.ClickException(f"remote {name}: {r.jobenv} --version failed (exit {rc})")
    there = said.rsplit(" ", 1)[-1]
    click.echo(f"remote {name} ({r.dest}): jobenv {there} at {r.jobenv}" +
               ("" if there == __version__ else f"; this jobenv is {__version__}: install the same version there"))


@remote_cmd.command("login")
@click.argument("name")
def login_cmd(name: str) -> None:
    """Open NAME's connection now, answering its prompts (password, MFA) on this terminal."""
    from jobenv.remote import remotes, ssh

    r = remotes.get(os.environ, name)
    started = ssh.connect(os.environ, r, batch=False)
    click.echo(f"{'logged in to' if started else 'already connected to'} remote {name} ({r.dest}) for "
               f"{ssh.PERSIST} after its last use (`jobenv remote logout {name}` ends it)")


@remote_cmd.command("logout")
@click.argument("name")
def logout_cmd(name: str) -> None:
    """End NAME's connection."""
    from jobenv.remote import remotes, ssh

    r = remotes.get(os.environ, name)
    click.echo(f"{'logged out of' if ssh.logout(os.environ, r) else 'no connection to'} remote {name}")


@remote_cmd.command("exec", hidden=True)
@click.argument("call")
def exec_cmd(call: str) -> None:
    """The remote side of --remote (jobenv.remote.tether)."""
    from jobenv.remote.ssh import decode
    from jobenv.remote.tether import run_exec

    raise click.exceptions.Exit(run_exec(decode(call)))


@remote_cmd.command("receive", hidden=True)
@click.argument("call")
def receive_cmd(call: str) -> None:
    """The remote side of submit --sync (jobenv.remote.tether)."""
    from jobenv.remote.ssh import decode
    from jobenv.remote.tether import run_receive

    raise click.exceptions.Exit(run_receive(decode(call)))


@remote_cmd.command("send-runs", hidden=True)
@click.argument("call")
def send_runs_cmd(call: str) -> None:
    """The remote side of report --remote (jobenv.remote.tether)."""
    from jobenv.remote.ssh import decode
    from jobenv.remote.tether import run_send_runs

    raise click.exceptions.Exit(run_send_runs(decode(call)))
