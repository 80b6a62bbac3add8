"""Flux: an allocation's shell (FLUX_ENCLOSING_ID, FLUX_URI; flux-core
doc/man7/flux-environment.rst), its hosts from `flux hostlist`, F58 job ids (the pairs below
are flux-core src/common/libutil/test/fluid.c's), and `flux jobs` verdicts."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import machines
from conftest import base_env, jobenv, record
from jobenv import schedulers
from jobenv.restore import plan
from jobenv.core.errors import BadInput
from jobenv.schedulers import flux

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("dec,f58", [(0, "ƒ1"), (57, "ƒz"), (1234, "fNH"), (3364, "ƒ211"), (4294967295, "ƒ7YXq9G"),
                                     (633528662, "ƒxyzzy"), (18446744073709551615, "ƒjpXCZedGfVQ")])
def test_f58_ids_are_flux_s_own(dec, f58):
    assert flux.decimal(f58) == str(dec) and flux.decimal(str(dec)) == str(dec)


@pytest.mark.parametrize("bad", ["", "ƒ", "ƒ0", "ƒl", "-h", "ƒ2 x", "1,2", "ƒjpXCZedGfVR", "ƒ" + "z" * 13, "١٢"])
def test_only_flux_ids_reach_the_command_line(bad):
    assert flux.decimal(bad) is None


def test_flux_jobs_verdicts():
    ids = ["ƒ2oLkTLb", "ƒxyzzy", "fNH", "ƒ211", "ƒ2JL"]
    v = flux.parse_jobs((DATA / "flux-jobs.txt").read_text(), 1, ids)
    assert v["ƒ2oLkTLb"] == ("live", "flux jobs says RUN") and v["fNH"][0] == "live"
    assert v["ƒxyzzy"] == ("ended", "flux jobs says INACTIVE (COMPLETED)") and v["ƒ211"][0] == "ended"
    assert "ƒ2JL" not in v  # unknown to the instance asked: no verdict, never "ended"


def test_detection_needs_a_job_id_not_just_an_instance():
    assert schedulers.which_scheduler({"FLUX_URI": "local:///run/flux/local"}) == "local"  # a login shell
    assert schedulers.which_scheduler({"FLUX_URI": "u", "FLUX_ENCLOSING_ID": "ƒ2"}) == "flux"
    assert schedulers.env_jobid({"FLUX_URI": "u", "FLUX_JOB_ID": "ƒ3"}) == ("flux", "ƒ3")


def _runner(answer, calls):
    def run(argv, env, timeout):
        calls.append(argv)
        return answer
    return run


def test_an_allocation_s_step_captures_the_allocation():
    """A task of `flux run` inside `flux alloc`: FLUX_JOB_ID is the step, the allocation is
    FLUX_ENCLOSING_ID and its hosts are the instance's."""
    env = {"FLUX_ENCLOSING_ID": "ƒ2oLkTLb", "FLUX_JOB_ID": "ƒ7YXq9G", "FLUX_URI": "local:///x", "FLUX_JOB_SIZE": "1",
           "FLUX_JOB_NNODES": "1", "FLUX_TASK_RANK": "0", "FLUX_TASK_LOCAL_ID": "0", "FLUX_JOB_TMPDIR": "/tmp/f"}
    calls: list = []
    cap = flux.capture(env, _runner((0, "elcap[1001-1003,1010]\n"), calls))
    assert calls == [["flux", "hostlist", "instance"]]
    assert (cap.jobid, cap.hosts) == ("ƒ2oLkTLb", ["elcap1001", "elcap1002", "elcap1003", "elcap1010"])
    assert cap.env == {"FLUX_ENCLOSING_ID": "ƒ2oLkTLb", "FLUX_URI": "local:///x"}


def test_a_job_of_the_system_instance_captures_its_own_hosts():
    calls: list = []
    cap = flux.capture({"FLUX_JOB_ID": "ƒ7YXq9G", "FLUX_URI": "u", "FLUX_JOB_SIZE": "8"},
                       _runner((0, "tuolumne[1001-1002]"), calls))
    assert calls == [["flux", "hostlist", "local"]] and cap.jobid == "ƒ7YXq9G"
    assert cap.hosts == ["tuolumne1001", "tuolumne1002"] and cap.env["FLUX_JOB_SIZE"] == "8"


@pytest.mark.parametrize("answer,says", [(None, "is not on PATH"), ((1, "flux: connect: No such file"), "failed"),
                                         ((0, "elcap[1001-"), "hostlist"), ((0, ""), "empty")])
def test_no_host_list_is_one_error_line(answer, says):
    with pytest.raises(BadInput, match=says):
        flux.capture({"FLUX_ENCLOSING_ID": "ƒ2", "FLUX_URI": "u"}, _runner(answer, []))


def test_save_get_and_liveness_in_an_el_capitan_allocation(tmp_path, home):
    """`jobenv save` in a `flux alloc` shell picks the El Capitan profile; a fresh shell on
    the job's host restores it; the verdict comes from the parent instance's `flux jobs`."""
    job = machines.elcapitan(tmp_path)
    path = f"{tmp_path}/bin:/usr/local/bin:/usr/bin:/bin"
    env = base_env(home, job, path=path)
    jobenv(["save", "--quiet"], env, check=True)
    rec = record(env)
    assert (rec["scheduler"], rec["jobid"], rec["machine"]) == ("flux", "ƒ2oLkTLb", "elcapitan")
    assert rec["hosts"] == ["elcap1001", "elcap1002"] and rec["gpus_per_host"] == 4
    assert rec["launch"] == ["flux", "run", "-N", "2", "-n", "8", "--gpus-per-task", "1"]
    fresh = base_env(home, {"JOBENV_HOSTNAME": "elcap1002"}, path=path)
    out = jobenv(["get", "--shell", "sh"], fresh, check=True).stdout
    assert "FLUX_ENCLOSING_ID=" in out and "FLUX_URI=" in out
    rows = json.loads(jobenv(["list", "--json"], fresh, check=True).stdout)
    assert [(r["jobid"], r["state"], r["reason"]) for r in rows] == [("ƒ2oLkTLb", "live", "flux jobs says RUN")]
    assert "--parent jobs -n -o {id.dec} {state} {result} 68484595712" in (tmp_path / "bin" / "flux.log").read_text()


def test_a_restore_clears_another_flux_job_s_variables():
    rec = type("R", (), {"scheduler": "pbs", "jobid": "1.srv"})()
    env = {"FLUX_JOB_ID": "ƒ3", "FLUX_URI": "u", "FLUX_TASK_RANK": "0"}
    assert "FLUX_" in plan.other_job_prefixes(rec, env)  # type: ignore[arg-type]


def test_flux_jobs_verdicts_from_a_real_instance():
    """Recorded on flux-core 0.88 (tests/data/flux-0.88-jobs.txt): F58 ids as `flux batch`
    printed them; `flux job id --to=dec` gave the decimals; an exit 3 is FAILED."""
    ids = ["\u01923b6WHmq", "98515812352", "f3b6WHmq", "307979354112", "123456789"]
    v = flux.parse_jobs((DATA / "flux-0.88-jobs.txt").read_text(), 1, ids)
    assert flux.decimal("\u01923b6WHmq") == flux.decimal("f3b6WHmq") == "98515812352"
    for j in ids[:3]:
        assert v[j] == ("ended", "flux jobs says INACTIVE (CANCELED)")
    assert v["307979354112"] == ("ended", "flux jobs says INACTIVE (FAILED)")
    assert "123456789" not in v
