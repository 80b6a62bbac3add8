"""`jobenv doctor`: the click command; the checks themselves live in jobenv.doctor.checks."""
from __future__ import annotations

import os
import sys
from typing import Optional

import click

from jobenv.cli.common import job_id
from jobenv.core.params import Seconds
from jobenv.doctor.checks import collect, render_json, render_text


@click.command("doctor")
@job_id()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@click.option("--deep", is_flag=True, help="Also run a two-rank all-reduce through `jobenv launch` (slow).")
@click.option("--timeout", type=Seconds(1, 86400), default=60.0, show_default=True,
              help="Seconds each probe (an import, a --version) may take.")
def doctor_cmd(job: Optional[str], as_json: bool, deep: bool, timeout: float) -> None:
    """Check this host, the job's record, launcher, MPI, frameworks and GPUs; say how to fix each failure."""
    checks = collect(os.environ, job, deep, timeout)
    sys.stdout.write(render_json(checks) if as_json else render_text(checks))
    if any(c.status == "fail" for c in checks):
        raise click.exceptions.Exit(1)
