"""The record's `software` field read back (jobenv.store.software_field): checked, round-tripped,
re-activated by the restore plan."""
from __future__ import annotations

import json

import pytest

from jobenv.store import software_field
from jobenv.store.record import from_dict


@pytest.mark.parametrize("bad", [
    "x", {"python": {"kind": "pip", "prefix": "/a", "executable": "/a/p"}},
    {"python": {"kind": "venv", "prefix": "rel", "executable": "/a/p"}}, {"launcher": "mpiexec"},
    {"launcher": ["/bin/sh"]}, {"modules": 3},
])
def test_malformed_field_is_dropped_not_fatal(bad):
    got = software_field.validate(bad)
    assert got is None or (got["python"] is None and got["launcher"] is None and got["modules"] is None)


def record_with(sw):
    return from_dict({"schema_version": 1, "scheduler": "local", "jobid": "h", "machine": "local", "hosts": ["h"],
                      "gpus_per_host": 0, "ranks_per_host": 1, "launch": ["mpiexec", "-n", "1"], "env": {},
                      "created_at": "t", "created_on": "h", "software": sw})


def test_record_round_trips_the_field(tmp_path):
    sw = {"python": {"kind": "venv", "prefix": str(tmp_path), "executable": str(tmp_path / "bin/python3")},
          "launcher": "/usr/bin/mpiexec", "modules": "a/1:b/2"}
    rec = record_with(sw)
    assert rec.software == sw and from_dict(json.loads(rec.to_json())).software == sw
    assert record_with({"python": 5}).software == {"python": None, "launcher": None, "modules": None}
    assert "software" not in from_dict({k: v for k, v in rec.to_dict().items() if k != "software"}).to_dict()


def test_restore_items(tmp_path):
    (tmp_path / "bin").mkdir()
    rec = record_with({"python": {"kind": "conda", "prefix": str(tmp_path), "executable": str(tmp_path / "bin/python3")},
                "launcher": None, "modules": "PrgEnv-gnu:cudatoolkit/12.2"})
    sets, path, warns = software_field.restore_items(rec, {"LOADEDMODULES": "PrgEnv-gnu"}, "x1")
    assert sets == {"CONDA_PREFIX": str(tmp_path)} and path == [str(tmp_path / "bin")]
    assert warns == ["loaded modules differ from the saved job's; to match it run: "
                     "module purge && module load PrgEnv-gnu cudatoolkit/12.2"]
    assert software_field.restore_items(rec, {"LOADEDMODULES": "PrgEnv-gnu:cudatoolkit/12.2"}, "x1", python=False) == ({}, [], [])
    gone = record_with({"python": {"kind": "venv", "prefix": "/nonexistent/v", "executable": "/nonexistent/v/bin/python"}})
    sets, path, warns = software_field.restore_items(gone, {}, "x2")
    assert (sets, path) == ({}, []) and "not here on x2" in warns[0]
    assert software_field.restore_items(record_with(None), {"LOADEDMODULES": "a"}, "h") == ({}, [], [])
