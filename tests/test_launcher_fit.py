"""No silent launcher mismatch: a profile's flags are for one launcher family (Polaris: Cray
PALS); `save` warns and `doctor` fails when the mpiexec found is another (the venv's MPICH
Hydra wheel), and `save` says when it records another launcher or Python than the job's
previous record.  Real programs: the MPICH wheel's mpiexec beside this interpreter, Debian's
Open MPI, and a PALS-shaped mpiexec installed where Cray installs it."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import machines
from conftest import base_env, jobenv
from jobenv import launcher_fit
from jobenv.runtime import families

VENV_BIN = os.path.dirname(sys.executable)


def pals_bin(tmp_path: Path) -> Path:
    """/opt/cray/pals/<version>/bin/mpiexec as a Polaris node has it (path and --version text)."""
    d = tmp_path / "opt" / "cray" / "pals" / "1.2.12" / "bin"
    d.mkdir(parents=True)
    exe = d / "mpiexec"
    exe.write_text("#!/bin/sh\necho 'mpiexec version 1.2.12 revision 1234abcd built Jan 1 2024'\n")
    exe.chmod(0o755)
    return d


def test_mismatch_names_both_families_and_the_fix():
    hydra = families.get("mpich")
    bad = launcher_fit.mismatch("polaris", "pals", hydra, "/home/u/.venv/bin/mpiexec")
    assert bad is not None
    problem, fix = bad
    assert "Cray PALS" in problem and "MPICH" in problem and "/home/u/.venv/bin/mpiexec" in problem
    assert "module load cray-pals" in fix and "pip uninstall mpich" in fix
    assert launcher_fit.mismatch("polaris", "pals", families.get("pals"), "/opt/cray/pals/1.2/bin/mpiexec") is None
    assert launcher_fit.mismatch("local", None, hydra, "/x/mpiexec") is None  # a profile for any mpiexec


@pytest.mark.slow  # jobenv doctor: imports torch and the frameworks (~11 s of CPU)
def test_polaris_job_saved_with_the_venvs_mpich_first(tmp_path, home):
    """The issue's case: on a Polaris-shaped job the venv's MPICH-wheel mpiexec is first on PATH."""
    env = base_env(home, machines.polaris(tmp_path), path=f"{VENV_BIN}:/usr/bin:/bin")
    p = jobenv(["save", "--quiet"], env)
    assert p.returncode == 0, p.stderr
    assert "Cray PALS" in p.stderr and "MPICH" in p.stderr and "module load cray-pals" in p.stderr, p.stderr
    d = jobenv(["doctor", "--json"], env)
    checks = {c["name"]: c for c in json.loads(d.stdout)["checks"]}
    assert d.returncode == 1 and checks["launcher"]["status"] == "fail", checks["launcher"]
    assert "Cray PALS" in checks["launcher"]["detail"] and "cray-pals" in checks["launcher"]["fix"]


@pytest.mark.slow  # jobenv doctor: imports torch and the frameworks (~11 s of CPU)
def test_polaris_job_saved_with_pals_first_is_quiet(tmp_path, home):
    pals = pals_bin(tmp_path)
    env = base_env(home, machines.polaris(tmp_path), path=f"{pals}:{VENV_BIN}:/usr/bin:/bin")
    p = jobenv(["save", "--quiet"], env)
    assert p.returncode == 0 and "does not take those flags" not in p.stderr, p.stderr
    d = jobenv(["doctor", "--json"], env)
    checks = {c["name"]: c for c in json.loads(d.stdout)["checks"]}
    assert checks["launcher"]["status"] == "ok" and "Cray PALS" in checks["launcher"]["detail"], checks["launcher"]


def test_a_save_that_records_another_launcher_says_so(tmp_path, home):
    """Saved once with the venv's MPICH first, then from a shell without the venv (Debian's
    Open MPI mpiexec first): the second save warns, naming both."""
    env = base_env(home, machines.local(tmp_path), path=f"{VENV_BIN}:/usr/bin:/bin")
    jobenv(["save", "--quiet"], env, check=True)
    again = jobenv(["save", "--quiet"], env)
    assert again.returncode == 0 and "previous record" not in again.stderr, again.stderr
    other = jobenv(["save", "--quiet"], {**env, "PATH": f"/usr/bin:{VENV_BIN}:/bin"})
    assert other.returncode == 0
    assert "/usr/bin/mpiexec" in other.stderr and os.path.join(VENV_BIN, "mpiexec") in other.stderr, other.stderr


@pytest.mark.slow  # jobenv doctor: imports torch and the frameworks (~11 s of CPU)
def test_pbs_job_whose_batch_path_finds_open_mpi_is_warned(tmp_path, home):
    """issue 25: a `jobenv submit` job on PBS (qsub passes no environment) found Debian's Open
    MPI mpiexec on the batch PATH and ran it with the generic profile's Hydra flags (`-ppn`):
    0 ranks, no warning.  Now save warns and doctor fails; the venv's MPICH first is quiet."""
    env = base_env(home, machines.pbs_mpiprocs4(tmp_path), path=f"/usr/bin:{VENV_BIN}:/bin")
    p = jobenv(["save", "--quiet", "--profile", "pbs"], env)
    assert p.returncode == 0, p.stderr
    assert "/usr/bin/mpiexec is Open MPI" in p.stderr and "MPICH Hydra" in p.stderr and "Cray PALS" in p.stderr, p.stderr
    d = jobenv(["doctor", "--json"], env)
    checks = {c["name"]: c for c in json.loads(d.stdout)["checks"]}
    assert d.returncode == 1 and checks["launcher"]["status"] == "fail", checks["launcher"]
    quiet = jobenv(["save", "--quiet", "--profile", "pbs"], {**env, "PATH": f"{VENV_BIN}:/usr/bin:/bin"})
    assert quiet.returncode == 0 and "does not take those flags" not in quiet.stderr, quiet.stderr


def test_a_family_list_accepts_each_of_its_families():
    want = launcher_fit.declared([{"argv": ["mpiexec"], "family": ["mpich", "pals"]}], "mpiexec")
    assert want == ("mpich", "pals")
    for ok in ("mpich", "pals"):
        assert launcher_fit.mismatch("pbs", want, families.get(ok), "/x/bin/mpiexec") is None
    problem, fix = launcher_fit.mismatch("pbs", want, families.get("openmpi"), "/usr/bin/mpiexec") or ("", "")
    assert "MPICH Hydra mpiexec or Cray PALS" in problem and "first on PATH" in fix


def test_world_misfit_and_srun_mpi_are_one_rule():
    assert launcher_fit.world_misfit("MPICH", {"horovod": "Open MPI", "mpi4py": "MPICH"}) == [
        "horovod is built with Open MPI, but the launcher is MPICH: every rank would start as rank 0 of a world "
        "of 1 (and exit 0); launch with Open MPI's mpiexec (`jobenv launch --launcher openmpi`), or rebuild horovod "
        "against the launcher's MPI (MPICH or a derivative)"]
    assert launcher_fit.world_misfit("Cray PALS", {"mpi4py": "Cray MPICH"}) == []
    assert launcher_fit.world_misfit("Slurm srun", {"mpi4py": "Open MPI"}) == []  # srun serves either
    assert launcher_fit.world_misfit(None, {"mpi4py": "MPICH"}) == []
    listed = "MPI plugin types are...\n\tnone\n\tpmi2\n\tcray_shasta\nspecific pmix plugin versions available: pmix_v4\n"
    assert launcher_fit.srun_mpi({"mpi4py": "MPICH"}, listed) == "pmi2"
    assert launcher_fit.srun_mpi({"mpi4py": "Open MPI"}, listed) == "pmix"
    assert launcher_fit.srun_mpi({"mpi4py": "Open MPI"}, "none pmi2") is None  # Open MPI needs pmix
    assert launcher_fit.srun_mpi({"mpi4py": "MPICH", "horovod": "Open MPI"}, listed) == "pmi2"  # mpi4py's
    assert launcher_fit.srun_mpi({"horovod": "Open MPI"}, listed) == "pmix"
    assert launcher_fit.srun_mpi({"mpi4py": "Cray MPICH"}, listed) == "cray_shasta"
    assert launcher_fit.soname_flavor(b"\0libc.so.6\0libmpi.so.40\0") == "Open MPI"
    assert launcher_fit.soname_flavor(b"\0libmpi.so.12\0") == "MPICH" and launcher_fit.soname_flavor(b"libmpi.so.4") is None


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_save_says_when_horovod_is_not_the_launchers_mpi(tmp_path, home):
    """The issue's silent run: horovod built with Debian's Open MPI, launched by the MPICH wheel's
    mpiexec, ran as worlds of 1 and exited 0.  save reads what horovod links and says so."""
    import pytest

    if not _has("horovod"):
        pytest.skip("horovod is not installed")
    env = base_env(home, machines.local(tmp_path), path=f"{VENV_BIN}:/usr/bin:/bin")
    p = jobenv(["save", "--quiet"], env)
    assert p.returncode == 0, p.stderr
    want = "horovod is built with Open MPI, but the launcher is MPICH: every rank would start as rank 0"
    assert want in p.stderr and "mpi4py" not in p.stderr, p.stderr  # mpi4py here is the wheel's MPICH: it fits
    # launch judges what the program reaches, installed now (tests/test_launch_plan_worlds.py): a shell
    # reaches no MPI package, so it runs without a word (a program importing horovod is refused)
    q = jobenv(["launch", "-n", "1", "--", "sh", "-c", "echo RANK-RAN >&2"], env)
    assert q.returncode == 0 and "horovod" not in q.stderr and "RANK-RAN" in q.stderr, q.stderr


def test_save_says_when_mpi4py_is_not_the_recorded_launchers_mpi(tmp_path, home):
    """Debian's Open MPI mpiexec first on PATH, the venv's mpi4py built with the MPICH wheel."""
    import pytest

    if not _has("mpi4py") or not os.access("/usr/bin/mpiexec", os.X_OK):
        pytest.skip("needs mpi4py and Debian's Open MPI")
    env = base_env(home, machines.local(tmp_path), path=f"/usr/bin:{VENV_BIN}:/bin")
    p = jobenv(["save", "--quiet"], env)
    assert p.returncode == 0, p.stderr
    assert "mpi4py is built with MPICH, but the launcher is Open MPI" in p.stderr, p.stderr
    rec = json.loads(jobenv(["show", "--json"], env).stdout)
    assert rec["software"]["mpi"]["mpi4py"] == "MPICH", rec["software"]


def test_srun_world_adds_the_type_the_venvs_mpi_needs_or_says_the_world_would_split():
    listed = "MPI plugin types are...\n\tnone\n\tpmi2\n\tcray_shasta\nspecific pmix plugin versions available: pmix_v4\n"
    asked = []

    def ask():
        asked.append(1)
        return listed
    assert launcher_fit.srun_world({"mpi4py": "MPICH"}, None, ask) == ("pmi2", []) and asked == [1]
    assert launcher_fit.srun_world({"mpi4py": "Open MPI"}, None, ask) == ("pmix", [])
    assert launcher_fit.srun_world({}, None, ask) == (None, [])
    asked.clear()
    assert launcher_fit.srun_world({"mpi4py": "MPICH"}, "pmix_v4", ask) == (None, [])  # the user's, and it fits
    assert launcher_fit.srun_world({"mpi4py": "Open MPI"}, "pmix", ask) == (None, []) and asked == []
    assert launcher_fit.srun_world({"mpi4py": "Open MPI"}, "pmi2", ask) == (None, [
        "mpi4py is built with Open MPI, but srun --mpi=pmi2 (--mpi or SLURM_MPI_TYPE) is not its PMI: every rank "
        "would start it as rank 0 of a world of 1 (and exit 0); it needs --mpi=pmix"])
    assert launcher_fit.srun_world({"mpi4py": "Open MPI"}, None, lambda: "MPI plugin types are...\n none\n pmi2\n") == (
        None, ["mpi4py is built with Open MPI, and no srun --mpi type here fits (it needs --mpi=pmix; srun --mpi=list "
               "offers none, pmi2): every rank would start it as rank 0 of a world of 1 (and exit 0)"])
    # the venv: mpi4py from the MPICH wheel, horovod built with Debian's Open MPI
    assert launcher_fit.srun_world({"mpi4py": "MPICH", "horovod": "Open MPI"}, None, ask) == ("pmi2", [
        "horovod is built with Open MPI, but launch passes srun --mpi=pmi2 for mpi4py (MPICH): every rank would "
        "start it as rank 0 of a world of 1 (and exit 0); it needs --mpi=pmix (rebuild one of them against the "
        "other's MPI)"])
