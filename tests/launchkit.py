"""Shared pieces of the launch tests: a saved local job, fresh `env -i` shells, the DDP script."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import REPO

BIN = Path(sys.executable).parent  # the test venv: python3, MPICH wheel's mpiexec, torchrun

# A restored shell: the plan defines `launch` and puts $JOBENV_HOME/bin (the `launch` program)
# first on PATH, for `timeout`, `nohup` and child scripts.
RESTORE = "source <(jobenv get)"

# A plain torchrun-style DDP script: no jobenv import, env:// rendezvous.
TRAIN = r'''
import gc, json, os, socket, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    model(torch.full((8, 4), float(rank + 1))).sum().backward()
    opt.step()
t = torch.tensor([float(rank)])
dist.all_reduce(t)
view = {k: os.environ[k] for k in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PALS_RANKID")
        if k in os.environ}
print("TRAIN " + json.dumps({
    "rank": rank, "world": world, "RANK": os.environ["RANK"], "LOCAL_RANK": os.environ["LOCAL_RANK"],
    "WORLD_SIZE": os.environ["WORLD_SIZE"], "launcher_view": view, "host": socket.gethostname(),
    "sum": t.item(), "params": [round(p.sum().item(), 6) for p in model.parameters()],
    "python": sys.executable}), flush=True)
# torch 2.13 aborts a rank at interpreter exit ("terminate called without an active exception",
# SIGABRT) in about 3 of 10 runs when a DDP model outlives destroy_process_group (6/20 here
# under the MPICH wheel's mpiexec without jobenv, 0/20 when the model is released and collected
# after it): the script does that.  Unchanged programs are covered by jobenv launch's rank hook,
# which waits for gloo's workers at exit and excuses an abort after a clean finish
# (tests/test_rankhook.py soaks it; README: "Teardown aborts").
dist.destroy_process_group()
del model, opt
gc.collect()
'''


def write_train(d: Path) -> Path:
    p = d / "train.py"
    p.write_text(TRAIN)
    return p


def train_reports(stdout: str) -> List[dict]:
    """The ranks' own report lines; a failure summary quotes output as `jobenv:   | ...`, and
    those quotes are not more ranks."""
    return [json.loads(line.split("TRAIN ", 1)[1]) for line in stdout.splitlines()
            if "TRAIN {" in line and not line.startswith("jobenv:")]


def check_training(reports: List[dict], world: int) -> None:
    """Ranks form a permutation, agree with their launcher, and DDP kept them in step."""
    assert sorted(r["rank"] for r in reports) == list(range(world)), reports
    for r in reports:
        assert r["world"] == world and int(r["RANK"]) == r["rank"] and int(r["WORLD_SIZE"]) == world
        for v in r["launcher_view"].values():
            assert int(v) == r["rank"], r
        assert r["sum"] == world * (world - 1) / 2
    assert len({tuple(r["params"]) for r in reports}) == 1  # DDP averaged the gradients


def tools(d: Path, mpi: bool = True) -> Path:
    """A PATH directory with python3, jobenv, torchrun and (optionally) the MPICH wheel's mpiexec."""
    d.mkdir(parents=True, exist_ok=True)
    wrappers = {"python3": f'exec {sys.executable} "$@"', "jobenv": f'exec {sys.executable} -m jobenv "$@"',
                "torchrun": f'exec {sys.executable} {BIN / "torchrun"} "$@"'}
    if mpi:  # Hydra finds hydra_pmi_proxy next to its real path: a script, not a symlink
        wrappers["mpiexec"] = f'exec {BIN / "mpiexec"} "$@"'
    for name, body in wrappers.items():
        (d / name).write_text(f"#!/bin/sh\n{body}\n")
        (d / name).chmod(0o755)
    return d


def fresh_env(home: Path, path: str, **extra: str) -> Dict[str, str]:
    env = {"HOME": str(home), "PATH": path, "JOBENV_HOME": str(home / ".jobenv"), "PYTHONPATH": str(REPO),
           "XDG_CONFIG_HOME": str(home / ".config"), "LANG": "C.UTF-8", "GLOO_SOCKET_IFNAME": "lo",
           "OMP_NUM_THREADS": "1"}
    env.update(extra)
    return env


def shell(env: Dict[str, str], script: str, timeout: float = 150, cwd=None, node_prefix=()) -> subprocess.CompletedProcess:
    """bash -c SCRIPT in an empty environment plus `env` (a fresh login, as after ssh)."""
    argv = [*node_prefix, "env", "-i", *[f"{k}={v}" for k, v in env.items()], "/bin/bash", "--norc", "--noprofile",
            "-c", script]
    return subprocess.run(argv, capture_output=True, text=True, errors="surrogateescape", timeout=timeout, cwd=cwd)


def save(env: Dict[str, str], *args: str) -> None:
    p = subprocess.run([sys.executable, "-m", "jobenv", "save", "--quiet", *args], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def need_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        if os.environ.get("CI"):
            raise AssertionError("torch is required in CI")
        pytest.skip("torch is not installed")


def local_job(tmp_path: Path, ranks_per_host: int) -> Dict[str, str]:
    """A local job saved with the MPICH wheel's mpiexec (skipped without it): env for fresh shells."""
    if not (BIN / "mpiexec").exists():
        pytest.skip("the mpich wheel is not installed")
    home = tmp_path / "home"
    home.mkdir()
    env = fresh_env(home, f"{tools(tmp_path / 'bin')}:/usr/bin:/bin")
    save(env, "--ranks-per-host", str(ranks_per_host))
    return env


def ending(r):
    """A rank's end as the ledger reader gives it, in one comparable value: None (no end yet),
    ("exit", N), ("signal", S), ("lost", None) or ("vanished", None)."""
    return None if r.how is None else (r.how, r.code if r.how == "exit" else r.signal)


def set_ending(r, end, when=None):
    """Give a RankState built by a test the end `end`: "exit:N" or "signal:S" (the keeper's words),
    "lost", "vanished", or None (still running)."""
    from jobenv.rank.ledger import set_end

    if end in ("lost", "vanished"):
        r.how, r.ended, r.lost = end, when, end == "lost" or r.lost
    elif end is not None:
        set_end(r, end, when)
    return r
