"""`launch --container` with a real runtime and a real image: Debian's Charliecloud (ch-run) running
a Debian image made here by debootstrap (tests/containerimage.py), under the MPICH wheel's mpiexec.

The ranks see what they would see outside; a rank's exit code and its death by signal reach the
ledger and the launch exactly (ch-run execs the program: the keeper waits for the program itself);
^C ends every rank and leaves nothing running; the selftest passes inside the image whether or
not the image has jobenv."""
from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

import containerimage
from conftest import REPO, need
from launchkit import local_job

pytestmark = pytest.mark.e2e

PROBE = ("import json, os, jobenv; print('PROBE ' + json.dumps({'env': {k: os.environ.get(k) for k in ("
         "'RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT', 'OMP_NUM_THREADS', "
         "'JOBENV_CONTAINER', 'JOBENV_CONTAINER_RUNTIME', 'JOBENV_RESTART_COUNT')}, 'cwd': os.getcwd(), "
         "'inside': os.path.exists('/.jobenv-image-ok'), 'jobenv': os.path.realpath(jobenv.__file__), "
         "'image_jobenv': getattr(jobenv, 'IMAGE_COPY', False)}), flush=True)")


def _mount_point(image: Path, path: str) -> None:
    """ch-run binds onto directories the image has: one for the top of `path` (docs/containers.md)."""
    (image / path.strip("/").split("/")[0]).mkdir(exist_ok=True)


@pytest.fixture(scope="module")
def image() -> Path:
    need("ch-run")
    try:
        img = containerimage.image()
    except containerimage.Unavailable as exc:
        if os.environ.get("CI"):
            raise AssertionError(f"the container image is required in CI: {exc}") from None
        pytest.skip(str(exc))
    for p in (str(REPO), sys.prefix):
        _mount_point(img, p)
    return img


@pytest.fixture(scope="module")
def image_with_jobenv(image, tmp_path_factory) -> Path:
    """The image with a copy of jobenv installed in its own dist-packages (marked IMAGE_COPY): files
    hard-linked from the cached image, the new ones copied, so the cache is never written."""
    img = tmp_path_factory.mktemp("img") / "with-jobenv"
    subprocess.run(["cp", "-al", str(image), str(img)], check=True)
    dest = img / "usr" / "lib" / "python3" / "dist-packages" / "jobenv"
    shutil.copytree(REPO / "jobenv", dest, ignore=shutil.ignore_patterns("__pycache__"))
    init = dest / "__init__.py"
    text = init.read_text()
    init.unlink()  # a new file: the copy's, never a link into the cache
    init.write_text(text + "\nIMAGE_COPY = True\n")
    return img


def _job(tmp_path: Path) -> dict:
    env = local_job(tmp_path, 2)
    env["USER"] = os.environ.get("USER") or "root"  # ch-run refuses to start without $USER
    return env


def _launch(env: dict, cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jobenv", "launch", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, errors="replace", timeout=timeout)


def _probes(out: str) -> list:
    return sorted((json.loads(line[6:]) for line in out.splitlines() if line.startswith("PROBE ")),
                  key=lambda p: int(p["env"]["RANK"]))


def _ledger(env: dict) -> str:
    return "".join(Path(p).read_text() for p in glob.glob(f"{env['JOBENV_HOME']}/runs/*/*-a0/host-*.ledger"))


def test_ranks_see_what_they_would_see_outside(image, tmp_path):
    env = _job(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    inside = _launch(env, work, "--master-port", "29517", "--container", str(image), "--container-runtime",
                     "charliecloud", "--", "python3", "-c", PROBE)  # the image's: PATH/python3 here is the host's
    assert inside.returncode == 0, inside.stderr
    led = _ledger(env)  # the rank hook ran inside: its lines reached the host's ledger through the bound store
    assert all(f"{w} {r} " in led for w in ("hook", "clean") for r in (0, 1)), led
    outside = _launch(env, work, "--master-port", "29517", "--", sys.executable, "-c", PROBE)
    assert outside.returncode == 0, outside.stderr
    ins, outs = _probes(inside.stdout), _probes(outside.stdout)
    assert [p["env"]["RANK"] for p in ins] == ["0", "1"]
    for i, o in zip(ins, outs):
        assert i["inside"] and not o["inside"]
        assert i["cwd"] == o["cwd"] == str(work)
        assert i["env"].pop("JOBENV_CONTAINER") == str(image)
        assert i["env"].pop("JOBENV_CONTAINER_RUNTIME") == "charliecloud"
        assert o["env"].pop("JOBENV_CONTAINER") is None and o["env"].pop("JOBENV_CONTAINER_RUNTIME") is None
        assert i["env"] == o["env"]
        assert i["jobenv"] == str(REPO / "jobenv" / "__init__.py")  # bound in, not in the image


def test_exit_code_and_signal_are_exact(image, tmp_path):
    env = _job(tmp_path)
    p = _launch(env, tmp_path, "--container", str(image), "--", "/bin/sh", "-c",
                'if [ "$RANK" = 1 ]; then exit 3; fi; sleep 1')
    assert p.returncode == 3, p.stderr
    assert "end 1 exit:3 " in _ledger(env) and "rank 1" in p.stderr and "exit code 3" in p.stderr
    (tmp_path / "two").mkdir()
    env2 = _job(tmp_path / "two")
    p = _launch(env2, tmp_path, "--container", str(image), "--", "/bin/sh", "-c",
                'if [ "$RANK" = 1 ]; then kill -9 $$; fi; sleep 1')
    assert "end 1 signal:9 " in _ledger(env2), _ledger(env2)
    assert "signal 9 (SIGKILL)" in p.stderr and p.returncode == 137, p.stderr


def _running(marker: str) -> list:
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


def test_ctrl_c_ends_every_rank_and_leaves_nothing_running(image, tmp_path):
    env = _job(tmp_path)
    marker = f"jobenv-ctrl-c-{os.getpid()}"
    launch = subprocess.Popen([sys.executable, "-m", "jobenv", "launch", "--container", str(image), "--",
                               "/bin/sh", "-c", f'echo up $RANK; exec sleep 300 # {marker}'], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while _ledger(env).count("start ") < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _ledger(env).count("start ") == 2
        os.killpg(launch.pid, signal.SIGINT)  # a terminal's ^C: the whole foreground group
        out, err = launch.communicate(timeout=60)
    finally:
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGKILL)
    assert launch.returncode == 130, err
    deadline = time.monotonic() + 10
    while _running(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _running(marker) == []
    # each rank's end recorded: by its keeper (`end`), or, for a keeper the launcher's teardown killed
    # outright (a loaded machine, once), by the host agent two beats later (`lost`)
    deadline = time.monotonic() + 5
    while len(_ended_ranks(env)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ended_ranks(env) == {"0", "1"}, _ledger(env)


def _ended_ranks(env) -> set:
    return {line.split()[1] for line in _ledger(env).splitlines() if line.split()[:1] in (["end"], ["lost"])}


@pytest.mark.parametrize("which", ["plain", "with-jobenv"])
def test_selftest_passes_inside_the_image_with_and_without_jobenv(image, image_with_jobenv, tmp_path, which):
    pytest.importorskip("torch")
    img = image if which == "plain" else image_with_jobenv
    env = _job(tmp_path)
    site = sysconfig.get_paths()["purelib"]  # the test venv's torch, for the image's own python3 (both 3.11)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], site])
    probe = _launch(env, tmp_path, "--container", str(img), "--bind", f"{sys.prefix}:{sys.prefix}:ro", "--",
                    "/usr/bin/python3", "-c", PROBE)
    assert probe.returncode == 0, probe.stderr
    assert all(p["jobenv"] == str(REPO / "jobenv" / "__init__.py") and not p["image_jobenv"]
               for p in _probes(probe.stdout))
    p = _launch(env, tmp_path, "--container", str(img), "--bind", f"{sys.prefix}:{sys.prefix}:ro", "--",
                "/usr/bin/python3", "-m", "jobenv.selftest", "-q", "--framework", "torch", "--timeout", "120",
                timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "jobenv selftest PASSED: 2 ranks on 1 host, torch via" in p.stdout
    assert f"in container {img} (charliecloud)" in p.stdout
