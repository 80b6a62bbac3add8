"""Which transport each backend picked, and a verdict against the machine profile's `fabric:`.

A missing network plugin fails nothing: NCCL falls back to TCP sockets and training runs
several times slower (ezpz's Perlmutter guide: 8.3x).  NCCL says what it chose only in its
own log, so with `--bandwidth` every rank points NCCL_DEBUG_FILE at a private file (never
the user's stderr) and reads it back after the measurement; oneCCL's ATL transport and
gloo's interface are told by their settings.  The verdict is data (status, says, fix)
computed by `judge` from what every rank saw, the measured bus bandwidth and the
profile's expectation; the report only renders it.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
from typing import Any, Dict, Iterable, List, Mapping, MutableMapping, Optional

# the names NCCL's "Using network <name>" gives each kind of network a profile can expect
NETWORKS = {"ofi": ("AWS Libfabric", "Libfabric", "OFI"), "ib": ("IB",), "socket": ("Socket",)}
MAX_LOG = 4 << 20  # NCCL's INFO log of one rank is some kilobytes; read no more than this
CCL_DEFAULT = "ofi"  # oneCCL's CCL_ATL_TRANSPORT when unset (oneCCL's transport-selection docs)


def nccl_log_to_file(env: MutableMapping[str, str]) -> str:
    """Point this process's NCCL log at a new private file, at INFO with the subsystems that
    name the network and each channel's transport; returns the file's path.  Set before the
    first communicator (NCCL reads these once); the user's NCCL_DEBUG_FILE is overridden for
    the selftest only, since its name may hold %h/%p and it may be shared by every rank."""
    folder = tempfile.mkdtemp(prefix="jobenv-nccl-")  # mode 0700, a new name: nobody else's file
    path = os.path.join(folder, "nccl.log")
    if env.get("NCCL_DEBUG", "").upper() not in ("INFO", "TRACE"):
        env["NCCL_DEBUG"] = "INFO"
    subsys = env.get("NCCL_DEBUG_SUBSYS")
    if subsys and not {"INIT", "ALL"} & set(subsys.upper().split(",")):
        env["NCCL_DEBUG_SUBSYS"] = subsys + ",INIT,NET"
    env["NCCL_DEBUG_FILE"] = path
    return path


def take_log(path: str) -> str:
    """The log's text (at most MAX_LOG bytes), and its private folder removed."""
    try:
        with open(path, "rb") as f:
            return f.read(MAX_LOG).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)


_USING = re.compile(r"NCCL INFO Using network (.+?)\s*$", re.M)
_VERSION = re.compile(r"NCCL INFO NCCL version (\S+)")
_SOCKET_IF = re.compile(r"NET/Socket : Using (.+?)\s*$", re.M)
_IB_IF = re.compile(r"NET/IB : Using (.+?)\s*$", re.M)
_NET_VIA = re.compile(r" via (NET/[^/\n]+)")
_LOCAL_VIA = re.compile(r" via ((?:P2P|SHM)/\S+)")
_NO_PLUGIN = re.compile(r"NET/Plugin.*(?:Could not find|No plugin found|dlerror)[^\n]*")
_OFI = re.compile(r"NET/OFI (?:Initializing|Using) (aws-ofi-nccl \S+|Libfabric \S+)|NET/OFI Selected [Pp]rovider is (\S+)")
_WARN = re.compile(r"NCCL WARN .*")


def parse_nccl(text: str) -> Dict[str, Any]:
    """What one rank's NCCL_DEBUG=INFO log says: version, the network NCCL chose (None when the
    log does not say), its interfaces, the plugin it failed to find, OFI's provider, the
    transports of its channels (between hosts: NET/...; within a host: P2P/..., SHM/...)."""
    using = _USING.findall(text)
    network = using[-1] if using else None
    ofi = [m.group(1) or m.group(2) for m in _OFI.finditer(text)]
    version = _VERSION.search(text)
    # the chosen network's interfaces only: NCCL also logs IB's "Using [RO]; OOB ..." when IB has no device
    ifs = {"Socket": _SOCKET_IF, "IB": _IB_IF}.get(network or "")
    return {"version": version.group(1) if version else None,
            "network": network,
            "interfaces": sorted(set(ifs.findall(text))) if ifs else [],
            "plugin_missing": bool(_NO_PLUGIN.search(text)) and not ofi,
            "ofi": sorted(set(ofi)),
            "net_channels": sorted(set(_NET_VIA.findall(text))),
            "local_channels": sorted({v.split("/")[0] + "/" + v.split("/")[1] for v in _LOCAL_VIA.findall(text)}),
            "warnings": _WARN.findall(text)[:3]}


def kind_of(network: Optional[str]) -> Optional[str]:
    """ofi, ib or socket for NCCL's network name; None when unknown or absent."""
    for kind, names in NETWORKS.items():
        if network in names:
            return kind
    return None


def ccl_transport(env: Mapping[str, str]) -> Dict[str, Any]:
    """oneCCL's ATL transport (its default when CCL_ATL_TRANSPORT is unset) and libfabric provider."""
    value = env.get("CCL_ATL_TRANSPORT", "").strip().lower()
    return {"network": value or CCL_DEFAULT, "set": bool(value), "provider": env.get("FI_PROVIDER") or None}


def gloo_interface(env: Mapping[str, str], host: str) -> Dict[str, Any]:
    """gloo's interface: GLOO_SOCKET_IFNAME, else the one holding the address the host name
    resolves to (gloo's own default); loopback there means other hosts cannot reach it."""
    if env.get("GLOO_SOCKET_IFNAME"):
        return {"network": "tcp", "interfaces": [env["GLOO_SOCKET_IFNAME"]], "how": "GLOO_SOCKET_IFNAME"}
    try:
        addr = socket.gethostbyname(host)
    except OSError:
        return {"network": "tcp", "interfaces": [], "how": f"{host} does not resolve"}
    name = _interface_of(addr)
    return {"network": "tcp", "interfaces": [f"{name or '?'}:{addr}"], "how": "the host name's address",
            "loopback": addr.startswith("127.")}


def _interface_of(addr: str) -> Optional[str]:
    """The interface holding IPv4 `addr` (SIOCGIFADDR on each), None when none does."""
    import fcntl
    import struct

    try:
        names = [n for _, n in socket.if_nameindex()]
    except OSError:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for name in names:
            try:
                raw = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            if socket.inet_ntoa(raw[20:24]) == addr:
                return name
    return None


def _missing_env(expect: Mapping[str, Any], env: Mapping[str, str]) -> List[str]:
    want: Mapping[str, str] = expect.get("env") or {}
    return [f"{k}={_q(v)}" for k, v in want.items() if env.get(k) != v]


def _q(value: str) -> str:
    import shlex

    return shlex.quote(value)


def _fix(expect: Mapping[str, Any], missing: List[str]) -> str:
    parts = [expect["load"]] if expect.get("load") else []
    if missing:
        parts.append("export " + " ".join(missing))
    if expect.get("source"):
        parts.append(f"(as {expect['source']} documents)")
    return "; ".join(parts)


def judge(backend: str, seen: Iterable[Dict[str, Any]], busbw_inter: Optional[float], nhosts: int,
          expect: Optional[Mapping[str, Any]], env: Mapping[str, str], profile: str = "") -> Dict[str, str]:
    """The verdict {status: ok|warn|fail|unknown, says, fix} for `backend` (nccl, ccl, gloo)
    from what each rank saw ({"host": ..., "network": ...}), the slowest inter-host bus
    bandwidth (GB/s per rank, None when not measured) and the profile's `fabric.<backend>`."""
    seen = list(seen)
    nets = sorted({s.get("network") or "unknown" for s in seen})
    where = f"{profile}'s profile" if profile else "the profile"
    expect = expect or {}
    wanted = expect.get("network") or expect.get("transport") or ""
    missing = _missing_env(expect, env)
    if backend == "nccl" and nets == ["unknown"]:
        return {"status": "unknown", "says": "NCCL's log did not say which network it chose",
                "fix": "run with NCCL_DEBUG=INFO and read its 'Using network' line"}
    if backend == "nccl" and wanted:
        bad = sorted({s.get("host", "?") for s in seen if kind_of(s.get("network")) != wanted})
        if bad:
            got = ", ".join(n for n in nets if kind_of(n) != wanted)
            lead = "NCCL is using sockets (TCP fallback)" if "Socket" in nets else f"NCCL is using {got}"
            return {"status": "fail", "says": f"{lead}, not the {wanted} network {where} expects, on "
                    f"{', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}", "fix": _fix(expect, missing)}
    if backend == "ccl" and wanted and any(s.get("network") != wanted for s in seen):
        return {"status": "fail", "says": f"oneCCL's ATL transport is {', '.join(nets)}, not the {wanted} {where} "
                f"documents", "fix": _fix(expect, missing)}
    floor = expect.get("min_busbw")
    if floor and busbw_inter is not None and nhosts > 1 and busbw_inter < floor:
        return {"status": "fail", "says": f"inter-host all-reduce bus bandwidth {busbw_inter:.2f} GB/s per GPU is "
                f"below the {floor:g} GB/s {where} expects", "fix": _fix(expect, missing)}
    channels = sorted({c for s in seen for c in s.get("net_channels") or ()})
    if backend == "nccl" and nhosts == 1 and channels:
        return {"status": "warn", "says": f"ranks on one host talk through NCCL's network ({', '.join(channels)}), "
                "not P2P or shared memory: NCCL takes them for separate hosts",
                "fix": "unset NCCL_HOSTID, or run a host's ranks in one container (one host name, boot id and IPC "
                       "namespace)"}
    if not wanted and backend == "nccl" and "Socket" in nets and nhosts > 1:
        return {"status": "warn", "says": "NCCL is using TCP sockets (NET/Socket) between hosts, and no profile "
                "says what this machine's network is",
                "fix": "load the site's NCCL network plugin (e.g. aws-ofi-nccl; NCCL_NET_PLUGIN names it) and "
                       "add a fabric: section to the machine's profile"}
    if missing:
        return {"status": "warn", "says": f"{backend} uses {', '.join(nets)} as expected, but settings {where} "
                f"documents are not set", "fix": _fix(expect, missing)}
    if nets == ["unknown"]:
        return {"status": "unknown", "says": f"{backend}: no transport to tell (bandwidth needs torch.distributed)",
                "fix": ""}
    if not expect:
        return {"status": "ok", "says": f"{backend} uses {', '.join(nets)}; {where} states no expectation", "fix": ""}
    return {"status": "ok", "says": f"{backend} uses {', '.join(nets)}, as {where} expects", "fix": ""}

def backend_kind(backend: str) -> str:
    """nccl, ccl (torch's xccl and oneCCL's ccl) or gloo, from torch.distributed's backend name."""
    name = backend.lower()
    return "nccl" if "nccl" in name else "ccl" if "ccl" in name else "gloo" if "gloo" in name else name


def rank_transport(backend: str, host: str, nccl_log: Optional[str], env: Mapping[str, str]) -> Dict[str, Any]:
    """This rank's transport as data: NCCL's log parsed, oneCCL's or gloo's settings."""
    kind = backend_kind(backend)
    text = take_log(nccl_log) if nccl_log else ""
    if kind == "nccl":
        seen = parse_nccl(text)
    elif kind == "ccl":
        seen = ccl_transport(env)
    elif kind == "gloo":
        seen = gloo_interface(env, host)
    else:
        seen = {"network": None}
    return {"backend": kind, "host": host, **seen}


def summarize(ranks: List[Dict[str, Any]], nhosts: int, expect: Optional[Mapping[str, Any]], profile: str,
              env: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    """Rank 0's fabric section: bandwidth (every rank holds the same figures), what each
    distinct transport was seen on, and the verdict; None when no rank measured."""
    seen = [r["fabric"] for r in ranks if r.get("fabric")]
    if not seen:
        return None
    bandwidth = next((r["bandwidth"] for r in ranks if r.get("bandwidth")), None)
    from .bandwidth import at_largest

    inter = at_largest(bandwidth["inter"]["rows"]) if bandwidth and "inter" in bandwidth else None
    backend = seen[0]["backend"]
    kinds: Dict[str, Dict[str, Any]] = {}
    for s in seen:  # one line per distinct transport, with the hosts that showed it
        key = repr({k: v for k, v in s.items() if k != "host"})
        kinds.setdefault(key, {**{k: v for k, v in s.items() if k != "host"}, "hosts": []})
        if s["host"] not in kinds[key]["hosts"]:
            kinds[key]["hosts"].append(s["host"])
    verdict = judge(backend, seen, inter, nhosts, expect, env, profile)
    return {"backend": backend, "bandwidth": bandwidth, "transports": list(kinds.values()), "verdict": verdict,
            "profile": profile or None, "expect": dict(expect) if expect else None}
