"""The restore plan as a table: (record, this shell's environment) -> what a restore does.

Pure data in, pure data out: these run in microseconds; tests/test_shell.py proves that
each renderer carries a plan out in a real shell.
"""
from __future__ import annotations

import pytest

from jobenv.restore import plan
from jobenv.core.errors import JobEnded
from jobenv.store.record import JobRecord

ARGV = ("jobenv",)


def rec(scheduler="slurm", jobid="100", env=None, launch_env=None, hosts=("n1", "n2")) -> JobRecord:
    return JobRecord(scheduler=scheduler, jobid=jobid, machine="m", hosts=list(hosts), gpus_per_host=4,
                     ranks_per_host=4, hostfile="/s/h", launch=["srun", "-n", "8"],
                     env=dict(env or {"SLURM_JOB_ID": jobid, "SLURM_NNODES": "2"}),
                     launch_env=dict(launch_env or {}), created_at="t", created_on="n1")


def build(r, environ, **kw):
    return plan.build(r, "/s/r.json", environ, jobenv_argv=ARGV, **kw)


# (name, record, environ, expected unset, expected keep, expected job vars in `set`)
TABLE = [
    ("fresh shell", rec(), {}, [], [], {"SLURM_JOB_ID": "100", "SLURM_NNODES": "2"}),
    ("same live job keeps the scheduler's values", rec(),
     {"SLURM_JOB_ID": "100", "SLURM_NNODES": "1", "SLURM_STEP_ID": "0"},
     [], ["SLURM_JOB_ID", "SLURM_NNODES", "SLURM_STEP_ID"], {}),
    ("another Slurm job's variables are cleared", rec(),
     {"SLURM_JOB_ID": "99", "SLURM_NNODES": "5", "SLURM_STEP_ID": "3"},
     ["SLURM_STEP_ID"], [], {"SLURM_JOB_ID": "100", "SLURM_NNODES": "2"}),
    ("another scheduler's job is cleared too", rec(),
     {"PBS_JOBID": "7.pbs", "PBS_NODEFILE": "/x", "COBALT_JOBID": "3"},
     ["COBALT_JOBID", "PBS_JOBID", "PBS_NODEFILE"], [], {"SLURM_JOB_ID": "100", "SLURM_NNODES": "2"}),
    ("a shell in no job keeps its own scheduler settings (not another job's)", rec(),
     {"SLURM_MPI_TYPE": "pmix", "SLURM_ACCOUNT": "proj", "PBS_O_LANG": "C"},
     [], [], {"SLURM_JOB_ID": "100", "SLURM_NNODES": "2"}),
    ("a setting the record has too: the record's value", rec(env={"SLURM_JOB_ID": "100", "SLURM_MPI_TYPE": "pmi2"}),
     {"SLURM_MPI_TYPE": "pmix"}, [], [], {"SLURM_JOB_ID": "100", "SLURM_MPI_TYPE": "pmi2"}),
    ("a PBS job's variables go, the shell's own Slurm settings stay", rec(),
     {"PBS_JOBID": "7.pbs", "PBS_NODEFILE": "/x", "SLURM_MPI_TYPE": "pmix"},
     ["PBS_JOBID", "PBS_NODEFILE"], [], {"SLURM_JOB_ID": "100", "SLURM_NNODES": "2"}),
    ("a job's host list without its id still marks another job", rec(),
     {"SLURM_NODELIST": "n9", "SLURM_NTASKS_PER_NODE": "4", "SLURM_MPI_TYPE": "pmix"},
     ["SLURM_MPI_TYPE", "SLURM_NODELIST", "SLURM_NTASKS_PER_NODE"], [], {"SLURM_JOB_ID": "100", "SLURM_NNODES": "2"}),
    ("a Cobalt job known by its nodefile alone is another job", rec(),
     {"COBALT_NODEFILE": "/var/tmp/cobalt.555", "COBALT_PARTNAME": "n1"},
     ["COBALT_NODEFILE", "COBALT_PARTNAME"], [], {"SLURM_JOB_ID": "100", "SLURM_NNODES": "2"}),
    ("site configuration is never cleared", rec(),
     {"SLURM_CONF": "/etc/slurm.conf", "SLURM_TIME_FORMAT": "relative", "PBS_SERVER": "s",
      "PBS_CONF_FILE": "/etc/pbs.conf", "SLURM_JOB_ID": "99"},
     [], [], {"SLURM_JOB_ID": "100", "SLURM_NNODES": "2"}),
    ("site configuration in the shell wins over the record's", rec(env={"SLURM_JOB_ID": "100", "SLURM_CONF": "/job/conf"}),
     {"SLURM_CONF": "/site/conf"}, [], ["SLURM_CONF"], {"SLURM_JOB_ID": "100"}),
    ("a record cannot export PATH, PROMPT_COMMAND, BASH_ENV, LD_PRELOAD",
     rec(env={"SLURM_JOB_ID": "100", "PATH": "/evil", "PROMPT_COMMAND": "touch x", "BASH_ENV": "/e",
              "LD_PRELOAD": "/e.so", "SLURM_X;touch F": "1", "PBS_JOBID": "1"}),
     {}, [], [], {"SLURM_JOB_ID": "100"}),
    ("a record cannot choose what srun runs: prolog, epilog, --export, the tasks' directory or stdio",
     rec(env={"SLURM_JOB_ID": "100", "SLURM_PROLOG": "/tmp/e.sh", "SLURM_TASK_PROLOG": "/tmp/e.sh",
              "SLURM_EPILOG": "/tmp/e.sh", "SLURM_TASK_EPILOG": "/tmp/e.sh", "SLURM_EXPORT_ENV": "ALL,LD_PRELOAD=/e.so",
              "SLURM_WORKING_DIR": "/tmp/e", "SLURM_REMOTE_CWD": "/tmp/e", "SLURM_BCAST": "/tmp/e",
              "SLURM_STDINMODE": "/tmp/i", "SLURM_STDOUTMODE": "/tmp/o", "SLURM_STDERRMODE": "/tmp/o"}),
     {}, [], [], {"SLURM_JOB_ID": "100"}),
    ("site configuration is restored where the shell has none",
     rec(env={"SLURM_JOB_ID": "100", "SLURM_CONF": "/etc/slurm/slurm.conf"}), {}, [], [],
     {"SLURM_JOB_ID": "100", "SLURM_CONF": "/etc/slurm/slurm.conf"}),
    ("secrets are never restored", rec(env={"SLURM_JOB_ID": "100", "SLURM_JOB_TOKEN": "t",
                                            "SLURM_MUNGE_KEY": "k"}), {}, [], [], {"SLURM_JOB_ID": "100"}),
    ("PBS: the job cookie is never restored",
     rec("pbs", "7.s", env={"PBS_JOBID": "7.s", "PBS_JOBCOOKIE": "c"}), {}, [], [], {"PBS_JOBID": "7.s"}),
]


@pytest.mark.parametrize("name,r,environ,unset,keep,job_set", TABLE, ids=[t[0] for t in TABLE])
def test_plan_table(name, r, environ, unset, keep, job_set):
    p = build(r, environ)
    assert p.unset == unset
    assert p.keep == keep
    got_job = {k: v for k, v in p.set.items() if k.startswith(("SLURM_", "PBS_", "COBALT_"))}
    assert got_job == job_set
    assert p.set["NHOSTS"] == "2" and p.set["NGPUS"] == "8" and p.set["JOBENV_RECORD"] == "/s/r.json"
    assert p.launch == ["jobenv", "launch", "--job", r.jobid, "--"]
    for k in p.set:
        assert plan.is_name(k)
    assert not set(p.set) & {"PATH", "PROMPT_COMMAND", "BASH_ENV", "LD_PRELOAD"}


@pytest.mark.parametrize("key,ok", [
    ("MPICH_GPU_SUPPORT_ENABLED", True), ("ZE_FLAT_DEVICE_HIERARCHY", True), ("NCCL_NET", True),
    ("X=1; touch F; Y", False), ("a b", False), ("PATH", False), ("LD_PRELOAD", False),
    ("PROMPT_COMMAND", False), ("BASH_ENV", False), ("ENV", False), ("PS1", False), ("path", False),
    ("fish_user_paths", False), ("PYTHONSTARTUP", False), ("JOBENV_HOME", False), ("SLURM_JOB_NAME", False),
    ("1X", False), ("", False), ("É", False), ("IFS", False), ("ZDOTDIR", False), ("GLIBC_TUNABLES", False),
])
def test_launch_variable_names(key, ok):
    p = build(rec(launch_env={key: "v"}), {})
    assert (key in p.set) is ok
    assert (key in p.refused) is (not ok)


def test_refused_names_are_warned_about():
    p = build(rec(launch_env={"X=1; touch F; Y": "1"}), {})
    assert any("may not set" in w for w in p.warnings)


def test_ended_job_refused_unless_allow_stale():
    with pytest.raises(JobEnded, match="has ended"):
        build(rec(), {}, state=("ended", "squeue says COMPLETED"))
    p = build(rec(), {}, state=("ended", "squeue says COMPLETED"), allow_stale=True)
    assert p.state == "ended" and any("anyway" in w for w in p.warnings)


def test_unknown_liveness_restores_without_warning():
    p = build(rec(), {}, state=("unknown", "no scheduler command answered"))
    assert p.state == "unknown" and p.warnings == []


def test_extra_items_plug_in_and_are_checked():
    items = [({"VIRTUAL_ENV": "/v", "LD_PRELOAD": "/x", "JOBENV_OTHER": "/s/%h", "JOBENV_HOME": "/x"},
              ["/v/bin", "a:b", "", "rel/bin"], ["software: note"]),
             ({"STAGED_PREFIX": "/tmp/s"}, ["/tmp/s/bin", "/v/bin"], [])]
    environ = {"PATH": "/usr/bin", "SLURM_JOB_ID": "9", "SLURM_STEP_ID": "1"}
    p = build(rec(), environ, extra=items)
    assert p.set["VIRTUAL_ENV"] == "/v" and p.set["STAGED_PREFIX"] == "/tmp/s" and "LD_PRELOAD" not in p.set
    assert p.set["JOBENV_OTHER"] == "/s/%h" and "JOBENV_HOME" not in p.set
    assert p.path_prepend == ["/tmp/s/bin", "/v/bin"]  # a later concern's PATH goes first
    assert "software: note" in p.warnings
    env = plan.apply(p, environ)
    assert env["PATH"] == "/tmp/s/bin:/v/bin:/usr/bin"
    assert env["SLURM_JOB_ID"] == "100" and "SLURM_STEP_ID" not in env
    assert plan.apply(p, {})["PATH"] == "/tmp/s/bin:/v/bin"


def test_apply_matches_the_plan():
    environ = {"SLURM_JOB_ID": "99", "SLURM_STEP_ID": "1", "SLURM_CONF": "/c", "HOME": "/h"}
    p = build(rec(), environ)
    env = plan.apply(p, environ)
    assert env["HOME"] == "/h" and env["SLURM_CONF"] == "/c" and "SLURM_STEP_ID" not in env
    assert {k: env[k] for k in p.set} == p.set


def test_plan_takes_microseconds():
    import time

    r, environ = rec(env={f"SLURM_V{i}": "x" for i in range(50)}), {f"PBS_V{i}": "y" for i in range(50)}
    t = time.perf_counter()
    for _ in range(200):
        build(r, environ)
    assert (time.perf_counter() - t) / 200 < 0.005
