import pytest
from hypothesis import given, settings, strategies as st

from jobenv.core.hostlist import (HostlistError, check_host, compress, expand, hostfile_text, is_valid_host,
                                  parse_counts, unique)


@pytest.mark.parametrize("text,hosts", [
    ("nid001234", ["nid001234"]),
    ("nid[001234-001236]", ["nid001234", "nid001235", "nid001236"]),
    ("frontier[00001-00003,00007]", ["frontier00001", "frontier00002", "frontier00003", "frontier00007"]),
    ("n[098-101]", ["n098", "n099", "n100", "n101"]),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("chr-[0506-0507]", ["chr-0506", "chr-0507"]),
    ("rack[1-2]-node[01-02]", ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"]),
    ("a[1-2]b,c", ["a1b", "a2b", "c"]),
    ("x[1,3-4]y[5]", ["x1y5", "x3y5", "x4y5"]),
    ("gpu[01-02],cpu[1-2]", ["gpu01", "gpu02", "cpu1", "cpu2"]),
    ("node1.example.org", ["node1.example.org"]),
])
def test_expand(text, hosts):
    assert expand(text) == hosts


@pytest.mark.parametrize("text,why", [
    ("n[1-", "unterminated"), ("n[3-1]", "reversed"), ("n]", "unmatched"), ("a,,b", "empty"),
    ("n[a-b]", "bad range"), ("n[1-2", "unterminated"), ("n[[1]]", "nested"), ("", "empty"),
    ("x;rm -rf ~", "bad host"), ("n[]", "bad range"), ("n[1--2]", "bad range"),
])
def test_expand_rejects(text, why):
    with pytest.raises(HostlistError, match=why):
        expand(text)


def test_counts():
    assert parse_counts("4(x2),2") == [4, 4, 2]
    assert parse_counts("64") == [64]
    with pytest.raises(HostlistError):
        parse_counts("4(x2")


def test_unique_keeps_first_seen_order():
    assert unique(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]


@pytest.mark.parametrize("name,ok", [
    ("x3006c0s13b0n0.hsn.cm.polaris.alcf.anl.gov", True), ("nid001234", True), ("node_1", True),
    ("a b", False), ("$(touch x)", False), ("-bad", False), ("a..b", False), ("", False), ("x" * 64, False),
])
def test_host_validation(name, ok):
    assert is_valid_host(name) is ok
    if not ok:
        with pytest.raises(HostlistError):
            check_host(name)


label = st.from_regex(r"[a-z][a-z0-9-]{0,6}[a-z]", fullmatch=True)
host = st.builds(lambda p, n, w: f"{p}{str(n).zfill(w)}", label, st.integers(0, 2000), st.integers(1, 5))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(host, label), min_size=1, max_size=60))
def test_compress_round_trip(hosts):
    assert expand(compress(hosts)) == hosts


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab01-[],.", max_size=20))
def test_expand_never_returns_invalid_hosts(text):
    try:
        hosts = expand(text)
    except HostlistError:
        return
    assert hosts and all(is_valid_host(h) for h in hosts)


def test_large_list_is_fast_enough():
    hosts = expand("nid[000001-100000]")
    assert len(hosts) == 100000 and hosts[-1] == "nid100000"
    assert compress(hosts) == "nid[000001-100000]"


def test_hostfile_text_is_one_host_per_line_read_back_as_every_hostfile_is():
    """The one writer of hostfile text: the store's `.hosts`, a launch's sub-hostfile and a
    stage relay's host list are this text, and the scheduler files' reader reads it back."""
    from jobenv.schedulers.parse import parse_nodefile

    hosts = ["x1000c0s0b0n0", "nid001234.hsn", "node-2"]
    assert hostfile_text(hosts) == "x1000c0s0b0n0\nnid001234.hsn\nnode-2\n" and hostfile_text([]) == ""
    assert parse_nodefile(hostfile_text(hosts), "hosts") == (hosts, [1, 1, 1])
