"""jobenv.batch.jobstate: each scheduler's answer parsed from recorded outputs, and the
order in which status asks (the scheduler, then the script's exit file).

Recorded outputs (tests/data):
- slurm-squeue-i-T-*.txt, slurm-scontrol-job-{running,completed,cancelled,unknown}.txt:
  recorded on the test cluster (tests/cluster: Debian's Slurm 22.05.8) on 2026-11-25 from
  `squeue -h -t all -o '%i %T' -j ID` and `scontrol show job ID` of jobs `jobenv submit`
  submitted (the cancelled one by `jobenv cancel`; unknown: the same job after MinJobAge).
- slurm-sacct-X-P.txt: the shape of `sacct -X -n -P -o JobID,State,ExitCode` per sacct(1)
  of Slurm 22.05 (`-P, --parsable2: Output will be '|' delimited without a '|' at the end`;
  a state of `CANCELLED by <uid>`); the test cluster has no accounting to record from.
- pbs-qstat-fx-json*.txt: PBS Pro 2022.1 `qstat -x -f -F json` (recorded earlier for
  liveness; the unescaped one as PBS writes some values), cobalt-qstat.txt: Cobalt's qstat.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from jobenv.batch import jobstate
from jobenv.core.errors import BadInput

DATA = Path(__file__).parent / "data"


def data(name: str) -> str:
    return (DATA / name).read_text()


def test_slurm_scontrol_running_completed_cancelled():
    run = jobstate.parse_scontrol(data("slurm-scontrol-job-running.txt"), "1")
    assert run["JobState"] == "RUNNING" and jobstate.slurm_phase(run["JobState"]) == "running"
    done = jobstate.parse_scontrol(data("slurm-scontrol-job-completed.txt"), "1")
    assert (done["JobState"], done["ExitCode"]) == ("COMPLETED", "0:0")
    assert done["StdOut"].endswith("/job.out") and jobstate.slurm_phase("COMPLETED") == "ended"
    gone = jobstate.parse_scontrol(data("slurm-scontrol-job-cancelled.txt"), "2")
    assert (gone["JobState"], gone["ExitCode"]) == ("CANCELLED", "143:0")
    assert jobstate.parse_scontrol(data("slurm-scontrol-job-unknown.txt"), "2") == {}


def test_slurm_squeue_and_sacct():
    assert jobstate.parse_squeue(data("slurm-squeue-i-T-pending.txt"), "1") == "PENDING"
    assert jobstate.slurm_phase("PENDING") == "queued"
    assert jobstate.parse_squeue(data("slurm-squeue-i-T-completed.txt"), "1") == "COMPLETED"
    assert jobstate.parse_squeue(data("slurm-squeue-i-T-completed.txt"), "11") is None
    acct = data("slurm-sacct-X-P.txt")
    assert jobstate.parse_sacct(acct, "4822") == ("FAILED", "1:0")
    state, code = jobstate.parse_sacct(acct, "4823")
    assert jobstate.slurm_phase(state) == "ended" and code == "0:15"
    assert jobstate.parse_sacct(acct, "48") is None


@pytest.mark.parametrize("name", ["pbs-qstat-fx-json.txt", "pbs-qstat-fx-json-unescaped.txt"])
def test_pbs_json(name):
    out = data(name)
    run = jobstate.parse_pbs(out, "2024084")  # the short id names the server's long one
    assert (run.phase, run.state, run.exit, run.output) == ("running", "R", None, "/home/alice/STDIN.o2024084")
    done = jobstate.parse_pbs(out, "2023999.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov")
    assert (done.phase, done.state, done.exit) == ("ended", "F", "0")
    assert jobstate.parse_pbs(out, "7") is None
    assert jobstate.parse_pbs("qstat: Unknown Job Id 7.server\n", "7") is None


def test_cobalt_table():
    out = data("cobalt-qstat.txt")
    assert jobstate.parse_cobalt(out, 0, "10446").phase == "running"
    assert jobstate.parse_cobalt(out, 0, "10450").phase == "queued"
    assert jobstate.parse_cobalt(out, 0, "99").phase == "ended"  # Cobalt forgets an ended job
    assert jobstate.parse_cobalt(out, 1, "99") is None


def replay(answers):
    """A runner that answers each command from recorded outputs, keyed by its program."""
    asked = []

    def run(argv, env, timeout):
        asked.append(argv[0])
        return answers.get(argv[0])
    return run, asked


def test_slurm_asks_squeue_then_scontrol_then_sacct_then_the_exit_file(tmp_path):
    gone = (1, data("slurm-scontrol-job-unknown.txt"))
    run, asked = replay({"squeue": (0, data("slurm-squeue-i-T-completed.txt")),
                         "scontrol": (0, data("slurm-scontrol-job-completed.txt"))})
    st = jobstate.status("slurm", "1", {}, None, run)
    assert (st.phase, st.state, st.exit, st.source) == ("ended", "COMPLETED", "0:0", "scontrol show job")
    assert asked == ["squeue", "scontrol"]
    run, asked = replay({"squeue": (0, ""), "scontrol": gone, "sacct": (0, data("slurm-sacct-X-P.txt"))})
    assert jobstate.status("slurm", "4822", {}, None, run).line() == "ended (FAILED, exit 1:0; sacct)"
    exit_file = tmp_path / "exit"
    exit_file.write_text("3\n")
    run, asked = replay({"squeue": (1, "slurm_load_jobs error: Invalid job id specified"), "scontrol": gone,
                         "sacct": (1, "Slurm accounting storage is disabled")})
    st = jobstate.status("slurm", "1", {}, str(exit_file), run)
    assert (st.phase, st.exit) == ("ended", "3") and asked == ["squeue", "scontrol", "sacct"]
    st = jobstate.status("slurm", "1", {}, str(tmp_path / "none"), run)
    assert st.phase == "unknown"


def test_running_job_stops_at_squeue():
    run, asked = replay({"squeue": (0, data("slurm-squeue-i-T-pending.txt"))})
    assert jobstate.status("slurm", "1", {}, None, run).phase == "queued" and asked == ["squeue"]


def test_exit_file_is_hostile_input(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big"
    big.write_text("0" * 100)
    word = tmp_path / "word"
    word.write_text("rm -rf /\n")
    for p in (fifo, big, word, tmp_path / "missing", tmp_path):
        assert jobstate.exit_file_code(str(p)) is None  # never blocks on the FIFO, never a bogus code


def test_slurm_scontrol_name_words_are_the_name_and_forged_lines_make_the_job_unknown():
    """`jobenv logs` reads the StdOut scontrol names: a name's `StdOut=` words are the name,
    and a name holding a newline (its own StdOut= line) leaves the job unknown, no output."""
    done = data("slurm-scontrol-job-completed.txt")
    named = jobstate.parse_scontrol(done.replace("JobName=jobenv", "JobName=x StdOut=/root/.bashrc JobState=RUNNING"), "1")
    assert named["StdOut"].endswith("/job.out") and named["JobState"] == "COMPLETED"
    forged = done.replace("JobName=jobenv", "JobName=x\n   StdOut=/root/.bashrc")
    with pytest.raises(BadInput, match="before UserId"):
        jobstate.parse_scontrol(forged, "1")
    run, asked = replay({"squeue": (0, ""), "scontrol": (0, forged), "sacct": (0, data("slurm-sacct-X-P.txt"))})
    st = jobstate.status("slurm", "1", {}, None, run)
    assert (st.phase, st.state, st.output) == ("unknown", "ambiguous", None) and "before UserId" in st.source
    assert asked == ["squeue", "scontrol"]
