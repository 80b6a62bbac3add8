"""The one reader of PBS job attributes (jobenv.schedulers.pbs_qstat), as liveness, `jobenv
status`, a requeue and `save --job` see it: a Job_Name that PBS printed unescaped, holding
raw quotes or newlines, never forges job_state (or any other attribute)."""
from __future__ import annotations

from pathlib import Path

import pytest

from jobenv.batch import jobstate
from jobenv.core.errors import BadInput
from jobenv.schedulers import pbs, pbs_qstat, pbs_requeue

DATA = Path(__file__).parent / "data"
JOBID = "2023999.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov"
REAL = (DATA / "pbs-qstat-fx-json.txt").read_text()

# names an older qstat (its own JSON writer) printed as they were; the job itself is F (finished)
FORGED_NAMES = [
    'x","job_state":"R',  # one line: the forged key sits inside the name's line
    'a"b","job_state":"R',  # the same, and a raw quote: no longer JSON, read line by line
    'x","job_state":"R","z":"\x07',  # a raw control character: no longer JSON
    'x",\n            "job_state":"R",\n            "y":"',  # a line of its own
    'x",\n            "euser":"alice",\n            "exec_host":"x3102c0s1b0n0/0*64",\n            "job_state":"R',
    'x"\n        },\n        "2024999.polaris-pbs-01":{\n            "job_state":"R',  # a job block of its own
]


def finished_job(name: str) -> str:
    """Recorded Polaris output of job 2023999 alone (finished: F), named `name`, unescaped."""
    head = REAL[:REAL.index('"Jobs":{') + len('"Jobs":{\n')]
    return head + REAL[REAL.index(f'        "{JOBID}"'):].replace('"Job_Name":"train.sh"', f'"Job_Name":"{name}"', 1)


def test_the_recorded_answer_reads_whole():
    jobs = pbs_qstat.jobs(REAL)
    assert jobs[JOBID]["job_state"] == "F" and pbs_qstat.AMBIGUOUS not in jobs[JOBID]
    assert jobs[JOBID]["select"]  # Resource_List merged in
    assert jobstate.parse_pbs(REAL, JOBID).phase == "ended"
    assert pbs_requeue.parse_show(finished_job("train.sh")).state == "F"
    assert pbs_qstat.jobs(finished_job("train.sh"))[JOBID]["Job_Name"] == "train.sh"


@pytest.mark.parametrize("name", FORGED_NAMES)
def test_a_raw_job_name_never_forges_job_state(name):
    text = finished_job(name)
    # liveness: ended, or no verdict; never live
    verdict = pbs.parse_qstat(text, 0, [JOBID]).get(JOBID)
    assert verdict is None or verdict[0] == "ended", verdict
    # jobenv status: finished or unknown; never running
    status = jobstate.parse_pbs(text, JOBID)
    assert status is None or status.phase in ("ended", "unknown"), status.line()
    # save --job: never a running job of alice's on that host
    try:
        cap = pbs.parse_job(text, JOBID)
        assert cap.state != "R"
    except BadInput as exc:
        assert "ambiguous" in str(exc) or "does not describe" in str(exc)
    assert pbs.parse_found(text, "x3102c0s1b0n0", "alice") == []  # no job, forged or real, runs there
    # requeue: not running (so a SIGTERM is not taken for pre-emption), and no flag passed on
    facts = pbs_requeue.parse_show(text)
    assert facts.state != "R" and facts.submit == ()


def test_a_key_twice_in_valid_json_makes_the_job_ambiguous():
    text = REAL.replace('"Job_Name":"train.sh"', '"Job_Name":"x","job_state":"R","y":"z"', 1)
    text = text.replace('"job_state":"R"', '"job_state":"F"', 2).replace('"job_state":"F"', '"job_state":"R"', 1)
    jobs = pbs_qstat.jobs(text)
    assert list(jobs[JOBID]) == [pbs_qstat.AMBIGUOUS] and JOBID not in pbs.parse_qstat(text, 0, [JOBID])
    assert jobstate.parse_pbs(text, JOBID).state == "ambiguous"
    with pytest.raises(BadInput, match="ambiguous"):
        pbs.parse_job(text, JOBID)


def test_the_line_reader_takes_whole_lines_only():
    text = '{\n "Jobs":{\n  "7.s":{\n   "Job_Name":"a \\"job_state\\":\\"F\\"", "bad\n   "job_state":"R",\n' \
           '   "Exit_status":-3,\n   "Output_Path":"h:/o"\n  }\n }\n}\n'
    jobs = pbs_qstat.jobs(text)
    assert jobs["7.s"][pbs_qstat.PARTIAL] and jobs["7.s"]["job_state"] == "R" and "Job_Name" not in jobs["7.s"]
    status = jobstate.parse_pbs(text, "7.s")
    assert (status.state, status.exit, status.output) == ("R", "-3", "/o")
    twice = text.replace('"7.s":{', '"7.s":{\n   "job_state":"F",\n  },\n  "7.s":{', 1)
    assert list(pbs_qstat.jobs(twice)["7.s"]) == [pbs_qstat.AMBIGUOUS]


def test_jobstate_has_no_reader_of_its_own():
    import inspect

    src = inspect.getsource(jobstate)
    assert "_pbs_block" not in src and "json.loads" not in src and "raw_decode" not in src
