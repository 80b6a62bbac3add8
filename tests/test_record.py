"""The record's JSON contract: fields, validation, migration."""
from __future__ import annotations

import json

import pytest

from jobenv.core.errors import BadRecord
from jobenv.store.record import SCHEMA_VERSION, JobRecord, from_dict, from_json


def sample() -> JobRecord:
    return JobRecord(scheduler="pbs", jobid="1.pbs", machine="pbs", hosts=["a", "b"], gpus_per_host=4,
                     ranks_per_host=4, hostfile="/h f", launch=["mpiexec", "-n", "8"], env={"PBS_JOBID": "1.pbs"},
                     created_at=1767225600.0, created_on="a")


def test_round_trip_and_contract():
    rec = sample()
    data = json.loads(rec.to_json())
    assert data["schema_version"] == SCHEMA_VERSION and data["nhosts"] == 2 and data["ngpus"] == 8
    assert data["nranks"] == 8 and from_json(rec.to_json()).to_dict() == rec.to_dict()


def test_from_dict_rejects_defects():
    good = sample().to_dict()
    for key, bad in (("hosts", ["a b"]), ("launch", []), ("scheduler", "sge"), ("gpus_per_host", -1),
                     ("env", {"A": 1}), ("jobid", 5), ("ranks_per_host", True)):
        with pytest.raises(BadRecord):
            from_dict({**good, key: bad}, "r")
    with pytest.raises(BadRecord, match="newer"):
        from_dict({**good, "schema_version": SCHEMA_VERSION + 1}, "r")


DATA = __import__("pathlib").Path(__file__).parent / "data"


def test_v1_record_is_migrated_and_restored(tmp_path):
    """A version-1 record (local time with offset) reads as the current version (UTC epoch),
    `jobenv get` restores it, and the next write stores the current version."""
    import os
    import shutil

    from conftest import base_env, jobenv

    v1 = (DATA / "record-v1.json").read_text()
    rec = from_json(v1, "v1")
    assert rec.schema_version == SCHEMA_VERSION == 3 and rec.env_file is None
    assert rec.launch_template is None and rec.launcher_family is None  # not recorded before version 3
    assert rec.created_at == 1772464504.0  # 2026-03-02T09:15:04-0600 == 15:15:04 UTC
    home = tmp_path / "home"
    jobs = home / ".jobenv" / "jobs"
    jobs.mkdir(parents=True)
    os.chmod(home / ".jobenv", 0o700)
    os.chmod(jobs, 0o700)
    key = "pbs-2024084.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov"
    shutil.copy(DATA / "record-v1.json", jobs / f"{key}.json")
    (jobs / f"{key}.hosts").write_text("".join(h + "\n" for h in rec.hosts))
    for p in jobs.iterdir():
        p.chmod(0o600)
    env = base_env(home)
    p = jobenv(["get", "--job", "2024084", "--shell", "bash"], env)
    assert p.returncode == 0, p.stderr
    assert "NHOSTS='2'" in p.stdout and "PBS_O_WORKDIR='/home/alice/project'" in p.stdout, p.stdout
    shown = json.loads(jobenv(["show", "--json", "--job", "2024084"], env, check=True).stdout)
    assert shown["schema_version"] == 3 and shown["created_at"] == 1772464504.0
    from jobenv.store import files as store

    store.update_status(str(jobs / f"{key}.json"), {"reason": "touched"}, env)
    assert json.loads((jobs / f"{key}.json").read_text())["schema_version"] == 3
    assert jobenv(["rm", "2024084"], env, check=True).returncode == 0
    assert not [p for p in jobs.iterdir() if not p.name.endswith(".lock")]


def test_version_3_carries_the_launch_decision_and_checks_it():
    rec = sample()
    rec.launch_template = {"argv": ["mpiexec", "-n", "{nranks}", {"when": "ngpus", "args": ["--gpu"]}], "vars": {"d": "2"}}
    rec.launcher_family = "pals"
    again = from_json(rec.to_json())
    assert again.launch_template == rec.launch_template and again.launcher_family == "pals"
    good = rec.to_dict()
    for key, bad in (("launch_template", {"argv": []}), ("launch_template", {"argv": ["a"], "vars": {"x": 1}}),
                     ("launch_template", {"argv": ["a", {"when": "n"}], "vars": {}}), ("launch_template", ["a"]),
                     ("launcher_family", "mpi ch"), ("launcher_family", 3)):
        with pytest.raises(BadRecord, match=key):
            from_dict({**good, key: bad}, "r")
    v2 = {**good, "schema_version": 2}  # an older record: what it carries of these is not its to say
    old = from_dict(v2, "r")
    assert old.launch_template is None and old.launcher_family is None and old.schema_version == SCHEMA_VERSION


def test_unknown_optional_fields_round_trip():
    data = sample().to_dict()
    data["software"] = {"python": {"kind": "venv", "prefix": "/p", "executable": "/p/bin/python"},
                        "launcher": None, "modules": None}
    data["future_thing"] = [1, 2]
    rec = from_dict(data, "r")
    assert json.loads(rec.to_json())["software"] == data["software"]
    assert json.loads(rec.to_json())["future_thing"] == [1, 2]
