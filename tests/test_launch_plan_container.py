"""The launch's container, decided once: the runtime chosen, what is bound, the ranks' variables."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO, base_env
from jobenv.core.errors import BadInput
from jobenv.launch.plan import container
from jobenv.launch.types import ContainerRequest
from jobenv.selftest.report import container as report_container


def test_binds_parse_and_refuse_malformed_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert container.parse_bind("data") == (str(tmp_path / "data"), str(tmp_path / "data"), False)
    assert container.parse_bind("/a:/b:ro") == ("/a", "/b", True)
    assert container.parse_bind("/a:/b") == ("/a", "/b", False)
    for bad in ("", ":/b", "/a:b", "/a:/b:rx", "/a,/c:/b", "/a:/b:ro:x"):
        with pytest.raises(BadInput):
            container.parse_bind(bad)


def test_a_path_inside_another_is_bound_once_read_write_winning():
    got = container.same_path_binds([("/w/run", False), ("/w", True), ("/w/jobenv", True), ("/x/", True)])
    assert got == [("/w", "/w", False), ("/x", "/x", True)]


def test_ch_run_binds_move_up_to_a_directory_the_image_has(tmp_path):
    img = tmp_path / "img"
    (img / "tmp").mkdir(parents=True)
    (img / "work" / "a").mkdir(parents=True)
    got = container.onto_image([("/work/a/b/c", "/work/a/b/c", False), ("/tmp/x", "/tmp/x", True),
                                ("/work/a", "/work/a", True), ("/data", "/mnt", False)], str(img))
    assert got == [("/tmp", "/tmp", True), ("/work/a", "/work/a", False), ("/data", "/mnt", False)]
    with pytest.raises(BadInput, match=r"no directory /scratch .* mkdir .*img/scratch"):
        container.onto_image([("/scratch/u", "/scratch/u", False)], str(img))
    # a named or SquashFS image: the runtime says what is missing
    assert container.onto_image([("/scratch/u", "/scratch/u", False)], "docker:x") == [("/scratch/u", "/scratch/u", False)]


def test_the_runtime_is_the_one_asked_else_the_sites_else_the_first_on_path(tmp_path):
    (tmp_path / "shifter").write_text("#!/bin/sh\n")
    (tmp_path / "shifter").chmod(0o755)
    assert container.choose_runtime("apptainer", ["shifter"], str(tmp_path)) == "apptainer"
    assert container.choose_runtime(None, ["podman-hpc", "shifter"], str(tmp_path)) == "shifter"
    assert container.choose_runtime(None, ["podman-hpc"], str(tmp_path)) == "podman-hpc"
    assert container.choose_runtime(None, [], str(tmp_path)) == "shifter"
    with pytest.raises(BadInput, match="no container runtime found on PATH"):
        container.choose_runtime(None, [], str(tmp_path / "none"))


def test_plan_binds_the_ranks_world_and_puts_only_jobenv_on_pythonpath(tmp_path):
    store, cwd, logs = tmp_path / "store", tmp_path / "cwd", tmp_path / "logs"
    cwd.mkdir()
    env = {"JOBENV_HOME": str(store), "PATH": "", "PYTHONPATH": "/user/lib"}
    box = container.plan(ContainerRequest("/no/such.sif", "apptainer", ["/data:/data:ro"]), env, str(cwd), str(logs),
                         "/local/%h/env", gpu="nvidia")
    binds = [w[len("--bind="):] for w in box.words if w.startswith("--bind=")]
    assert sorted(binds) == sorted([f"{container.PACKAGE}:{container.PACKAGE}:ro", "/local:/local:ro", f"{cwd}:{cwd}",
                                    f"{logs}:{logs}", f"{store}:{store}", "/data:/data:ro"])
    assert box.words[:2] == ["apptainer", "exec"] and box.words[-1] == "/no/such.sif" and "--nv" in box.words
    assert f"--pwd={cwd}" in box.words
    first, rest = box.env["PYTHONPATH"].split(os.pathsep, 1)
    assert rest == "/user/lib" and os.listdir(first) == ["jobenv"]
    assert os.readlink(os.path.join(first, "jobenv")) == container.PACKAGE
    assert os.stat(first).st_mode & 0o777 == 0o700
    assert box.env["JOBENV_CONTAINER"] == "/no/such.sif" and box.env["JOBENV_CONTAINER_RUNTIME"] == "apptainer"
    again = container.plan(ContainerRequest("img", "pyxis"), env, str(cwd), None, None)
    assert again.words == [] and again.launcher_flags[-1] == "--container-image=img"
    assert again.env["PYTHONPATH"].split(os.pathsep)[0] == first


def test_the_staged_copies_directory_is_bound_and_never_root():
    assert container.staged_root("/local/%h/env") == "/local"
    assert container.staged_root("/local/env-%h") == "/local"
    assert container.staged_root("/scratch/u/env") == "/scratch/u/env"
    assert container.staged_root("/%h/env") == "/"
    with pytest.raises(BadInput, match="refusing to bind /"):
        container.plan(ContainerRequest("img", "apptainer"), {"JOBENV_HOME": "/tmp/x"}, "/", None, None)


def test_the_selftest_report_names_the_container():
    assert report_container({"JOBENV_CONTAINER": "/i", "JOBENV_CONTAINER_RUNTIME": "charliecloud"}) == {
        "image": "/i", "runtime": "charliecloud"}
    assert report_container({}) is None


@pytest.mark.parametrize("args, said", [
    (["--bind", "/a", "--", "true"], "--bind needs --container IMAGE"),
    (["--container-runtime", "apptainer", "--", "true"], "--container-runtime needs --container IMAGE"),
    (["--container", "img", "--container-runtime", "docker", "--", "true"], "'docker' is not one of"),
])
def test_container_flags_without_an_image_are_usage_errors(tmp_path, args, said):
    env = base_env(tmp_path)
    p = subprocess.run([sys.executable, "-m", "jobenv", "launch", *args], env=env, capture_output=True, text=True,
                       cwd=REPO, timeout=60)
    assert p.returncode == 2 and said in p.stderr, p.stderr
