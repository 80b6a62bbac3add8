"""The regex-free JSON reader of the `get` path parses and refuses exactly as json.loads."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from jobenv.core.jsonread import loads

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
