"""`--dry-run` says what was chosen: the hosts (after --nhosts/--hosts/--exclude) and which
ranks go where, each local rank's GPU under --gpu-bind (the wrapper's rule), the CPU binding
of the line; `--gpu-bind` works on every shipped GPU profile."""
from __future__ import annotations

from pathlib import Path

import pytest

import machines
from conftest import base_env, jobenv
from jobenv.profiles import load as profiles
from jobenv.profiles.load import gpu_bind_mode
from jobenv.rankwrap import gpu_bind_cycle, gpu_bind_value

POLARIS_HOSTS = ["x3006c0s13b0n0.hsn.cm.polaris.alcf.anl.gov", "x3006c0s19b0n0.hsn.cm.polaris.alcf.anl.gov",
                 "x3006c0s25b0n0.hsn.cm.polaris.alcf.anl.gov"]


def pals_path(tmp_path: Path) -> str:
    """A PATH whose mpiexec lives where Cray PALS installs it (the family is told by the path)."""
    d = tmp_path / "opt/cray/pals/1.8/bin"
    d.mkdir(parents=True)
    (d / "mpiexec").write_text("#!/bin/sh\nexit 0\n")
    (d / "mpiexec").chmod(0o755)
    return f"{d}:/usr/bin:/bin"


@pytest.fixture
def polaris(tmp_path, home):
    env = base_env(home, machines.polaris(tmp_path, nodes=3), path=pals_path(tmp_path))
    jobenv(["save", "-q"], env, check=True)
    return env


@pytest.mark.parametrize("flags,hosts", [
    (["--nhosts", "1"], [0]),
    (["--hosts", "x3006c0s25b0n0"], [2]),
    (["--exclude", "x3006c0s13b0n0"], [1, 2]),
    (["--nhosts", "2", "-n", "6"], [0, 1]),
])
def test_dry_run_names_the_hosts_chosen(polaris, flags, hosts):
    p = jobenv(["launch", "--dry-run", *flags, "--", "true"], polaris)
    assert p.returncode == 0, p.stderr
    said = [line for line in p.stderr.splitlines() if line.startswith("jobenv: hosts: ")]
    assert len(said) == 1, p.stderr
    named = [h for h in POLARIS_HOSTS if h in said[0]]
    assert named == [POLARIS_HOSTS[i] for i in hosts], said
    if "-n" in flags:
        assert f"{POLARIS_HOSTS[0]} (ranks 0-2), {POLARIS_HOSTS[1]} (ranks 3-5)" in said[0]


def test_dry_run_shows_gpu_and_cpu_binding(polaris):
    p = jobenv(["launch", "--dry-run", "--gpu-bind", "--nhosts", "1", "--", "true"], polaris)
    assert p.returncode == 0, p.stderr
    assert ("GPU binding on each host: local rank 0 -> CUDA_VISIBLE_DEVICES=3, 1 -> 2, 2 -> 1, 3 -> 0"
            in p.stderr), p.stderr
    assert "CPU binding: --cpu-bind depth (CPUs per rank: -d 16)" in p.stderr, p.stderr
    assert p.stdout.count("\n") == 1  # stdout stays the one copy-pasteable line


@pytest.mark.parametrize("machine", ["perlmutter", "frontier", "polaris", "aurora", "sunspot"])
def test_gpu_bind_on_every_shipped_gpu_profile(tmp_path, home, machine):
    env = base_env(home, getattr(machines, machine)(tmp_path))
    jobenv(["save", "-q"], env, check=True)
    p = jobenv(["launch", "--dry-run", "--gpu-bind", "--", "true"], env)
    assert p.returncode == 0, p.stderr
    mode = gpu_bind_mode(profiles.load_all({})[machine])
    var, value = gpu_bind_value(gpu_bind_cycle(mode), 1)
    assert f"local rank 0 -> {var}=" in p.stderr and f", 1 -> {value}" in p.stderr, p.stderr
    if machine == "frontier":  # srun binds each task to its -c cores by default: the line says how many
        assert "CPU binding: none on the Slurm srun line (the launcher's default; CPUs per rank: -c 7)" in p.stderr
