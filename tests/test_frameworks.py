"""The selftest through TensorFlow (multi-worker and horovod), horovod for torch, and
DeepSpeed, under real launchers: MPICH's mpiexec, Debian's Open MPI mpirun, horovodrun."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import mpich
from test_selftest import BIN, SELFTEST, need_module, run

pytestmark = pytest.mark.e2e
OMPI = "/usr/bin/mpirun.openmpi"


def check(p, tmp_path, n, framework, device_word):
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["ok"] and rep["world_size"] == n and rep["framework"] == framework
    assert all(device_word in r["device"] for r in rep["ranks"]), [r["device"] for r in rep["ranks"]]
    assert rep["losses"][-1] < rep["losses"][0]
    return rep


def test_tensorflow_multiworker(tmp_path):
    need_module("tensorflow")
    p = run([mpich(), "-n", "2", *SELFTEST, "--framework", "tensorflow", "--json-file", "report.json"], tmp_path)
    check(p, tmp_path, 2, "tensorflow", "multiworker")


def _horovod_launchers():
    return [
        pytest.param("mpirun", id="mpirun"),
        pytest.param("horovodrun-gloo", id="horovodrun-gloo"),
    ]


def _launch(kind: str, n: int):
    if kind == "mpirun":
        return [OMPI, "--oversubscribe", "-n", str(n)]
    horovodrun = BIN / "horovodrun"
    return [str(horovodrun), "--gloo", "-np", str(n), "-H", f"localhost:{n}", "--network-interface", "lo"]


@pytest.mark.parametrize("launcher", _horovod_launchers())
@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_horovod(tmp_path, launcher, framework):
    need_module("horovod")
    need_module(framework)
    p = run([*_launch(launcher, 2), *SELFTEST, "--framework", framework, "--backend", "horovod",
             "--json-file", "report.json"], tmp_path, {"PATH": f"{BIN}:/usr/bin:/bin"})
    rep = check(p, tmp_path, 2, framework, "horovod")
    assert rep["launcher"] == ("openmpi" if launcher == "mpirun" else "horovodrun")


def test_deepspeed(tmp_path):
    need_module("deepspeed")
    ext = os.environ.get("TORCH_EXTENSIONS_DIR") or str(Path.home() / ".cache" / "jobenv-ci" / "torch_extensions")
    p = run([mpich(), "-n", "2", *SELFTEST, "--backend", "deepspeed", "--json-file", "report.json"], tmp_path,
            {"TORCH_EXTENSIONS_DIR": ext}, timeout=600)
    check(p, tmp_path, 2, "torch", "deepspeed")
