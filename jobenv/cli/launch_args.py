"""`jobenv launch`'s command line where hands expect it: options before the program, torchrun's
spellings, and flags that contradict each other refused in one line.

The restored shell's `launch ARGS` is `jobenv launch --job ID -- ARGS`, so `launch -n 4 --
python3 train.py` arrives as `... -- -n 4 -- python3 train.py`.  A program's name never starts
with '-': when the word after the first `--` does, the options go on to the next `--` or the
first word that is not an option (click stops there: `allow_interspersed_args` is off), and
`launch python3 train.py -n 4` keeps `-n 4` as the program's.

torchrun's `--nproc-per-node`/`--nproc_per_node` is `--ppn` and its `--nnodes` is `--nhosts`
(torch.distributed.run's argparse spells them so); torchrun's elastic `--nnodes MIN:MAX` and its
`--nproc-per-node gpu|cpu|xpu` are not jobenv's: one number, or `auto` (as saved).
torchrun's rendezvous flags map onto the ranks' variables: `--master-port`/`--master-addr`
(and their `_` spellings) set MASTER_PORT/MASTER_ADDR, which the launch then keeps instead of
choosing (jobenv.runtime.discovery rules 4-5); `--rdzv-endpoint HOST[:PORT]` is the two at
once; `--standalone` is this host alone (jobenv.launchflow).
"""
from __future__ import annotations

from typing import Any, List, Optional, Set, Tuple

import click

from jobenv.core.numparse import MAX_HOSTS, MAX_PER_HOST, parse_uint
from jobenv.core.errors import JobenvError

MAX_PORT = 65535


def options_first(args: List[str]) -> List[str]:
    """`args` with the first `--` dropped when the word after it is an option (a program's name
    never starts with '-'): the options after it are `jobenv launch`'s."""
    if "--" not in args:
        return args
    i = args.index("--")
    after = args[i + 1:i + 2]
    if after and after[0].startswith("-") and after[0] != "--":
        return args[:i] + args[i + 1:]
    return args


class LaunchCommand(click.Command):
    """`jobenv launch`, taking its options before or after the first `--`."""

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        return super().parse_args(ctx, options_first(list(args)))


def _count(text: str, flag: str, maximum: int) -> int:
    try:
        return parse_uint(text, flag, maximum, 1)
    except JobenvError as exc:
        raise click.UsageError(exc.message) from None


def nproc_per_node(text: Optional[str]) -> Optional[int]:
    """torchrun's --nproc-per-node: a number, or `auto` (None: as the job was saved)."""
    if text is None or text == "auto":
        return None
    if text in ("gpu", "cpu", "xpu"):
        raise click.UsageError(f"--nproc-per-node {text}: jobenv runs one rank per GPU (or slot) as saved; "
                               "pass a number, or auto")
    return _count(text, "--nproc-per-node", MAX_PER_HOST)


def nnodes(text: Optional[str]) -> Optional[int]:
    """torchrun's --nnodes: N, or N:N (an elastic MIN:MAX range is refused)."""
    if text is None:
        return None
    low, colon, high = text.partition(":")
    if colon and low != high:
        raise click.UsageError(f"--nnodes {text}: an elastic range is torchrun's; jobenv launches a fixed "
                               "number of hosts (--nnodes N)")
    return _count(low, "--nnodes", MAX_HOSTS)


def endpoint(text: Optional[str], addr: Optional[str], port: Optional[int]) -> Tuple[Optional[str], Optional[int]]:
    """(MASTER_ADDR, MASTER_PORT) from --rdzv-endpoint HOST[:PORT] and --master-addr/--master-port;
    UsageError when they disagree or a part is malformed."""
    if text is not None:
        host, port_text = text, ""
        if text.startswith("[") and "]" in text:  # [::1]:29500
            host, _, rest = text[1:].partition("]")
            port_text = rest[1:] if rest.startswith(":") else rest
        elif text.count(":") == 1:
            host, _, port_text = text.partition(":")
        if not host or any(c.isspace() for c in host) or (text.startswith("[") and port_text and
                                                            not text[1:].partition("]")[2].startswith(":")):
            raise click.UsageError(f"--rdzv-endpoint {text!r}: expected HOST or HOST:PORT")
        addr = _same_text("--master-addr", addr, "--rdzv-endpoint", host)
        if port_text:
            port = same("--master-port", port, "--rdzv-endpoint", _count(port_text, "--rdzv-endpoint's port", MAX_PORT))
    if addr is not None and (not addr or any(c.isspace() for c in addr)):
        raise click.UsageError(f"--master-addr {addr!r}: expected a host name or address")
    return addr, port


def _same_text(flag: str, value: Optional[str], alias: str, other: str) -> str:
    if value is not None and value != other:
        raise click.UsageError(f"{flag} {value} and {alias} {other} disagree; give one")
    return other


def same(flag: str, value: Optional[int], alias: str, other: Optional[int]) -> Optional[int]:
    """The one value two spellings of an option give; UsageError when they disagree."""
    if value is not None and other is not None and value != other:
        raise click.UsageError(f"{flag} {value} and {alias} {other} disagree; give one")
    return value if value is not None else other


def _names(text: str) -> List[str]:
    from jobenv.core.hostlist import expand

    return [h.split(".")[0] for h in expand(text)]


def tee_ranks(text: str) -> Optional[Set[int]]:
    """--tee RANKS (jobenv.launch.watch.tee.parse_ranks) as a click usage error when malformed."""
    from jobenv.launch.watch.tee import parse_ranks

    try:
        return parse_ranks(text)
    except JobenvError as exc:
        raise click.BadParameter(exc.message, param_hint="--tee") from None


def refuse_conflicts(nranks: Optional[int], ppn: Optional[int], nhosts: Optional[int], hosts: Optional[str],
                     exclude: Optional[str], retries: int, exclude_failed: bool, tee: Optional[str] = None,
                     log_dir: Optional[str] = None, spare_nodes: int = 0, standalone: bool = False,
                     **_: Any) -> None:
    """One UsageError line for flags that contradict each other, before anything runs."""
    if (spare_nodes or exclude_failed) and not retries:
        flag = "--spare-nodes" if spare_nodes else "--exclude-failed"
        raise click.UsageError(f"{flag} needs --retries N: a failed host is only replaced on a retry")
    if tee is not None and not log_dir:
        raise click.UsageError("--tee only acts with --log-dir (without it every rank's output is on the terminal)")
    if nranks is not None and ppn is not None:
        if nranks < ppn:
            raise click.UsageError(f"-n {nranks} is fewer ranks than --ppn/--nproc-per-node {ppn} on one host")
        if nhosts is not None and nranks != ppn * nhosts:
            raise click.UsageError(f"-n {nranks} disagrees with --nhosts {nhosts} x --ppn {ppn} "
                                   f"= {ppn * nhosts}; give two of the three")
    if standalone and (hosts or (nhosts or 1) > 1):
        raise click.UsageError("--standalone is this host alone: drop --hosts/--nhosts/--nnodes")
    if hosts and exclude:
        try:
            both = sorted(set(_names(hosts)) & set(_names(exclude)))
        except JobenvError:
            return  # a malformed hostlist is sizing's to report, with its own words
        if both:
            raise click.UsageError(f"--hosts and --exclude both name {', '.join(both)}")
