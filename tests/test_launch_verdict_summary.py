"""launch's failure summary (jobenv.launch.verdict.summary): a failure every rank reports alike is
named once, with its ranks; real launches of a local job through the MPICH wheel's mpiexec."""
from __future__ import annotations

import os

import pytest

from launchkit import local_job, shell
from jobenv.launch.verdict.summary import once

pytestmark = pytest.mark.e2e


@pytest.fixture
def job3(tmp_path):
    """A local job of 3 ranks saved with the MPICH wheel's mpiexec."""
    return local_job(tmp_path, 3)


def test_a_missing_script_is_named_once_with_every_rank(job3, tmp_path):
    """The issue's case: `python3 missing.py` on 3 ranks printed the Python error three times
    in jobenv's summary; now once, under one line that names ranks 0-2 and their host, and
    at most one line of the live watch before it naming one of them alone: three lines, or four."""
    p = shell(job3, f"cd {tmp_path} && jobenv launch -- python3 missing.py")
    assert p.returncode == 2, p.stderr
    host = os.uname().nodename
    ours = [ln for ln in p.stderr.splitlines() if ln.startswith("jobenv:")]
    assert f"jobenv: ranks 0-2 on {host} failed the same way: exit code 2 (3 of 3 ranks failed)" in ours, ours
    assert "jobenv: last lines of output, the same from each of the 3 failed ranks:" in ours, ours
    quoted = [ln for ln in ours if ln.startswith("jobenv:   | ")]
    assert len(quoted) == 1 and "missing.py" in quoted[0], ours
    # the live watch names a failure at once while another rank still runs: a rank whose Python
    # started late may still run when the first ends (1 in 6 runs here), and then one more line
    live = [ln for ln in ours if ln.startswith("jobenv: rank ") and ln.endswith(" failed: exit code 2")]
    assert len(live) <= 1 and len(ours) == 3 + len(live), ours


def test_ranks_that_fail_differently_keep_every_line(job3):
    """Different words from each rank, or different exits: nothing is folded."""
    p = shell(job3, "jobenv launch -- sh -c 'echo \"boom from $PMI_RANK\"; exit 4'")
    assert p.returncode == 4 and "failed the same way: exit code 4" in p.stderr, p.stderr
    assert all(f"jobenv:   | boom from {r}" in p.stderr for r in range(3)), p.stderr
    p = shell(job3, "jobenv launch -- sh -c 'sleep 0.$PMI_RANK; exit $((PMI_RANK + 3))'")
    assert "failed first: exit code 3" in p.stderr and "the same way" not in p.stderr, p.stderr


def test_once_folds_only_a_block_repeated_whole():
    assert once(["a", "b", "a", "b"], 2) == (["a", "b"], 2)
    assert once(["a", "b", "b", "a"], 2) == (["a", "b", "b", "a"], 1)
    assert once(["a", "a", "a"], 2) == (["a", "a", "a"], 1)  # 3 lines are no 2 copies
    assert once(["a", "a"], 1) == (["a", "a"], 1)


def test_ranks_stopped_after_the_first_are_never_its_same_failure(tmp_path):
    """A wrapper killed outright (`lost`), then Hydra's SIGKILL to the other rank's group: both
    `lost`, the second only because of the first.  The summary names rank 1 first and counts
    rank 0 as stopped, never "ranks 0-1 failed the same way (1 of 2 ranks failed)"; ranks
    that each failed on their own, alike, are still named once."""
    from jobenv.launch import ranks
    from jobenv.launch.verdict.summary import same_failure
    from jobenv.rank.ends import first_failure, stopped_after
    from jobenv.rank.verdict import Verdict

    def verdict(state: ranks.RunState) -> Verdict:
        first = first_failure(state)
        return Verdict("failed", "rank", 1, 1, 2, state, first=first, stopped=stopped_after(state, first))

    def state(lines: str) -> ranks.RunState:
        (tmp_path / "host-n1.ledger").write_text(lines)
        return ranks.read(str(tmp_path))

    starts = "start 0 10 1 11 1 100.0\nstart 1 20 1 21 1 100.0\n"
    killed = state(starts + "lost 1 102.0\nlost 0 102.000001\n")
    first = first_failure(killed)
    assert first is not None and first.rank == 1 and stopped_after(killed, first) == [0]
    assert same_failure(verdict(killed)) == []
    alike = state(starts + "end 1 exit:2 101.0\nend 0 exit:2 101.2\n")
    first = first_failure(alike)
    assert first is not None and [r.rank for r in same_failure(verdict(alike))] == [0, 1]


DEEPSPEED = "Mismatch in local rank setting, args.local_rank=0 but env['LOCAL_RANK']=1."


def test_hints_name_the_fix_for_known_words():
    from jobenv.launch.verdict.summary import hints

    assert len(hints(["Traceback ...", f"AssertionError: {DEEPSPEED}"])) == 1
    assert "--local-rank-arg" in hints([DEEPSPEED.replace("=0", "=-1")])[0]
    assert hints(["AssertionError: args.local_rank is wrong"]) == []


def test_deepspeeds_local_rank_assertion_names_local_rank_arg(tmp_path):
    """DeepSpeed's own test model without --local-rank-arg: rank 1's engine asserts its
    --local_rank (argparse's 0) is LOCAL_RANK; the summary names the flag after the last lines."""
    job = local_job(tmp_path, 2)
    (tmp_path / "test_model.py").write_text(f"import os\nassert os.environ['LOCAL_RANK'] == '0', {DEEPSPEED!r}\n")
    p = shell(job, f"cd {tmp_path} && jobenv launch -- python3 test_model.py")
    assert p.returncode == 1, p.stderr
    ours = [ln for ln in p.stderr.splitlines() if ln.startswith("jobenv:")]
    assert "jobenv: rank 1 on" in "\n".join(ours) and ours[-2].startswith("jobenv:   | "), ours
    assert "--local-rank-arg" in ours[-1] and ours[-1].count("--local-rank-arg") == 1, ours


def test_ctrl_c_counts_every_rank_that_ended(tmp_path):
    """^C (SIGINT to the launch's process group, as a terminal sends it) of 2 sleeping ranks: both
    end, and the line says so.  It said `1 of 2` in 2 of 5 runs: the ledger was read the moment
    the launcher went, before the other rank's keeper wrote its end (now: live.settle)."""
    import signal
    import subprocess
    import sys
    import time

    job = local_job(tmp_path, 2)
    runs = tmp_path / "home" / ".jobenv" / "runs"
    for attempt in range(3):
        p = subprocess.Popen(["env", "-i", *[f"{k}={v}" for k, v in job.items()], sys.executable, "-m", "jobenv",
                              "launch", "--", "python3", "-c", "import time; time.sleep(60)"],
                             start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # both ranks' programs started (their keepers' `start`)
            ledgers = list(runs.glob("*/*-a0/host-*.ledger"))
            if len(ledgers) == attempt + 1 and max(ledgers, key=lambda f: f.stat().st_mtime).read_text().count(
                    "start ") == 2:
                break
            time.sleep(0.1)
        time.sleep(0.5)  # the programs themselves run, past the keepers
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 130, err
        assert "jobenv: interrupted: 2 of 2 ranks ended" in err.splitlines(), err
