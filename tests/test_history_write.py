"""Writing run history (jobenv.history.write): advisory, so it never raises into a launch."""
from __future__ import annotations

from types import SimpleNamespace

from jobenv.history import write as runs_record


def test_a_failure_to_record_is_one_warning_never_an_exception(tmp_path):
    gone = tmp_path / "removed-run"  # the ranks (or a full disk) took the run directory away
    out = SimpleNamespace(returncode=0, expired="")
    plan = SimpleNamespace(size=SimpleNamespace(hosts=["h1"], nranks=1, ppn=1), launcher=["mpiexec"])
    rec = SimpleNamespace(jobid="1", scheduler="local")
    warned = []
    runs_record.record(str(gone), rec, ["true"], plan, 0, out, 0.0, {"JOBENV_HOME": str(tmp_path)}, warned.append)
    assert len(warned) == 1 and warned[0].startswith(f"run history not recorded for {gone}: ")
    runs_record.record(str(tmp_path), rec, ["true"], None, 0, out, 0.0, {}, warned.append)  # any failure at all
    assert len(warned) == 2 and "\n" not in warned[1]
    runs_record.record(str(gone), rec, ["true"], plan, 0, out, 0.0, {})  # no one to tell: silent


def test_phases_are_written_only_inside_a_launch(tmp_path):
    assert runs_record.write_phases([{"rank": 0, "host": "h", "phases": {}}], {}) is False
    env = {"JOBENV_RUN_DIR": str(tmp_path)}
    assert runs_record.write_phases([{"rank": 0, "host": "h", "phases": {"launch": object()}}], env) is False
    assert runs_record.write_phases([{"rank": 0, "host": "h", "phases": {"launch": 0.5}}], env) is True
    assert (tmp_path / "phases.json").read_text().startswith('{"version": 1, "ranks": [{"rank": 0')
