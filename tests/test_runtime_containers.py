"""The container-runtime table: each runtime's command line as its documentation spells it.

Fixtures from the runtimes' own documentation (docs/containers.md cites each page):
- Apptainer `apptainer exec [exec options...] <container> <command>`: `-B/--bind src[:dest[:opts]]`
  (opts `ro`), `--nv`, `--rocm`, `--pwd`, `--env` (the apptainer-exec(1) man page);
- Charliecloud `ch-run [OPTION...] IMAGE -- CMD [ARG...]`: `-b/--bind=SRC[:DST]`, `-c/--cd=DIR`
  (ch-run(1), 0.31 as Debian ships it: `ch-run --help` here); `--unset-env=PATH` leaves ch-run to
  set its default PATH (measured here: /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin);
- podman `podman run` `--volume`, `--workdir`, `--env-host`, `--device` (CDI `nvidia.com/gpu=all`);
  NERSC's podman-hpc adds `--gpu` and `--mpi` (github.com/NERSC/podman-hpc);
- Shifter `shifter --image=... --volume=SRC:DST --module=...` (NERSC/shifter doc/command/shifter.rst;
  `--module=gpu` on Perlmutter);
- Pyxis `srun --container-image=... --container-mounts=SRC:DST[:FLAGS][,SRC:DST...]
  --container-workdir=PATH` (github.com/NVIDIA/pyxis/wiki/Usage).
"""
from __future__ import annotations

import os

import pytest

from jobenv.runtime import containers

BINDS = [("/home/u/run", "/home/u/run", False), ("/lus/jobenv", "/lus/jobenv", True)]


@pytest.mark.parametrize("name, gpu, want", [
    ("apptainer", "nvidia", ["apptainer", "exec", "--bind=/home/u/run:/home/u/run", "--bind=/lus/jobenv:/lus/jobenv:ro",
                             "--pwd=/home/u/run", "--nv", "img.sif"]),
    ("apptainer", "amd", ["apptainer", "exec", "--bind=/home/u/run:/home/u/run", "--bind=/lus/jobenv:/lus/jobenv:ro",
                          "--pwd=/home/u/run", "--rocm", "img.sif"]),
    ("charliecloud", "", ["ch-run", "--unset-env=PATH", "--bind=/home/u/run:/home/u/run", "--bind=/lus/jobenv:/lus/jobenv",
                          "--cd=/home/u/run", "img.sif", "--"]),
    ("podman", "nvidia", ["podman", "run", "--rm", "--net=host", "--pid=host", "--ipc=host", "--userns=keep-id",
                          "--env-host", "--volume=/home/u/run:/home/u/run", "--volume=/lus/jobenv:/lus/jobenv:ro",
                          "--workdir=/home/u/run", "--device=nvidia.com/gpu=all", "img.sif"]),
    ("podman-hpc", "nvidia", ["podman-hpc", "run", "--rm", "--env-host", "--volume=/home/u/run:/home/u/run",
                              "--volume=/lus/jobenv:/lus/jobenv:ro", "--workdir=/home/u/run", "--gpu", "img.sif"]),
    ("shifter", "nvidia", ["shifter", "--volume=/home/u/run:/home/u/run", "--volume=/lus/jobenv:/lus/jobenv",
                           "--module=gpu", "--image=img.sif"]),
    ("pyxis", "nvidia", ["--container-mounts=/home/u/run:/home/u/run,/lus/jobenv:/lus/jobenv:ro",
                         "--container-workdir=/home/u/run", "--container-image=img.sif"]),
])
def test_each_runtime_prefix_is_its_documented_command_line(name, gpu, want):
    assert containers.prefix(containers.get(name), "img.sif", BINDS, "/home/u/run", gpu) == want


def test_a_profiles_flags_go_before_the_image():
    row = containers.get("podman-hpc")
    words = containers.prefix(row, "nvcr.io/nvidia/pytorch:24.01-py3", [], "/w", "nvidia", ["--mpi"])
    assert words[-3:] == ["--gpu", "--mpi", "nvcr.io/nvidia/pytorch:24.01-py3"]


def test_the_table_says_how_each_runtime_reports_a_signal():
    # exec: the runtime becomes the program, the keeper waits for the program itself (measured for
    # ch-run in tests/test_launch_plan_container_charliecloud.py); exit128: a parent that exits 128+S
    assert {r.name: r.ends for r in containers.RUNTIMES} == {
        "apptainer": "exit128", "charliecloud": "exec", "podman": "exit128", "podman-hpc": "exit128",
        "shifter": "exit128", "pyxis": "exec"}
    assert all(set(r.gpu) == {"nvidia", "amd", "intel"} for r in containers.RUNTIMES)


def test_which_finds_the_first_runtime_on_path_and_never_pyxis(tmp_path):
    for prog in ("srun", "podman-hpc", "shifter"):
        (tmp_path / prog).write_text("#!/bin/sh\n")
        (tmp_path / prog).chmod(0o755)
    (tmp_path / "ch-run").write_text("not executable")
    assert containers.which(list(containers.NAMES), str(tmp_path)) == ("podman-hpc", str(tmp_path / "podman-hpc"))
    assert containers.which(["shifter", "podman-hpc"], str(tmp_path)) == ("shifter", str(tmp_path / "shifter"))
    assert containers.which(["pyxis", "charliecloud"], str(tmp_path) + os.pathsep + "/nonexistent") is None
