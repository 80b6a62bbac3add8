"""The stage's broadcast (jobenv.stage.relay): real TCP on this host between Nodes of one
tree, each with its own spool; the shared archive read once, demand-driven, authenticated,
falling back to the shared file system when a parent is missing or not genuine."""
from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path


from jobenv.stage import relay, relaydir


def setup(tmp_path: Path, size: int = 3 << 20):
    archive = tmp_path / "a.tar"
    archive.write_bytes(os.urandom(size))
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    rdir, secret = relaydir.make_dir(str(tmp_path), ["127.0.0.1"] * 7, time.time() + 60)
    return archive, sha, rdir, secret


def node(tmp_path, archive, sha, rdir, secret, i, n, k=2, wait=5.0, key=None):
    spool = tmp_path / f"spool{i}"
    return relay.Node(rdir, key or relaydir.read_secret(secret), ["127.0.0.1"] * n, i, k, str(archive),
                      archive.stat().st_size, sha, str(spool), wait)


def run_all(nodes, need):
    out = {}

    def go(i, nd):
        got = None
        if need(i):
            try:
                path = nd.fetched()
                got = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            except relaydir.RelayError as exc:
                got = f"error {exc}"
        out[i] = (got, nd.finish())

    threads = [threading.Thread(target=go, args=(i, nd)) for i, nd in nodes.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_every_host_gets_it_and_the_shared_archive_is_read_once(tmp_path):
    archive, sha, rdir, secret = setup(tmp_path)
    nodes = {i: node(tmp_path, archive, sha, rdir, secret, i, 7) for i in range(7)}
    out = run_all(nodes, lambda i: True)
    assert all(got == sha for got, _ in out.values()), out
    assert out[0][1]["source"] == "shared" and out[0][1]["shared_bytes"] == archive.stat().st_size
    assert all(out[i][1]["source"] == "parent" and out[i][1]["shared_bytes"] == 0 for i in range(1, 7)), out
    assert out[0][1]["relayed_bytes"] == 2 * archive.stat().st_size
    assert not any(p.name.startswith("spool") for p in tmp_path.iterdir())  # spools removed


def test_nothing_needed_reads_nothing_and_a_leaf_pulls_through_its_unchanged_parent(tmp_path):
    archive, sha, rdir, secret = setup(tmp_path)
    out = run_all({i: node(tmp_path, archive, sha, rdir, secret, i, 5) for i in range(5)}, lambda i: False)
    assert all(r["source"] == "none" and r["shared_bytes"] == 0 for _, r in out.values()), out
    rdir2, secret2 = relaydir.make_dir(str(tmp_path), ["127.0.0.1"] * 7, time.time() + 60)
    out = run_all({i: node(tmp_path, archive, sha, rdir2, secret2, i, 5) for i in range(5)}, lambda i: i == 4)
    assert out[4][0] == sha and out[4][1]["source"] == "parent"
    assert out[1][1]["source"] == "parent" and out[1][1]["relayed_bytes"] == archive.stat().st_size  # unchanged, relays
    assert out[2][1]["source"] == "none" and out[0][1]["shared_bytes"] == archive.stat().st_size


def test_missing_parent_falls_back_and_is_named(tmp_path):
    archive, sha, rdir, secret = setup(tmp_path)
    nodes = {i: node(tmp_path, archive, sha, rdir, secret, i, 5, wait=1.5) for i in (0, 2, 3, 4)}  # host 1 never starts
    out = run_all(nodes, lambda i: True)
    assert all(got == sha for got, _ in out.values()), out
    for i in (3, 4):
        assert out[i][1]["source"] == "fallback" and "no relay started" in out[i][1]["fallback"]
        assert out[i][1]["shared_bytes"] == archive.stat().st_size
    assert out[0][1]["silent_children"] == ["127.0.0.1"]


def test_a_peer_without_the_secret_gets_nothing_and_gives_nothing(tmp_path):
    archive, sha, rdir, secret = setup(tmp_path)
    nodes = {0: node(tmp_path, archive, sha, rdir, secret, 0, 2, wait=1.5),
             1: node(tmp_path, archive, sha, rdir, secret, 1, 2, wait=1.5, key=b"0" * 64)}
    out = run_all(nodes, lambda i: i == 1)
    assert out[1][0] == sha and out[1][1]["source"] == "fallback", out  # refused by its parent: read the shared copy
    assert out[0][1]["relayed_bytes"] == 0 and out[0][1]["shared_bytes"] == 0


def test_join_finds_this_host_in_the_relay_directory(tmp_path):
    archive, sha, _, _ = setup(tmp_path, 10)
    rdir, secret = relaydir.make_dir(str(tmp_path), [f"n{i:05d}" for i in range(10000)], time.time() + 60)  # no argv limit
    assert oct(os.stat(rdir).st_mode & 0o777) == "0o700"
    assert all(oct(os.stat(os.path.join(rdir, f)).st_mode & 0o777) == "0o600" for f in ("hosts", "secret"))
    spec = {"name": "env", "archive": str(archive), "relay": {"dir": rdir, "secret": secret, "fanout": 2, "wait": 1}}
    meta = {"archive_bytes": 10, "archive_sha256": sha}
    nd = relay.join(spec, meta, "n09999", str(tmp_path))
    assert nd is not None and nd.index == 9999 and nd.parent == 4999 and nd.kids == []
    assert os.path.exists(os.path.join(rdir, "9999.port"))
    nd.closing = True
    nd.sock.close()
    assert relay.join(spec, meta, "elsewhere", str(tmp_path)) is None  # not a host of the tree: reads the archive
    assert relay.join(dict(spec, relay=None), meta, "n00001", str(tmp_path)) is None


def test_a_parent_that_breaks_off_midway_leaves_only_the_rest_to_read(tmp_path):
    archive, sha, rdir, secret = setup(tmp_path, 4 << 20)
    half = tmp_path / "half.tar"  # what the root can read: the first half, then its fetch fails
    half.write_bytes(archive.read_bytes()[: 2 << 20])
    key = relaydir.read_secret(secret)
    root = relay.Node(rdir, key, ["127.0.0.1"] * 2, 0, 2, str(half), 4 << 20, sha, str(tmp_path / "s0"), 5.0)
    kid = node(tmp_path, archive, sha, rdir, secret, 1, 2)
    out = run_all({0: root, 1: kid}, lambda i: True)
    assert out[0][0].startswith("error") and "shorter than the sidecar says" in out[0][0]
    assert out[1][0] == sha and out[1][1]["source"] == "fallback", out
    assert "broke off" in out[1][1]["fallback"]
    assert out[1][1]["shared_bytes"] == (4 << 20) - out[0][1]["relayed_bytes"] and out[0][1]["relayed_bytes"] > 0
