"""`jobenv doctor --container IMAGE`: the runtime, the image, the GPU flag and the image's MPI
against the launcher's, said before any rank starts."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jobenv.doctor import container as box
from launchkit import local_job


def _image(d: Path, soname: str = "") -> Path:
    (d / "bin").mkdir(parents=True)
    (d / "bin" / "sh").write_text("")
    if soname:
        (d / "usr" / "lib" / "x86_64-linux-gnu").mkdir(parents=True)
        (d / "usr" / "lib" / "x86_64-linux-gnu" / soname).write_text("")
    return d


def test_the_images_mpi_is_read_from_its_library_directories(tmp_path):
    assert box.image_mpi(str(_image(tmp_path / "o", "libmpi.so.40"))) == "openmpi"
    assert box.image_mpi(str(_image(tmp_path / "m", "libmpi.so.12"))) == "mpich"
    assert box.image_mpi(str(_image(tmp_path / "n"))) == ""
    assert box.image_mpi("docker:nvcr.io/nvidia/pytorch:24.01-py3") is None


def test_an_open_mpi_image_under_hydra_is_named_before_any_rank_starts():
    bad = box.judge_mpi("openmpi", "mpich", "MPICH Hydra")
    assert bad.status == "fail" and "singleton" in bad.detail
    assert box.judge_mpi("mpich", "openmpi", "Open MPI").status == "fail"
    assert box.judge_mpi("mpich", "mpich", "Cray PALS").status == "ok"
    assert box.judge_mpi("openmpi", "any", "torchrun").status == "ok"
    assert box.judge_mpi("", "mpich", "MPICH Hydra").status == "ok"
    assert box.judge_mpi(None, "mpich", "MPICH Hydra").status == "warn"


@pytest.mark.slow  # doctor's every check: ~10 s
def test_doctor_container_checks_a_real_job(tmp_path):
    env = local_job(tmp_path, 2)  # saved with the MPICH wheel's mpiexec
    ompi = _image(tmp_path / "ompi", "libmpi.so.40")
    p = subprocess.run([sys.executable, "-m", "jobenv", "doctor", "--json", "--container", str(ompi),
                        "--container-runtime", "apptainer"], env=env, capture_output=True, text=True, timeout=120)
    checks = {c["name"]: c for c in json.loads(p.stdout)["checks"]}
    assert p.returncode == 1
    assert checks["container MPI"]["status"] == "fail" and "Open MPI" in checks["container MPI"]["detail"]
    assert checks["container image"]["status"] == "ok"
    assert checks["container runtime"]["status"] == "fail" and "apptainer is not on PATH" in \
        checks["container runtime"]["detail"]
    missing = subprocess.run([sys.executable, "-m", "jobenv", "doctor", "--json", "--container",
                              str(tmp_path / "nope")], env=env, capture_output=True, text=True, timeout=120)
    assert {c["name"]: c["status"] for c in json.loads(missing.stdout)["checks"]}["container image"] == "fail"


@pytest.mark.slow
def test_a_charliecloud_image_without_etc_hosts_is_named(tmp_path):
    env = local_job(tmp_path, 2)
    img = _image(tmp_path / "img", "libmpich.so.12")
    doctor = [sys.executable, "-m", "jobenv", "doctor", "--json", "--container", str(img), "--container-runtime",
              "charliecloud"]
    p = subprocess.run(doctor, env=env, capture_output=True, text=True, timeout=120)
    checks = {c["name"]: c for c in json.loads(p.stdout)["checks"]}
    assert checks["container host names"]["status"] == "warn", checks
    assert "/etc/hosts or /etc/resolv.conf" in checks["container host names"]["detail"]
    assert checks["container host names"]["fix"] == f"create them empty: touch {img}/etc/hosts {img}/etc/resolv.conf"
    (img / "etc").mkdir(exist_ok=True)
    (img / "etc" / "hosts").touch()
    (img / "etc" / "resolv.conf").touch()
    p = subprocess.run(doctor, env=env, capture_output=True, text=True, timeout=120)
    assert "container host names" not in {c["name"] for c in json.loads(p.stdout)["checks"]}, p.stdout
