"""`jobenv launch`, `jobenv kill` and `jobenv stacks`: the click commands of a launch's life.

Kept apart from cli.py so the launch's many options (and their help) live with the two
commands that act on a running launch; the work is in jobenv.launchflow and jobenv.launch.
cli.py adds these commands to the `jobenv` group.
"""
from __future__ import annotations

import os
from typing import Optional, Tuple

import click

from jobenv.cli.common import warn
from jobenv.core.params import Count, Seconds
from jobenv.cli.launch_args import LaunchCommand
from jobenv.core.numparse import MAX_HOSTS, MAX_PER_HOST
from jobenv.runtime.containers import NAMES as CONTAINER_RUNTIMES


_SECONDS = Seconds(above=True)


@click.command(cls=LaunchCommand, context_settings={"allow_interspersed_args": False})
@click.option("--job", "-j", metavar="ID", help="Job id (default: $JOBENV_JOBID via `launch`, else as for `get`).")
@click.option("--allow-stale", is_flag=True, help="Launch even if the job has ended.")
@click.option("--dry-run", is_flag=True, help="Print the command instead of running it, and the hosts and bindings chosen.")
@click.option("-n", "--nranks", type=Count(1), metavar="N", help="Ranks in all (default: hosts x ppn).")
@click.option("--ppn", type=Count(1, MAX_PER_HOST), metavar="P", help="Ranks per host (default: as saved).")
@click.option("--nhosts", type=Count(1, MAX_HOSTS), metavar="K", help="Use the first K hosts (default: enough for -n, else all).")
@click.option("--nproc-per-node", "--nproc_per_node", "nproc_per_node", metavar="P", help="torchrun's name for --ppn (a number, or auto).")
@click.option("--nnodes", metavar="K", help="torchrun's name for --nhosts (K, or K:K).")
@click.option("--standalone", is_flag=True, help="torchrun's: this host alone (the default where no job is saved).")
@click.option("--master-port", "--master_port", "master_port", type=Count(1, 65535), metavar="PORT",
              help="The ranks' MASTER_PORT (torchrun's flag), instead of the free one jobenv picks per launch.")
@click.option("--master-addr", "--master_addr", "master_addr", metavar="HOST",
              help="The ranks' MASTER_ADDR (torchrun's flag), instead of the launch's first host.")
@click.option("--rdzv-endpoint", "--rdzv_endpoint", "rdzv_endpoint", metavar="HOST[:PORT]",
              help="torchrun's rendezvous endpoint: --master-addr HOST --master-port PORT.")
@click.option("--hosts", metavar="LIST", help="Only these hosts of the job (hostlist: node[1-3],gpu7).")
@click.option("--exclude", metavar="LIST", help="Not these hosts (hostlist).")
@click.option("--launcher-args", metavar="ARGS", multiple=True,
              help="Extra flags for the launcher itself, split like a shell would: --launcher-args='--cpu-bind none'.")
@click.option("--launcher", "launcher", metavar="PATH|FAMILY",
              help="Run this launcher instead of the job's: a path, a program on PATH, or a family "
                   "(openmpi, mpich, intelmpi, mvapich, pals); another family's is sized with its own flags.")
@click.option("--allow-mismatch", "allow_mismatch", is_flag=True,
              help="Launch even when the launcher would start the program's MPI (mpi4py, horovod, a "
                   "program's libmpi) as worlds of one rank each; a warning instead of the refusal.")
@click.option("--label", is_flag=True, help="Prefix output lines with the rank (the launcher's own flag).")
@click.option("--log-dir", metavar="DIR", type=click.Path(file_okay=False),
              help="Each rank's output to DIR/rank-<R>.log; the terminal still gets rank 0's (--tee).")
@click.option("--tee", metavar="RANKS", help="With --log-dir: these ranks' output to the terminal too (0,2-3, all, none; default 0).")
@click.option("--timeout", type=_SECONDS, metavar="DUR", help="Kill the whole launch after DUR (30, 90s, 1m, 1h30m).")
@click.option("--idle-timeout", type=_SECONDS, metavar="DUR", help="Kill it when no rank printed anything for DUR.")
@click.option("--retries", type=Count(0, 1000), default=0, metavar="N",
              help="Re-launch up to N times after a failure (each attempt's --log-dir logs are kept: "
                   "DIR/attempt-<n>/; the ranks see JOBENV_RESTART_COUNT).")
@click.option("--spare-nodes", type=Count(0, MAX_HOSTS), default=0, metavar="K",
              help="With --retries: hold K of the job's hosts back; a failed host is retired (bad-host "
                   "ledger, `jobenv show`) and a spare takes its place.")
@click.option("--exclude-failed", is_flag=True,
              help="With --retries: retire a failed host as --spare-nodes does, the job's unused hosts as spares.")
@click.option("--gpu-bind", is_flag=True, help="One GPU per local rank, as the profile's gpu_bind maps them.")
@click.option("--no-python", "no_python", is_flag=True, help="Do not re-activate the job's saved Python environment.")
@click.option("--no-hook", "no_hook", is_flag=True,
              help="Leave jobenv's hook (the clean-exit record, gloo's teardown wait) off the ranks' PYTHONPATH.")
@click.option("--stacks", "stacks", is_flag=True,
              help="Arm Python's faulthandler in each rank for `jobenv stacks` and the stacks at a time limit "
                   "(a handler for signal 38 and one open file per rank: the one visible difference).")
@click.option("--requeue", is_flag=True,
              help="On SIGUSR1/SIGUSR2/SIGTERM (pre-emption): pass it to every rank, wait --grace, requeue the job "
                   "(else resubmit, once, the copy of its batch script kept when the launch started; never the "
                   "file at its path). The batch script must `exec jobenv launch ...`.")
@click.option("--grace", type=Seconds(above=False), metavar="S",
              help="With --requeue: seconds the ranks get to checkpoint and end (default 60).")
@click.option("-m", "--module", "module", is_flag=True,
              help="COMMAND is a Python module the job's Python runs, as torchrun's -m: launch -m pkg.train ARGS.")
@click.option("--local-rank-arg", "local_rank_arg", is_flag=True,
              help="Give each rank's program --local_rank=<its local rank> after its script, as DeepSpeed's launcher does.")
@click.option("--container", "container", metavar="IMAGE",
              help="Run each rank's program in IMAGE (the launcher and each rank's keeper stay on the host; "
                   "docs: Containers).")
@click.option("--container-runtime", "container_runtime", type=click.Choice(CONTAINER_RUNTIMES), metavar="R",
              help=f"With --container: {', '.join(CONTAINER_RUNTIMES)} (default: the profile's, else the first on PATH).")
@click.option("--bind", "binds", metavar="SRC[:DST[:ro]]", multiple=True,
              help="With --container: also bind SRC (at DST); the working directory, the job's store and jobenv are bound.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def launch(job: Optional[str], allow_stale: bool, dry_run: bool, nranks: Optional[int], ppn: Optional[int],
           nhosts: Optional[int], nproc_per_node: Optional[str], nnodes: Optional[str], standalone: bool,
           master_port: Optional[int], master_addr: Optional[str], rdzv_endpoint: Optional[str], hosts: Optional[str],
           exclude: Optional[str], launcher_args: Tuple[str, ...], launcher: Optional[str], allow_mismatch: bool,
           label: bool, log_dir: Optional[str], tee: Optional[str],
           timeout: Optional[float], idle_timeout: Optional[float], retries: int, spare_nodes: int,
           exclude_failed: bool, gpu_bind: bool, no_python: bool, no_hook: bool, stacks: bool, requeue: bool,
           grace: Optional[float], module: bool, local_rank_arg: bool, container: Optional[str],
           container_runtime: Optional[str], binds: Tuple[str, ...], command: Tuple[str, ...]) -> None:
    """Run COMMAND on every rank of the job: jobenv launch [OPTIONS] -- python3 train.py

    In a restored shell `launch ARGS` is `jobenv launch -- ARGS`, and options before the program
    are jobenv's: `launch -n 4 python3 train.py`.

    As torchrun does, `launch [--nproc-per-node N] train.py ARGS` runs train.py with the job's
    Python when COMMAND's first word ends in .py and names an existing file, and
    `launch -m pkg.mod ARGS` runs a module; any other first word is a program found on PATH.
    With no saved job and no scheduler, it runs on this host, as torchrun does (saved as the
    local job).

    Flags for the launcher go in --launcher-args='...', after the launcher's own (one the profile
    sets is replaced). A launch whose launcher would start the program's MPI (mpi4py or horovod
    it imports, a program's libmpi) as worlds of one rank each is refused before any rank starts
    (exit 5): --launcher runs another, --allow-mismatch runs it anyway.

    The exit code is the launcher's; 124 when --timeout or --idle-timeout killed it; 128+N when
    pre-emption signal N ended it (--requeue); 0 when every rank's Python finished cleanly (the
    hook saw its main end without an exception or a non-zero sys.exit) and some then died in
    interpreter teardown (named as warnings).
    """
    import shlex

    from jobenv.launchflow import start
    from jobenv.cli.launch_args import endpoint, refuse_conflicts, same, tee_ranks
    from jobenv.cli.launch_args import nnodes as parse_nnodes
    from jobenv.cli.launch_args import nproc_per_node as parse_nproc
    from jobenv.launch.types import Request
    from jobenv.launch.types import ContainerRequest
    from jobenv.launch.types import Limits, Options

    ppn = same("--ppn", ppn, "--nproc-per-node", parse_nproc(nproc_per_node))
    nhosts = same("--nhosts", nhosts, "--nnodes", parse_nnodes(nnodes))
    refuse_conflicts(nranks, ppn, nhosts, hosts, exclude, retries, exclude_failed, tee=tee, log_dir=log_dir,
                     spare_nodes=spare_nodes, standalone=standalone)
    master_addr, master_port = endpoint(rdzv_endpoint, master_addr, master_port)
    if grace is not None and not requeue:
        raise click.UsageError("--grace needs --requeue")
    if stacks and no_hook:
        raise click.UsageError("--stacks needs the hook: drop --no-hook")
    try:
        extra = [a for text in launcher_args for a in shlex.split(text)]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--launcher-args") from None
    if (container_runtime or binds) and not container:
        raise click.UsageError(f"{'--container-runtime' if container_runtime else '--bind'} needs --container IMAGE")
    box = ContainerRequest(container, container_runtime, binds) if container else None
    opts = Options(request=Request(nranks, ppn, nhosts, hosts, exclude), launcher_args=extra, label=label,
                       log_dir=os.path.abspath(log_dir) if log_dir else None,
                       limits=Limits(timeout, idle_timeout), retries=retries, exclude_failed=exclude_failed,
                       gpu_bind=gpu_bind, python=not (no_python or container), spares=spare_nodes, tee=tee_ranks(tee or "0"),
                       hook=not no_hook, stacks=stacks, requeue=requeue, grace=grace, module=module,
                       local_rank_arg=local_rank_arg, standalone=standalone, master_addr=master_addr,
                       master_port=master_port, container=box, launcher=launcher, allow_mismatch=allow_mismatch)
    raise click.exceptions.Exit(start(job, allow_stale, list(command), opts, os.environ, warn, dry_run))



@click.command("kill")
@click.option("--job", "-j", metavar="ID", help="Job id (default: as for `get`).")
@click.option("--run", metavar="RUN", help="Which launch: its run directory's name (default: the newest).")
def kill_cmd(job: Optional[str], run: Optional[str]) -> None:
    """End a launch's ranks on every host, and say which ended.

    \b
    Exit code: 0 when every rank found running ended; 1 when some still run.
    """
    from jobenv.launchflow import kill

    raise click.exceptions.Exit(kill(job, run, os.environ, lambda m: click.echo(f"jobenv: {m}", err=True)))


@click.command("stacks")
@click.option("--job", "-j", metavar="ID", help="Job id (default: as for `get`).")
@click.option("--run", "run", metavar="RUN", help="An attempt's run directory, or its name under the job's runs "
              "(default: the newest running attempt).")
@click.option("--log-dir", metavar="DIR", type=click.Path(file_okay=False),
              help="The launch's --log-dir: names the rank silent longest by its log.")
def stacks_cmd(job: Optional[str], run: Optional[str], log_dir: Optional[str]) -> None:
    """Print the Python stacks of a running launch's ranks, identical ones grouped.

    The same report as `jobenv launch` prints at --timeout and on SIGUSR1; the dumps stay in the
    attempt's run directory (stacks/rank-<R>.<seq>.txt).
    """
    from jobenv.store import files as store
    from jobenv.launch.watch import current, stacks
    from jobenv.store.lookup import which_job

    _, rec = which_job(os.environ, job, warn)
    runs = store.runs_dir(store.key_for(rec.scheduler, rec.jobid), os.environ)
    run_dir = current.find(runs, run, os.environ, f"job {rec.jobid}")
    for line in stacks.collect(run_dir, False, log_dir=os.path.abspath(log_dir) if log_dir else None):
        click.echo(line)


COMMANDS = (launch, kill_cmd, stacks_cmd)
