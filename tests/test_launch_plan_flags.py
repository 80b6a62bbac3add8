"""`--launcher-args` replaces a flag the profile's line sets instead of doubling it; flags that
accumulate (-x, -genv, --env) are added."""
from __future__ import annotations

import pytest

from conftest import jobenv
from jobenv.runtime import families
from jobenv.launch.plan.flags import override
from test_launch_plan_chosen import polaris  # noqa: F401  (a fixture)

PALS = families.get("pals")


@pytest.mark.parametrize("extra,expect", [
    (["--cpu-bind=none"], ["mpiexec", "-n", "8", "-d", "16", "--cpu-bind=none"]),
    (["--cpu-bind", "none"], ["mpiexec", "-n", "8", "-d", "16", "--cpu-bind", "none"]),
    (["--np", "4"], ["mpiexec", "--cpu-bind", "depth", "-d", "16", "--np", "4"]),
    (["--env", "A=1"], ["mpiexec", "-n", "8", "--cpu-bind", "depth", "-d", "16", "--env", "A=1"]),
])
def test_override(extra, expect):
    argv = ["mpiexec", "-n", "8", "--cpu-bind", "depth", "-d", "16"]
    assert override(argv, PALS, extra) == expect


def test_srun_x_is_exclude_and_replaced():
    srun = families.get("srun")
    assert override(["srun", "-x", "a", "-N", "2"], srun, ["--exclude=b"]) == ["srun", "-N", "2", "--exclude=b"]


def test_launcher_args_replace_the_profiles_cpu_bind_on_polaris(polaris):  # noqa: F811
    p = jobenv(["launch", "--dry-run", "--launcher-args=--cpu-bind=none", "--", "true"], polaris)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("--cpu-bind") == 1 and "--cpu-bind=none" in p.stdout, p.stdout
    assert "CPU binding: --cpu-bind=none (CPUs per rank: -d 16)" in p.stderr
