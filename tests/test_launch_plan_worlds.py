"""A launch whose launcher would start the program's MPI as worlds of one rank is refused
before any rank starts (jobenv.launch.plan.worlds): what the program reaches, judged from what is
installed now; `--launcher` runs the other MPI's mpiexec; the peers case end to end (horovod
built with Debian's Open MPI, the MPICH wheel's mpiexec beside the venv's python)."""
from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from jobenv.launch.plan import worlds
from launchkit import fresh_env, save, shell, tools

HOROVOD_SO = sorted(glob.glob(os.path.join(os.path.dirname(sys.executable), "..", "lib", "python3*", "site-packages",
                                           "horovod", "torch", "mpi_lib*.so")))


def test_imports_reads_import_statements_only():
    assert worlds.imports("import horovod.torch as hvd\n", "horovod")
    assert worlds.imports("import os, torch as t, horovod\n", "horovod")
    assert worlds.imports("def f():\n    from mpi4py import MPI\n", "mpi4py")
    assert not worlds.imports("import horovodx\n# import horovod\nx = 'import horovod'\n", "horovod")
    assert not worlds.imports("import deepspeed\n", "horovod")


def test_reached_names_the_interpreter_and_the_packages_the_source_imports(tmp_path):
    (tmp_path / "hv.py").write_text("import horovod.torch as hvd\nfrom mpi4py import MPI\n")
    (tmp_path / "ds.py").write_text("import deepspeed\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text("import mpi4py\n")
    env = {"PATH": os.path.dirname(sys.executable)}
    py = os.path.basename(sys.executable)
    where = os.path.join(os.path.dirname(sys.executable), py)
    assert worlds.reached([py, "hv.py"], env, str(tmp_path)) == (where, ("mpi4py", "horovod"))
    assert worlds.reached([py, "ds.py"], env, str(tmp_path)) == (where, ())  # horovod merely installed
    assert worlds.reached([py, "-m", "pkg.train"], env, str(tmp_path)) == (where, ("mpi4py",))
    assert worlds.reached([py, "-m", "horovod.runner"], env, str(tmp_path)) == (where, ("horovod",))
    assert worlds.reached([py, "-u", "-c", "import horovod"], env, str(tmp_path)) == (where, ("horovod",))
    assert worlds.reached([py, "hv.py"], {**env, "HOROVOD_CONTROLLER": "gloo"}, str(tmp_path))[1] == ("mpi4py",)
    assert worlds.reached(["sh", "-c", "python3 hv.py"], env, str(tmp_path)) == (None, ())


@pytest.mark.skipif(not shutil.which("mpicc.openmpi"), reason="Debian's Open MPI compiler wrapper not installed")
def test_linked_reads_a_programs_libmpi(tmp_path):
    src = tmp_path / "hello.c"
    src.write_text("#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n")
    subprocess.run(["mpicc.openmpi", str(src), "-o", str(tmp_path / "hello")], check=True, timeout=120)
    env = {"PATH": str(tmp_path)}
    assert worlds.linked(["hello"], env) == {"hello": "Open MPI"}
    assert worlds.linked(["true"], {"PATH": "/usr/bin:/bin"}) == {}
    lines = worlds.misfits("/x/mpiexec", "mpich", ["hello"], env, str(tmp_path))
    assert len(lines) == 1 and lines[0].startswith("hello is built with Open MPI, but the launcher is MPICH"), lines
    assert "--launcher openmpi" in lines[0] and "/x/mpiexec" in lines[0] and "--allow-mismatch" in lines[0]
    assert worlds.misfits("/x/mpirun", "openmpi", ["hello"], env, str(tmp_path)) == []
    assert worlds.misfits("/x/srun", "srun", ["hello"], env, str(tmp_path)) == []  # srun serves either ABI


def _horovod() -> None:
    if importlib.util.find_spec("horovod") is None or not HOROVOD_SO or not os.path.exists("/usr/bin/mpiexec.openmpi"):
        pytest.skip("horovod built with Debian's Open MPI (.ci/install-frameworks.sh) is not installed")


HV = "import horovod.torch as hvd\nhvd.init()\nprint('HVD', hvd.rank(), hvd.size(), flush=True)\n"


@pytest.mark.e2e
@pytest.mark.parametrize("saved_with", ["horovod", "an empty venv"])
def test_peers_split_world_is_refused_and_runs_as_one_with_launcher(tmp_path, saved_with):
    """horovod (Open MPI) under the MPICH wheel's mpiexec: refused before any rank starts,
    whether the record's Python had it at save or not; --launcher openmpi runs one world."""
    _horovod()
    mpi = tools(tmp_path / "mpi")
    home = tmp_path / "home"
    home.mkdir()
    path = f"{mpi}:/usr/bin:/bin"
    if saved_with == "an empty venv":  # save sees no horovod: it is "installed after save"
        venv = tmp_path / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        path = f"{venv}/bin:{path}"
    env = fresh_env(home, path, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    save(env, "--ranks-per-host", "2")
    (tmp_path / "hv.py").write_text(HV)
    py = sys.executable
    p = shell(env, f"jobenv launch -- {py} hv.py", cwd=tmp_path)
    assert p.returncode == 5 and "HVD" not in p.stdout, p.stdout + p.stderr
    err = [ln for ln in p.stderr.splitlines() if ln.startswith("jobenv: error:")]
    assert len(err) == 1 and "horovod is built with Open MPI, but the launcher is MPICH" in err[0], p.stderr
    assert "--launcher openmpi" in err[0] and "--allow-mismatch" in err[0], err
    assert not list((home / ".jobenv").glob("runs/*/*")), "a refused launch left a run directory"
    p = shell(env, f"jobenv launch --launcher openmpi -- {py} hv.py", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(ln for ln in p.stdout.splitlines() if ln.startswith("HVD")) == ["HVD 0 2", "HVD 1 2"], p.stdout
    # a program that does not import horovod (a DeepSpeed run in the same venv) is not refused
    p = shell(env, f"jobenv launch -- {py} -c 'print(\"RAN\")'", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.count("RAN") == 2 and "horovod" not in p.stderr, p.stdout + p.stderr
    p = shell(env, f"jobenv launch --allow-mismatch --dry-run -- {py} hv.py", cwd=tmp_path)
    assert p.returncode == 0 and "warning: horovod is built with Open MPI" in p.stderr, p.stderr
