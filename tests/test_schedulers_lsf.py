"""LSF with jsrun: the launch node LSF lists first is never a host of the job (IBM LSF 10.1
job variables; RADICAL-Pilot's LSF resource manager drops it on Lassen too), and `bjobs`
verdicts from a recorded output."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import machines
from conftest import base_env, jobenv, record
from jobenv import schedulers
from jobenv.core.errors import BadInput
from jobenv.schedulers import lsf

DATA = Path(__file__).parent / "data"


def test_the_launch_node_is_not_a_host_of_the_job(tmp_path):
    env = machines.lassen(tmp_path)
    cap = lsf.capture(env)
    assert (cap.jobid, cap.hosts, cap.slots) == ("3456789", ["lassen11", "lassen12"], [40, 40])
    del env["LSB_MCPU_HOSTS"]
    assert lsf.capture(env).hosts == ["lassen11", "lassen12"]  # from the hostfile alone, likewise
    assert "LSB_JOBRES_PID" not in cap.env and cap.env["LSF_ENVDIR"] == "/etc/lsf"


def test_a_one_host_job_keeps_its_host():
    assert lsf.mcpu_hosts("hostA 4") == (["hostA"], [4])


@pytest.mark.parametrize("bad", ["", "lassen710 1 lassen11", "lassen710 1 lassen11 forty", "l 1 -rf 4",
                                 "lassen710 1 lassen11 0"])
def test_a_bad_host_list_is_one_error_line(bad):
    with pytest.raises(BadInput):
        lsf.capture({"LSB_JOBID": "1", "LSB_MCPU_HOSTS": bad, "LSB_DJOB_HOSTFILE": "/nonexistent/x"})


def test_bjobs_verdicts():
    ids = ["3456789", "3456700", "3456701", "3456702", "3400000", "3456703", "3499999"]
    v = lsf.parse_bjobs((DATA / "lsf-bjobs.txt").read_text(), 255, ids)
    assert v["3456789"] == ("live", "bjobs says RUN") and v["3456700"][0] == "live"
    assert v["3456701"] == ("ended", "bjobs says DONE (finished)") and v["3456702"][0] == "ended"
    assert v["3400000"] == ("ended", "bjobs does not know the job (finished and purged)")
    assert "3456703" not in v and "3499999" not in v  # UNKWN, or not mentioned: no verdict


def test_hostile_ids_never_reach_bjobs():
    assert not lsf._query_safe("-a") and not lsf._query_safe("1 2") and not lsf._query_safe("١٢")
    assert lsf._query_safe("3456789")


def test_detection_and_a_left_over_job():
    assert schedulers.which_scheduler({"LSB_JOBID": "1"}) == "lsf"
    assert schedulers.which_scheduler({"LSF_ENVDIR": "/etc/lsf", "LSF_BINDIR": "/x"}) == "local"  # a login shell


def test_save_get_and_liveness_on_lassen(tmp_path, home):
    """`jobenv save` on Lassen's launch node picks the Lassen profile and a jsrun line; a
    fresh shell on a compute host restores it; `list` asks bjobs once."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "bjobs").write_text(f'#!/bin/sh\necho "$*" >> {bindir}/bjobs.log\n'
                                  'for a in "$@"; do last="$a"; done\necho "$last RUN"\n')
    (bindir / "bjobs").chmod(0o755)
    path = f"{bindir}:/usr/local/bin:/usr/bin:/bin"
    env = base_env(home, machines.lassen(tmp_path), path=path)
    jobenv(["save", "--quiet"], env, check=True)
    rec = record(env)
    assert (rec["scheduler"], rec["jobid"], rec["machine"], rec["hosts"]) == ("lsf", "3456789", "lassen",
                                                                              ["lassen11", "lassen12"])
    assert rec["launch"] == ["jsrun", "-n", "8", "-r", "4", "-a", "1", "-g", "1", "-c", "10"]
    fresh = base_env(home, {"JOBENV_HOSTNAME": "lassen12"}, path=path)
    out = jobenv(["get", "--shell", "sh"], fresh, check=True).stdout
    assert "LSB_JOBID=" in out and "LSF_ENVDIR=" in out
    rows = json.loads(jobenv(["list", "--json"], fresh, check=True).stdout)
    assert [(r["jobid"], r["state"]) for r in rows] == [("3456789", "live")]
    assert (bindir / "bjobs.log").read_text().splitlines()[-1] == "-a -noheader -o jobid stat 3456789"
