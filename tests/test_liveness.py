"""Liveness: pure parsers of recorded scheduler outputs, one query per scheduler for `list`,
and the rule that a silent watcher proves nothing."""
from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

import machines
from conftest import base_env, jobenv
from jobenv.store import liveness
from jobenv.store.record import JobRecord
from jobenv.schedulers import cobalt, pbs, slurm

DATA = Path(__file__).parent / "data"
POLARIS = ".polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov"


def out(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize("parser,name", [(pbs.parse_json, "pbs-qstat-fx-json.txt"),
                                         (pbs.parse_json, "pbs-qstat-fx-json-unescaped.txt"),
                                         (pbs.parse_full_text, "pbs-qstat-fx.txt")])
def test_pbs_full_outputs(parser, name):
    ids = ["2024084" + POLARIS, "2023999" + POLARIS, "1999" + POLARIS, "2030000" + POLARIS]
    v = parser(out(name), 153, ids)
    assert v[ids[0]] == ("live", "qstat says job_state R")
    assert v[ids[1]][0] == "ended" and "F" in v[ids[1]][1]
    assert v[ids[2]][0] == "ended" and "does not know" in v[ids[2]][1]
    assert ids[3] not in v  # not mentioned at all: no verdict


def test_pbs_json_where_a_users_value_forges_a_job_state_gives_no_verdict():
    """An unescaped Variable_List value (`qsub -v 'X=\n"job_state": "F",'`) puts a second
    job_state line in a running job's block: that job gets no verdict, never "ended"."""
    text = out("pbs-qstat-fx-json-unescaped.txt")
    at = text.index('"job_state"', text.index('"2024084'))
    forged = text[:at] + '"job_state":"F",\n            ' + text[at:]
    v = pbs.parse_json(forged, 153, ["2024084" + POLARIS, "2023999" + POLARIS])
    assert "2024084" + POLARIS not in v and v["2023999" + POLARIS][0] == "ended"


def test_pbs_table_matches_cut_ids():
    v = pbs.parse_table(out("pbs-qstat.txt"), 0, ["2024084" + POLARIS, "2024090" + POLARIS])
    assert v["2024084" + POLARIS][0] == "live" and v["2024090" + POLARIS] == ("live", "qstat says job_state Q")


def test_squeue_states_arrays_and_het_jobs():
    ids = ["12345678", "12345690", "12345600", "12345700", "12345801", "12345802", "12345900", "999"]
    v = slurm.parse_squeue(out("slurm-squeue.txt"), 0, ids)
    assert v["12345678"] == ("live", "squeue says RUNNING") and v["12345690"][0] == "live"
    assert v["12345600"] == ("ended", "squeue says COMPLETED") and v["12345700"][0] == "live"
    assert v["12345801"][0] == "live" and v["12345802"][0] == "ended" and v["12345900"][0] == "live"
    assert v["999"] == ("ended", "squeue no longer lists the job")
    # squeue failed (slurmctld down): no verdict for jobs it did not list
    assert slurm.parse_squeue("slurm_load_jobs error: Unable to contact slurm controller", 1, ["5"]) == {}
    assert slurm.parse_squeue("slurm_load_jobs error: Invalid job id specified", 1, ["5"])["5"][0] == "ended"


def test_cobalt_table():
    v = cobalt.parse_qstat(out("cobalt-qstat.txt"), 0, ["10446", "10450", "10400"])
    assert v["10446"] == ("live", "qstat says running") and v["10450"][0] == "live"
    assert v["10400"] == ("ended", "qstat does not list the job")
    assert cobalt.parse_qstat("qstat: cannot connect", 1, ["10446"]) == {}


def test_hostile_ids_never_reach_the_command_line():
    assert not slurm._query_safe("1,2") and not slurm._query_safe("-h") and slurm._query_safe("12_3")
    assert not pbs._query_safe("--version") and pbs._query_safe("123[4].pbs01.cluster.edu")
    assert not cobalt._query_safe("1 2")


def _rec(**status) -> JobRecord:
    return JobRecord("local", "h", "local", ["h"], 0, 1, None, ["true"], {}, time.time(), "h", status=status)


def test_silent_heartbeat_is_unknown_not_ended():
    now = time.time()
    assert liveness.heartbeat_state(_rec(heartbeat=now - 1, interval=1.0), now)[0] == "live"
    assert liveness.heartbeat_state(_rec(heartbeat=now - 100, interval=1.0), now)[0] == "unknown"
    assert liveness.heartbeat_state(_rec(), now) is None


STUB = """#!/bin/sh
echo "$0 $*" >> {log}
{body}
"""


def _stub(bindir: Path, name: str, log: Path, body: str) -> None:
    bindir.mkdir(exist_ok=True)
    p = bindir / name
    p.write_text(STUB.format(log=log, body=body))
    p.chmod(p.stat().st_mode | stat.S_IXUSR)


def test_list_asks_each_scheduler_once(tmp_path, home):
    """300 Slurm and 30 PBS records: one squeue and one qstat, not one per record."""
    log = tmp_path / "calls.log"
    bindir = tmp_path / "bin"
    _stub(bindir, "squeue", log, 'for a in "$@"; do last="$a"; done\n'
          'echo "$last" | tr , "\\n" | awk \'$1 % 2 == 0 {print $1, $1, "RUNNING"}\'')
    _stub(bindir, "qstat", log, 'echo "qstat: Unknown Job Id 7000.pbs01.cluster.edu" >&2; exit 153')
    env = base_env(home, path=f"{bindir}:/usr/local/bin:/usr/bin:/bin")
    jobs = home / ".jobenv" / "jobs"
    jobenv(["save", "--quiet"], {**env, **machines.pbs_mpiprocs4(tmp_path)}, check=True)
    template = json.loads(next(jobs.glob("*.json")).read_text())
    for i in range(330):
        rec = dict(template, jobid=str(800000 + i), scheduler="slurm") if i < 300 else \
            dict(template, jobid=f"{7000 + i}.pbs01.cluster.edu")
        (jobs / f"x{i}.json").write_text(json.dumps(rec))
        os.chmod(jobs / f"x{i}.json", 0o600)
    log.write_text("")
    t = time.time()
    rows = json.loads(jobenv(["list", "--json"], env, check=True).stdout)
    took = time.time() - t
    calls = log.read_text().splitlines()
    assert sorted(c.split()[0].rsplit("/", 1)[1] for c in calls) == ["qstat", "squeue"], calls
    states = {r["jobid"]: r["state"] for r in rows}
    assert states["800000"] == "live" and states["800001"] == "ended"  # listed / not listed
    assert took < 20


def test_list_order_is_saved_time_not_mtime(tmp_path, home):
    """A heartbeat (or any rewrite) must not make an older save look newest."""
    env = base_env(home)
    a = {**env, **machines.slurm_cpu_only(tmp_path), "SLURM_JOB_ID": "101", "SLURM_JOBID": "101"}
    b = {**env, **machines.slurm_cpu_only(tmp_path), "SLURM_JOB_ID": "102", "SLURM_JOBID": "102"}
    jobenv(["save", "--quiet"], a, check=True)
    time.sleep(0.05)
    jobenv(["save", "--quiet"], b, check=True)
    older = home / ".jobenv" / "jobs" / "slurm-101.json"
    os.utime(older, None)  # what a heartbeat used to do
    rows = json.loads(jobenv(["list", "--json"], env, check=True).stdout)
    assert [r["jobid"] for r in rows] == ["102", "101"]
    assert json.loads(jobenv(["show", "--json"], {**env, "JOBENV_HOSTNAME": "nowhere"}, check=True).stdout)["jobid"] == "102"


@pytest.mark.parametrize("name,verdict", [("openpbs-qstat-f-json-running-user-view.txt", ("live", "qstat says job_state R")),
                                          ("openpbs-qstat-x-f-json-finished-qdel.txt", ("ended", "qstat says job_state F"))])
def test_openpbs_recorded_outputs(name, verdict):
    """`qstat -x -f -F json 0` on the real OpenPBS 23.06.06 of tests/cluster/pbs.py: the job
    running (as an ordinary user sees it), and after `qdel` (job_state F, substate 91)."""
    v = pbs.parse_json(out(name), 0, ["0.pbs1", "0", "7.pbs1"])
    assert v["0.pbs1"][0] == verdict[0] and verdict[1] in v["0.pbs1"][1], v
    assert "7.pbs1" not in v
