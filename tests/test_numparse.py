"""ASCII digits only, documented limits checked before anything is expanded,
and corrupt numbers in records that never traceback."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

import machines
from conftest import base_env, jobenv
from jobenv.core.errors import BadInput
from jobenv.core.hostlist import expand, parse_counts
from jobenv.core.numparse import MAX_HOSTS, MAX_SECONDS, parse_seconds, parse_uint


@pytest.mark.parametrize("text", ["²", "1_0", "١٢", " 1", "+1", "-1", "", "1e3", "0x10", "9" * 31])
def test_parse_uint_takes_ascii_digits_only(text):
    with pytest.raises(BadInput):
        parse_uint(text, "N")


@pytest.mark.parametrize("text", ["n[0-9999999]", "n[0-999]x[0-999]y[0-99]", "n[0-999999],m[0-1]",
                                  "n[0-99999999999999999999]"])
def test_hostlists_over_the_limit_fail_fast(text):
    t = time.perf_counter()
    with pytest.raises(BadInput, match="limit of 1,000,000"):
        expand(text)
    assert time.perf_counter() - t < 0.5


def test_counts_over_the_limit_fail_fast():
    t = time.perf_counter()
    with pytest.raises(BadInput, match="limits"):
        parse_counts("1(x99999999999)")
    assert time.perf_counter() - t < 0.5
    assert len(expand(f"n[1-{MAX_HOSTS}]")) == MAX_HOSTS


def _slurm(tmp_path, home, **extra):
    return base_env(home, {**machines.slurm_cpu_only(tmp_path), **extra})


@pytest.mark.parametrize("extra", [
    {"SLURM_GPUS_ON_NODE": "²"}, {"SLURM_TASKS_PER_NODE": "1(x99999999999)"},
    {"SLURM_JOB_NODELIST": "n[0-999]x[0-999]y[0-99]"}, {"SLURM_JOB_NODELIST": "n[0-9999999]"},
    {"JOBENV_GPUS_PER_HOST": "1_0"}, {"JOBENV_RANKS_PER_HOST": "٣"},
])
def test_bad_numbers_are_one_line_exit_5(tmp_path, home, extra):
    t = time.time()
    p = jobenv(["save", "--quiet"], _slurm(tmp_path, home, **extra))
    assert p.returncode == 5 and p.stderr.startswith("jobenv: error:") and p.stderr.count("\n") == 1, p.stderr
    assert time.time() - t < 20


def test_lock_stale_must_be_a_number(tmp_path, home):
    p = jobenv(["save", "--quiet"], _slurm(tmp_path, home, JOBENV_LOCK="soft", JOBENV_LOCK_STALE="abc"))
    assert p.returncode == 5 and "JOBENV_LOCK_STALE" in p.stderr and p.stderr.count("\n") == 1


@pytest.mark.parametrize("change", [
    {"status": {"heartbeat": float("nan"), "interval": 1}},
    {"status": {"heartbeat": 10 ** 12, "interval": 1}},
    {"status": {"heartbeat": "HEARTBEAT_4000", "interval": 1}},
    {"jobid": "\ud800"}, {"jobname": "\udfff"}, {"created_at": float("inf")}, {"gpus_per_host": 10 ** 30},
    {"hosts": ["a"] * 3 + [7]}, {"status": {"watcher": {"host": "a", "pid": "x"}}}, {"status": []},
])
def test_corrupt_record_fields_never_traceback(tmp_path, home, change):
    env = _slurm(tmp_path, home)
    jobenv(["save", "--quiet"], env, check=True)
    other = {**env, "SLURM_JOB_ID": "99", "SLURM_JOBID": "99"}
    jobenv(["save", "--quiet"], other, check=True)
    path = home / ".jobenv" / "jobs" / "slurm-99.json"
    data = json.loads(path.read_text())
    data.update(change)
    text = json.dumps(data)
    if "HEARTBEAT_4000" in text:
        text = text.replace('"HEARTBEAT_4000"', "9" * 4000)
    path.write_text(text)
    plain = base_env(home)
    for args in (["get", "--job", "99"], ["show", "--job", "99"]):
        p = jobenv(args, plain)
        assert p.returncode == 6 and p.stderr.startswith("jobenv: error:") and "Traceback" not in p.stderr, p.stderr
    p = jobenv(["list", "--json"], plain)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert {r["state"] for r in rows if r["path"] == str(path)} == {"corrupt"}
    assert any(r["jobid"] == env["SLURM_JOB_ID"] for r in rows)
    assert jobenv(["list"], plain).returncode == 0


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e300", "1e3", "-1", "+1", "1_0", "١", "", " 1", ".", "1.",
                                  "0x10", "9" * 31])
def test_parse_seconds_takes_plain_decimals_only(text):
    with pytest.raises(BadInput):
        parse_seconds(text, "S")


def test_parse_seconds_bounds():
    assert parse_seconds("30", "S") == 30.0 and parse_seconds(".5", "S") == 0.5 and parse_seconds("0", "S") == 0.0
    with pytest.raises(BadInput, match="more than 0"):
        parse_seconds("0", "S", above=True)
    with pytest.raises(BadInput, match="at most 31,622,400"):
        parse_seconds(str(MAX_SECONDS + 1), "S")


# every option that takes a number or a duration: one line, exit 2, before anything runs
@pytest.mark.parametrize("args", [
    ["doctor", "--timeout", "1e300"], ["doctor", "--timeout", "inf"], ["doctor", "--timeout", "nan"],
    ["launch", "--timeout", "nan", "--", "true"], ["launch", "--idle-timeout", "inf", "--", "true"],
    ["launch", "--timeout", "99999999999", "--", "true"], ["launch", "-n", "1_0", "--", "true"],
    ["launch", "--ppn", "١٢", "--", "true"], ["launch", "--retries", "9" * 40, "--", "true"],
    ["save", "--gpus-per-host", "²"], ["save", "--watch-interval", "nan"], ["watch", "--interval", "1e300"],
    ["stage", "--timeout", "nan"], ["stage", "--min-hosts", "1_0"],
])
def test_number_options_fail_in_one_line(tmp_path, home, args):
    p = jobenv(args, base_env(home, machines.local(tmp_path)))
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1 and p.stderr.startswith("jobenv: error: "), p.stderr
    assert "ASCII digits" in p.stderr or "at most" in p.stderr or "limit" in p.stderr, p.stderr


def test_selftest_number_options(tmp_path, home):
    for bad in (["--timeout", "nan"], ["--steps", "1_0"]):
        p = subprocess.run([sys.executable, "-m", "jobenv.selftest", *bad], env=base_env(home), capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 2 and "ASCII digits" in p.stderr, p.stderr


@pytest.mark.parametrize("text,seconds", [("30", 30), ("90s", 90), ("1m", 60), ("2h", 7200), ("1h30m", 5400),
                                          ("1.5h", 5400), ("7d", 604800), ("1w2d", 777600), ("0.5s", 0.5)])
def test_parse_seconds_takes_units(text, seconds):
    assert parse_seconds(text, "S") == seconds


@pytest.mark.parametrize("text", ["1m1h", "m", "1hm", "1h 30m", "30ms", "h1", "1H", "1h30", "1s1s", "1.s", "-1m"])
def test_parse_seconds_refuses_bad_units(text):
    with pytest.raises(BadInput, match="must be a duration in ASCII digits like"):
        parse_seconds(text, "S")
