"""Bad input: one readable line on stderr, a documented non-zero exit, nothing written or lost."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import machines
from conftest import base_env, jobenv, store_files
from jobenv.core import errors


def one_line_error(p, code: int, *words: str) -> None:
    assert p.returncode == code, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jobenv: error: "), p.stderr
    assert "Traceback" not in p.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


@pytest.fixture
def populated(tmp_path, home):
    """A store holding one good job, to check that failures lose nothing."""
    env = base_env(home, machines.perlmutter(tmp_path))
    jobenv(["save", "--quiet"], env, check=True)
    return env


def _pbs_env(tmp_path, home, lines=None, path=None):
    env = machines.pbs_mpiprocs4(tmp_path)
    if lines is not None:
        Path(env["PBS_NODEFILE"]).write_text(lines)
    if path is not None:
        env["PBS_NODEFILE"] = path
    return base_env(home, env)


SAVE_CASES = {
    "missing nodefile": (lambda t, h: _pbs_env(t, h, path=str(t / "gone")), errors.EXIT_BAD_INPUT, ["does not exist"]),
    "empty nodefile": (lambda t, h: _pbs_env(t, h, lines="\n\n"), errors.EXIT_BAD_INPUT, ["is empty"]),
    "unreadable nodefile": (lambda t, h: _pbs_env(t, h, path=str(t)), errors.EXIT_BAD_INPUT, ["is a directory"]),
    "hostile host name": (lambda t, h: _pbs_env(t, h, lines="cn001\n$(touch pwned)\n"), errors.EXIT_BAD_INPUT,
                          ["line 2", "$(touch pwned)", "not a valid host name"]),
    "unterminated bracket": (lambda t, h: base_env(h, {**machines.perlmutter(t), "SLURM_JOB_NODELIST": "nid[001-"}),
                             errors.EXIT_BAD_INPUT, ["unterminated"]),
    "reversed range": (lambda t, h: base_env(h, {**machines.perlmutter(t), "SLURM_JOB_NODELIST": "nid[009-001]"}),
                       errors.EXIT_BAD_INPUT, ["reversed range"]),
    "unknown profile": (lambda t, h: base_env(h, machines.perlmutter(t)), errors.EXIT_BAD_INPUT, ["unknown profile 'nope'"]),
}


@pytest.mark.parametrize("name", sorted(SAVE_CASES))
def test_save_errors(tmp_path, home, populated, name):
    build, code, words = SAVE_CASES[name]
    env = build(tmp_path, home)
    before = store_files(env)
    args = ["save"] + (["--profile", "nope"] if name == "unknown profile" else [])
    one_line_error(jobenv(args, env), code, *words)
    assert store_files(env) == before
    assert not (tmp_path / "pwned").exists()


def test_profile_yaml_error_names_file_and_line(tmp_path, home, populated):
    pdir = tmp_path / "profiles"
    pdir.mkdir()
    bad = pdir / "broken.yaml"
    bad.write_text("name: broken\nscheduler: pbs\nlaunchers:\n  - argv: [mpiexec, -n\n")
    env = {**populated, "JOBENV_PROFILES": str(pdir)}
    before = store_files(env)
    one_line_error(jobenv(["save"], env), errors.EXIT_BAD_INPUT, str(bad), "line")
    bad.write_text("name: broken\nscheduler: pbs\nlaunchers:\n  - argv: [mpiexec, '{nope}']\n")
    one_line_error(jobenv(["profiles"], env), errors.EXIT_BAD_INPUT, f"{bad} line 3", "unknown placeholder {nope}")
    bad.write_text("name: broken\nscheduler: sge\nlaunchers: []\n")
    one_line_error(jobenv(["save"], env), errors.EXIT_BAD_INPUT, f"{bad} line 2", "scheduler")
    assert store_files(env) == before


def test_no_record(home):
    """No record: get and show; launch inside a job that was never saved (outside any job launch
    runs on this host, as torchrun does: tests/test_cli_launch_args.py)."""
    env = base_env(home)
    for args in (["get"], ["show"]):
        one_line_error(jobenv(args, env), errors.EXIT_NO_RECORD, "run `jobenv save` inside your allocation first")
    one_line_error(jobenv(["launch", "--", "true"], {**env, "SLURM_JOB_ID": "4242"}), errors.EXIT_NO_RECORD,
                   "slurm job 4242, which has no record: run `jobenv save`")


def test_unknown_job(populated):
    one_line_error(jobenv(["get", "--job", "424242"], populated), errors.EXIT_NO_RECORD, "'424242'", "12345678")
    one_line_error(jobenv(["rm", "424242"], populated), errors.EXIT_NO_RECORD, "'424242'")


def _jobs(env) -> Path:
    return Path(env["JOBENV_HOME"]) / "jobs"


@pytest.mark.parametrize("content,words", [
    ('{"schema_version": 1, "scheduler": "pbs", "jobid": "99"', ["invalid JSON"]),
    ("", ["invalid JSON"]),
    ('{"schema_version": 7, "scheduler": "pbs", "jobid": "99"}', ["schema_version 7 is newer"]),
    ('{"hello": "world"}', ["not a jobenv record"]),
    ('{"schema_version": 1, "scheduler": "pbs", "jobid": "99", "hosts": ["$(id)"]}', ["corrupt record"]),
])
def test_bad_record_is_reported_and_others_work(populated, content, words):
    bad = _jobs(populated) / "pbs-99.json"
    bad.write_text(content)
    bad.chmod(0o600)
    p = jobenv(["get", "--shell", "bash"], populated)
    assert p.returncode == 0 and "12345678" in p.stdout  # the good job still restores
    # inside the job `get` reads that job's record only; outside, it looks at all and says so
    outside = {k: v for k, v in populated.items() if not k.startswith("SLURM")}
    q = jobenv(["get", "--shell", "bash"], outside)
    assert q.returncode == 0 and "12345678" in q.stdout
    assert "skipping" in q.stderr and str(bad) in q.stderr
    one_line_error(jobenv(["get", "--job", "99"], populated), errors.EXIT_BAD_RECORD, str(bad), *words)
    listed = json.loads(jobenv(["list", "--json"], populated, check=True).stdout)
    assert {r["state"] for r in listed} >= {"corrupt"} and any(r["jobid"] == "12345678" for r in listed)
    assert bad.read_text() == content  # reported, never rewritten or removed


def test_unsafe_store_is_refused(populated):
    jobs = _jobs(populated)
    jobs.chmod(0o777)
    try:
        one_line_error(jobenv(["get"], populated), errors.EXIT_BAD_RECORD, "writable by others", "chmod go-w")
        one_line_error(jobenv(["save"], populated), errors.EXIT_BAD_RECORD, "writable by others")
    finally:
        jobs.chmod(0o700)
    rec = next(jobs.glob("*.json"))
    rec.chmod(0o666)
    p = jobenv(["get", "--job", "12345678"], populated)
    one_line_error(p, errors.EXIT_BAD_RECORD, "writable by others")


def test_ended_job_is_refused_unless_allowed(populated):
    path = next(_jobs(populated).glob("*.json"))
    data = json.loads(path.read_text())
    data["status"] = {"state": "ended", "reason": "scheduler said so"}
    path.write_text(json.dumps(data))
    one_line_error(jobenv(["get"], populated), errors.EXIT_ENDED, "job 12345678 has ended", "--allow-stale")
    assert jobenv(["get", "--allow-stale"], populated).returncode == 0
    listed = json.loads(jobenv(["list", "--json"], populated, check=True).stdout)
    assert listed[0]["state"] == "ended"
    assert "removed job 12345678" in jobenv(["clean"], populated, check=True).stdout
    assert store_files(populated) == {}


def test_bad_options_are_usage_errors(populated):
    p = jobenv(["get", "--shell", "tcsh"], populated)
    assert p.returncode == errors.EXIT_USAGE and "tcsh" in p.stderr
    p = jobenv(["save", "--gpus-per-host", "-1"], populated)
    assert p.returncode == errors.EXIT_USAGE
    p = jobenv(["save"], {**populated, "JOBENV_GPUS_PER_HOST": "four"})
    one_line_error(p, errors.EXIT_BAD_INPUT, "JOBENV_GPUS_PER_HOST", "four")


def test_more_error_paths_are_one_line(tmp_path, home, populated):
    env = {**populated, "PATH": str(tmp_path)}  # srun is not on this PATH, nor where the record says
    rec_path = next((Path(populated["JOBENV_HOME"]) / "jobs").glob("*.json"))
    data = json.loads(rec_path.read_text())
    data["software"] = {"python": None, "launcher": "/nonexistent/bin/srun", "modules": None}
    rec_path.write_text(json.dumps(data))
    one_line_error(jobenv(["launch", "--allow-stale", "--", "/bin/true"], env), 127, "cannot run 'srun'",
                   "/nonexistent/bin/srun", "PATH")
    local = base_env(home, machines.local(tmp_path))
    one_line_error(jobenv(["save", "--scheduler", "pbs"], local), errors.EXIT_BAD_INPUT, "no pbs job variables")
    one_line_error(jobenv(["show", "--job", "nope"], populated), errors.EXIT_NO_RECORD, "'nope'")
    p = jobenv(["watch", "--interval", "0"], populated)
    assert p.returncode == errors.EXIT_USAGE and "Traceback" not in p.stderr
