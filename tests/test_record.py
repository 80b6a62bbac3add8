"""The record's JSON contract and the regex-free JSON reader used on the `get` path."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from jobenv.errors import BadRecord
from jobenv.record import SCHEMA_VERSION, JobRecord, from_dict, from_json, loads


def sample() -> JobRecord:
    return JobRecord(scheduler="pbs", jobid="1.pbs", machine="pbs", hosts=["a", "b"], gpus_per_host=4,
                     ranks_per_host=4, hostfile="/h f", launch=["mpiexec", "-n", "8"], env={"PBS_JOBID": "1.pbs"},
                     created_at=1767225600.0, created_on="a")


def test_round_trip_and_contract():
    rec = sample()
    data = json.loads(rec.to_json())
    assert data["schema_version"] == SCHEMA_VERSION and data["nhosts"] == 2 and data["ngpus"] == 8
    assert data["nranks"] == 8 and from_json(rec.to_json()).to_dict() == rec.to_dict()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(json_values, st.sampled_from([None, 2]))
def test_loads_matches_json(value, indent):
    text = json.dumps(value, indent=indent)
    assert loads(text) == json.loads(text)
    assert loads(" \n" + text + "\n ") == json.loads(text)


@settings(max_examples=300, deadline=None)
@given(json_values, st.data())
def test_loads_rejects_every_truncation(value, data):
    text = json.dumps({"k": value, "z": [1, 2]}, indent=2)
    cut = data.draw(st.integers(1, len(text) - 1))
    with pytest.raises(ValueError):
        json.loads(text[:cut])
    with pytest.raises(ValueError):
        loads(text[:cut])


@pytest.mark.parametrize("text", ["", "{", '{"a": 1', '{"a": 1} x', "[1,]", "nul", '{"a": "\x01"}', "01"])
def test_loads_rejects_what_json_rejects(text):
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        loads(text)


def test_from_dict_rejects_defects():
    good = sample().to_dict()
    for key, bad in (("hosts", ["a b"]), ("launch", []), ("scheduler", "lsf"), ("gpus_per_host", -1),
                     ("env", {"A": 1}), ("jobid", 5), ("ranks_per_host", True)):
        with pytest.raises(BadRecord):
            from_dict({**good, key: bad}, "r")
    with pytest.raises(BadRecord, match="newer"):
        from_dict({**good, "schema_version": SCHEMA_VERSION + 1}, "r")
