"""`selftest --bandwidth`: bus bandwidth, the transport each backend chose, the verdict.

Real gloo across processes on this machine (torchrun, ranks told apart as two hosts by
JOBENV_HOSTNAME), and NCCL_DEBUG=INFO logs recorded on a real NVIDIA H100 machine:
tests/data/nccl/h100-2ranks-hostid-socket.rank*.log, written by NCCL 2.28.9+cuda13.0
(torch 2.11.0+cu130) on 2026-11-27 by case 4 of benchmarks/fabric_gpu.sh, two ranks
sharing the GPU with distinct NCCL_HOSTIDs, so NCCL connected them over NET/Socket as it
does between hosts without a network plugin.  Its results: benchmarks/results/fabric-gpu-2026-11-27.txt.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from jobenv.profiles import load as profiles
from jobenv.profiles.check import ProfileError
from jobenv.selftest import bandwidth, fabric

from conftest import REPO
from test_selftest import BIN, SELFTEST, need_module, run

LOGS = sorted((Path(__file__).parent / "data" / "nccl").glob("h100-2ranks-hostid-socket.rank*.log"))


def shipped(name: str) -> profiles.Profile:
    return profiles.load_all({"XDG_CONFIG_HOME": "/nonexistent"})[name]


def seen_in_recorded_logs() -> list:
    return [{"backend": "nccl", "host": f"x300{i}c0s0b0n0", **fabric.parse_nccl(p.read_text())}
            for i, p in enumerate(LOGS)]


def test_recorded_log_says_sockets_and_no_plugin():
    assert len(LOGS) == 2
    got = fabric.parse_nccl(LOGS[0].read_text())
    assert got["network"] == "Socket" and got["version"] == "2.28.9+cuda13.0"
    assert got["interfaces"] == ["[0]eth0:192.0.2.2<0>"]  # not IB's "[RO]; OOB ..." line: IB had no device
    assert got["plugin_missing"] and got["net_channels"] == ["NET/Socket"] and got["local_channels"] == []
    assert fabric.kind_of(got["network"]) == "socket"


@pytest.mark.parametrize("machine,says_fix", [
    ("polaris", ["/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib", "NCCL_NET='AWS Libfabric'", "NCCL_NET_GDR_LEVEL=PHB",
                 "docs.alcf.anl.gov/polaris"]),
    ("perlmutter", ["NERSC/nccl-ofi-plugin", "NCCL_NET='AWS Libfabric'", "NCCL_SOCKET_IFNAME=hsn"]),
])
def test_recorded_socket_log_is_a_tcp_fallback_with_the_profiles_fix(machine, says_fix):
    expect = shipped(machine).fabric["nccl"]
    v = fabric.judge("nccl", seen_in_recorded_logs(), 1.85, 2, expect, {}, machine)
    assert v["status"] == "fail"
    assert v["says"].startswith("NCCL is using sockets (TCP fallback), not the ofi network")
    assert f"{machine}'s profile" in v["says"] and "x3000c0s0b0n0, x3001c0s0b0n0" in v["says"]
    for text in says_fix:
        assert text in v["fix"], (text, v["fix"])


def test_settings_already_set_are_not_named_again():
    expect = shipped("polaris").fabric["nccl"]
    v = fabric.judge("nccl", seen_in_recorded_logs(), None, 2, expect, {"NCCL_NET": "AWS Libfabric"}, "polaris")
    assert "NCCL_NET=" not in v["fix"] and "NCCL_CROSS_NIC=1" in v["fix"]


def test_sockets_expected_is_ok_and_a_floor_is_judged():
    expect = {"network": "socket", "min_busbw": 2.0}
    seen = seen_in_recorded_logs()
    assert fabric.judge("nccl", seen, 2.5, 2, expect, {})["status"] == "ok"
    slow = fabric.judge("nccl", seen, 1.85, 2, expect, {}, "mine")
    assert slow["status"] == "fail" and "1.85 GB/s per GPU is below the 2 GB/s mine's profile expects" in slow["says"]


def test_one_host_whose_ranks_talk_over_the_network_is_named():
    v = fabric.judge("nccl", seen_in_recorded_logs(), None, 1, None, {})
    assert v["status"] == "warn" and "NET/Socket" in v["says"] and "NCCL_HOSTID" in v["fix"]


def test_sockets_between_hosts_without_a_profile_is_a_warning():
    seen = [{**s, "net_channels": []} for s in seen_in_recorded_logs()]
    v = fabric.judge("nccl", seen, None, 2, None, {})
    assert v["status"] == "warn" and "NCCL_NET_PLUGIN" in v["fix"]
    assert fabric.judge("nccl", [{"host": "a", "network": None}], None, 2, None, {})["status"] == "unknown"
    assert fabric.judge("torch", [{"host": "a", "network": None}], None, 2, None, {})["status"] == "unknown"


def test_printed_verdict_escapes_control_bytes():
    from jobenv.selftest.report import fabric_lines

    lines = fabric_lines({"verdict": {"status": "fail", "says": "on h\x1b]0;x\x07", "fix": "a\x9bb"}})
    assert not any(c in "".join(lines) for c in "\x1b\x07\x9b") and "\\x1b" in lines[0]


def test_oneccl_transport_against_auroras_documented_settings():
    expect = shipped("aurora").fabric["ccl"]
    unset = fabric.judge("ccl", [{"host": "a", **fabric.ccl_transport({})}], None, 2, expect, {}, "aurora")
    assert unset["status"] == "fail" and "ATL transport is ofi, not the mpi" in unset["says"]
    assert "CCL_ATL_TRANSPORT=mpi" in unset["fix"] and "CCL_PROCESS_LAUNCHER=pmix" in unset["fix"]
    assert "module load frameworks" in unset["fix"] and "docs.alcf.anl.gov/aurora" in unset["fix"]
    env = {k: str(v) for k, v in expect["env"].items()}
    good = fabric.judge("ccl", [{"host": "a", **fabric.ccl_transport(env)}], None, 2, expect, env, "aurora")
    assert good["status"] == "ok", good


def test_groups_and_the_bus_bandwidth_factor():
    assert bandwidth.plan_groups(["a", "a", "b", "b", "c"]) == ([[0, 1], [2, 3]], [[0, 2, 4], [1, 3]])
    assert bandwidth.plan_groups(["a", "b"]) == ([], [[0, 1]])
    assert bandwidth.plan_groups(["a"]) == ([], [])
    assert [bandwidth.busbw_factor(n) for n in (1, 2, 4, 8)] == [0.0, 1.0, 1.5, 1.75]


@pytest.mark.parametrize("entry,says", [
    ("{nccl: {network: tcp}}", "network must be one of ofi, ib, socket"),
    ("{mpi: {}}", "must map nccl, ccl, gloo"),
    ("{nccl: {min_busbw: 0}}", "min_busbw must be a positive number"),
    ("{nccl: {env: {1X: y}}}", "env must map variable names"),
    ("{ccl: {network: ofi}}", "ccl takes transport, load"),
    ("{nccl: {load: [a]}}", "load must be one line"),
    ('{nccl: {env: {X: "a\\x1b[2J"}}}', "env must map variable names to printable"),
])
def test_bad_fabric_section_is_one_line(entry, says):
    text = f"name: x\nscheduler: slurm\nlaunchers: [{{argv: [srun]}}]\nfabric: {entry}\n"
    with pytest.raises(ProfileError) as err:
        profiles.parse(text, "x.yaml")
    assert says in err.value.message and "\n" not in err.value.message


def torchrun_two_hosts(tmp_path, *args, extra=None):
    """4 ranks of real gloo on loopback; JOBENV_HOSTNAME makes ranks 0-1 host h0 and 2-3 host h1."""
    need_module("torch")
    script = ("export JOBENV_HOSTNAME=h$((LOCAL_RANK / 2)); exec " + " ".join(SELFTEST) + " --bandwidth "
              "--json-file report.json " + " ".join(args))
    return run([str(BIN / "torchrun"), "--standalone", "--nproc-per-node", "4", "--no-python", "sh", "-c", script],
               tmp_path, {"PYTHONPATH": str(REPO), **(extra or {})})  # this checkout's jobenv, not the venv's


def test_gloo_bandwidth_within_and_between_hosts(tmp_path):
    p = torchrun_two_hosts(tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads((tmp_path / "report.json").read_text())
    fab = rep["fabric"]
    assert rep["ok"] and fab["backend"] == "gloo" and rep["ranks_per_host"] == {"h0": [0, 1], "h1": [2, 3]}
    for kind in ("intra", "inter"):
        rows = fab["bandwidth"][kind]["rows"]
        assert fab["bandwidth"][kind]["groups"] == 2
        assert [r["bytes"] for r in rows] == list(bandwidth.SIZES_CPU)
        assert all(r["ranks"] == 2 and 0 < r["busbw"] == pytest.approx(r["algbw"]) for r in rows)  # n=2: factor 1
    assert fab["transports"] == [{"backend": "gloo", "network": "tcp", "interfaces": ["lo"],
                                  "how": "GLOO_SOCKET_IFNAME", "hosts": ["h0", "h1"]}]
    assert fab["verdict"]["status"] == "ok"
    assert "all-reduce bandwidth" in p.stdout and "inter    2      2" in p.stdout and "fabric OK" in p.stdout


def test_a_profiles_floor_fails_the_selftest_and_names_the_fix(tmp_path):
    mine = tmp_path / "profiles"
    mine.mkdir(mode=0o700)
    (mine / "fast.yaml").write_text("name: fast\nscheduler: local\nlaunchers: [{argv: [sh]}]\n"
                                    "fabric: {gloo: {min_busbw: 1000000, load: use the fast network, "
                                    "source: 'https://example.org/fast'}}\n")
    os.chmod(mine / "fast.yaml", 0o600)
    p = torchrun_two_hosts(tmp_path, "--profile", "fast", "-q", extra={"JOBENV_PROFILES": str(mine)})
    assert p.returncode == 1, p.stdout + p.stderr
    assert "fabric FAIL: inter-host all-reduce bus bandwidth" in p.stdout and "fast's profile" in p.stdout
    assert "fix: use the fast network; (as https://example.org/fast documents)" in p.stdout
    assert "FAILED" in p.stdout and "the fabric check failed" in p.stdout
    assert not json.loads((tmp_path / "report.json").read_text())["ok"]
