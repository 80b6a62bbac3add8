"""`jobenv doctor`: the click command; the checks themselves live in jobenv.doctor.checks."""
from __future__ import annotations

import os
import sys
from typing import Optional

import click

from jobenv.cli.common import job_id
from jobenv.core.params import Seconds
from jobenv.doctor.checks import collect, render_json, render_text
from jobenv.runtime.containers import NAMES as CONTAINER_RUNTIMES


@click.command("doctor")
@job_id()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@click.option("--deep", is_flag=True, help="Also run a two-rank all-reduce through `jobenv launch` (slow).")
@click.option("--timeout", type=Seconds(1, 86400), default=60.0, show_default=True,
              help="Seconds each probe (an import, a --version) may take.")
@click.option("--container", "container", metavar="IMAGE",
              help="Also check `launch --container IMAGE`: the runtime, the image, the GPU flag, the image's MPI.")
@click.option("--container-runtime", "container_runtime", type=click.Choice(CONTAINER_RUNTIMES), metavar="R",
              help="With --container: the runtime (default: as launch chooses it).")
def doctor_cmd(job: Optional[str], as_json: bool, deep: bool, timeout: float, container: Optional[str],
               container_runtime: Optional[str]) -> None:
    """Check this host, the job's record, launcher, MPI, frameworks and GPUs; say how to fix each failure."""
    if container_runtime and not container:
        raise click.UsageError("--container-runtime needs --container IMAGE")
    checks = collect(os.environ, job, deep, timeout, (container, container_runtime) if container else None)
    sys.stdout.write(render_json(checks) if as_json else render_text(checks))
    if any(c.status == "fail" for c in checks):
        raise click.exceptions.Exit(1)
