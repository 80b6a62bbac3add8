"""The broadcast stage's relay directory and tree (jobenv.stage.relaydir): the tree's shape,
a secret only from a private file of the user's own, directories a killed stage left swept."""
from __future__ import annotations

import os
import time

import pytest

from jobenv.stage import relaydir


def test_tree_shape():
    assert [relaydir.parent(i, 2) for i in range(7)] == [None, 0, 0, 1, 1, 2, 2]
    assert relaydir.children(1, 2, 7) == [3, 4] and relaydir.children(2, 3, 7) == [] and relaydir.children(0, 3, 3) == [1, 2]
    assert relaydir.depth(1, 2) == 0 and relaydir.depth(7, 2) == 2 and relaydir.depth(4096, 8) == 4


@pytest.mark.parametrize("mode", [0o644, 0o620])
def test_secret_readable_or_writable_by_others_is_refused(tmp_path, mode):
    _, secret = relaydir.make_dir(str(tmp_path), ["a"], time.time() + 60)
    os.chmod(secret, mode)
    with pytest.raises(relaydir.RelayError, match="not a private file"):
        relaydir.read_secret(secret)


def test_secret_of_another_user_is_refused(tmp_path, other_user):
    _, secret = relaydir.make_dir(str(tmp_path), ["a"], time.time() + 60)
    os.chown(secret, other_user.uid, other_user.gid)
    with pytest.raises(relaydir.RelayError, match="not a private file"):
        relaydir.read_secret(secret)


def test_a_killed_stage_leaves_no_relay_directory_past_its_deadline(tmp_path):
    old, _ = relaydir.make_dir(str(tmp_path), ["a"], time.time() - 120)
    live, _ = relaydir.make_dir(str(tmp_path), ["a"], time.time() + 3600)  # sweeps the old one
    (tmp_path / "relay.1.x").symlink_to(tmp_path / "elsewhere")  # not a directory of ours: left
    assert not os.path.exists(old) and os.path.isdir(live) and (tmp_path / "relay.1.x").is_symlink()
    assert relaydir.sweep(str(tmp_path), time.time()) == []
