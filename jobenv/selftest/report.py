"""Rank 0's summary of every rank's result, as JSON and as tables."""
from __future__ import annotations

import os
import statistics
from typing import Any, Dict, List, Mapping, Optional, Tuple

from jobenv.core.numparse import plural
from ..runtime import DistInfo
from .codes import PHASES


def summarize(results: Dict[int, Dict[str, Any]], info: DistInfo) -> Dict[str, Any]:
    ranks = [results[r] for r in sorted(results)]
    per_host: Dict[str, List[int]] = {}
    for res in ranks:
        per_host.setdefault(res["host"], []).append(res["rank"])
    phases = {}
    for name in PHASES + ("start_to_first_allreduce",):
        got = [(res["phases"].get(name) if name in PHASES else res.get(name), res) for res in ranks]
        vals: List[Tuple[float, Dict[str, Any]]] = [(v, res) for v, res in got if v is not None]
        if not vals:
            continue
        slow_v, slow = max(vals, key=lambda t: t[0])
        xs = [v for v, _ in vals]
        phases[name] = {"min": min(xs), "median": statistics.median(xs), "max": slow_v,
                        "slowest_rank": slow["rank"], "slowest_host": slow["host"]}
    failed = {res["rank"]: [c for c, ok in res["checks"].items() if not ok] for res in ranks}
    failed = {r: c for r, c in failed.items() if c}
    missing = [r for r in range(info.world_size) if r not in results]
    return {"ok": not failed and not missing, "world_size": info.world_size, "launcher": info.launcher,
            "framework": ranks[0]["framework"] if ranks else None, "jobid": info.jobid,
            "ranks_per_host": per_host, "phases": phases, "failed_checks": failed,
            "missing_results": missing, "checks": sorted(ranks[0]["checks"]) if ranks else [],
            "losses": ranks[0]["losses"] if ranks else [], "ranks": ranks, "container": container(os.environ)}


def container(env: Mapping[str, str]) -> Optional[Dict[str, str]]:
    """The image and runtime `launch --container` ran the ranks in (its JOBENV_CONTAINER and
    JOBENV_CONTAINER_RUNTIME); None outside one."""
    image = env.get("JOBENV_CONTAINER")
    return {"image": image, "runtime": env.get("JOBENV_CONTAINER_RUNTIME", "")} if image else None


def expectation(backend: str, name: Optional[str], env: Mapping[str, str]) -> Tuple[str, Optional[Dict[str, Any]]]:
    """(profile name, its fabric.<backend>) for the profile named, else the job record's
    machine; ("", None) when there is none (a torchrun outside any job, an unknown name)."""
    from jobenv.core.errors import JobenvError
    from ..runtime import DetectError

    try:
        if not name:
            from ..runtime.discovery import load_record, record_path

            path = record_path(env)
            rec = load_record(path) if path else None
            name = rec.machine if rec is not None else None
        if not name:
            return "", None
        from jobenv.profiles import load as profiles

        prof = profiles.load_all(env).get(name)
    except (DetectError, JobenvError):
        return name or "", None
    return (name, prof.fabric.get(backend)) if prof is not None else (name, None)


def add_fabric(rep: Dict[str, Any], profile: Optional[str]) -> None:
    """The fabric section (jobenv.selftest.fabric.summarize) into the report; a failing verdict fails it."""
    from . import fabric

    seen = [r["fabric"] for r in rep["ranks"] if r.get("fabric")]
    name, expect = expectation(seen[0]["backend"], profile, os.environ) if seen else ("", None)
    rep["fabric"] = fabric.summarize(rep["ranks"], len(rep["ranks_per_host"]), expect, name, os.environ)
    if rep["fabric"] and rep["fabric"]["verdict"]["status"] == "fail":
        rep["ok"] = False


def fabric_lines(fab: Dict[str, Any]) -> List[str]:
    """The verdict line, and the fix when there is one."""
    from jobenv.core.errors import one_line

    v = fab["verdict"]  # host names, NCCL's log and the profile's text may hold control bytes: shown escaped
    lines = [f"fabric {v['status'].upper()}: {one_line(v['says'])}"]
    return lines + ([f"  fix: {one_line(v['fix'])}"] if v["fix"] else [])


def print_fabric(fab: Dict[str, Any]) -> None:
    from jobenv.core.output import print_table

    bw = fab.get("bandwidth") or {}
    rows = [[kind, str(r["ranks"]), f"{bw[kind]['groups']}", _size(r["bytes"]), f"{r['algbw']:.2f}",
             f"{r['busbw']:.2f}"] for kind in ("intra", "inter") if kind in bw for r in bw[kind]["rows"]]
    if rows:
        print("all-reduce bandwidth (GB/s per rank, the slowest group; busbw as nccl-tests: algbw * 2(n-1)/n)")
        print_table(rows, ["between", "ranks", "groups", "size", "algbw", "busbw"])
    print(f"transport ({fab['backend']})")
    from jobenv.core.errors import one_line

    print_table([[one_line(", ".join(t["hosts"][:4]) + (" ..." if len(t["hosts"]) > 4 else "")),
                  one_line(str(t.get("network"))), one_line(_transport_detail(t))] for t in fab["transports"]],
                ["hosts", "network", "detail"])


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def _transport_detail(t: Dict[str, Any]) -> str:
    parts = []
    if t.get("version"):
        parts.append(f"NCCL {t['version']}")
    if t.get("interfaces"):
        parts.append("via " + ", ".join(t["interfaces"][:3]))
    if t.get("net_channels") or t.get("local_channels"):
        parts.append("channels " + ", ".join(t.get("local_channels", []) + t.get("net_channels", [])))
    if t.get("plugin_missing"):
        parts.append("no network plugin found")
    if t.get("ofi"):
        parts.append("OFI " + ", ".join(t["ofi"]))
    if t.get("provider"):
        parts.append(f"FI_PROVIDER={t['provider']}")
    if "set" in t and not t["set"]:
        parts.append("CCL_ATL_TRANSPORT unset (oneCCL's default)")
    if t.get("how"):
        parts.append(f"from {t['how']}")
    if t.get("warnings"):
        parts.append(f"first warning: {t['warnings'][0][:120]}")
    return "; ".join(parts)


def print_report(rep: Dict[str, Any], quiet: bool) -> None:
    """Tables (rich on a terminal, plain columns when piped, never wrapped), then one line."""
    ok = "PASSED" if rep["ok"] else "FAILED"
    line = (f"jobenv selftest {ok}: {plural(rep['world_size'], 'rank')} on {plural(len(rep['ranks_per_host']), 'host')}, "
            f"{rep['framework']} via {rep['launcher']}")
    box = rep.get("container")
    if box:
        from jobenv.core.errors import one_line

        line += f", in container {one_line(box['image'])} ({one_line(box['runtime'])})"
    if rep["failed_checks"]:
        line += f"; failed checks: {rep['failed_checks']}"
    if rep["missing_results"]:
        line += f"; no result from ranks {rep['missing_results']}"
    if (rep.get("fabric") or {}).get("verdict", {}).get("status") == "fail":
        line += "; the fabric check failed"
    fab = rep.get("fabric")
    if quiet:
        for text in fabric_lines(fab) if fab else []:
            print(text)
        print(line, flush=True)
        return
    from jobenv.core.output import print_table

    by_rank = {res["rank"]: res for res in rep["ranks"]}
    print("ranks per host")
    print_table([[host, f"{len(ranks)}: {ranks}", ", ".join(sorted({by_rank[r]["device"] for r in ranks}))]
                 for host, ranks in rep["ranks_per_host"].items()], ["host", "ranks", "devices"])
    print("start-up phases (seconds)")
    print_table([[name, f"{s['min']:.3f}", f"{s['median']:.3f}", f"{s['max']:.3f}", str(s["slowest_rank"]),
                  s["slowest_host"]] for name, s in rep["phases"].items()],
                ["phase", "min", "median", "max", "slowest rank", "on host"])
    print(f"checks on every rank: {', '.join(rep['checks'])}")
    if rep["losses"]:
        print(f"loss: {rep['losses'][0]:.4f} -> {rep['losses'][-1]:.4f} over {len(rep['losses'])} steps")
    if fab:
        print_fabric(fab)
        for text in fabric_lines(fab):
            print(text)
    print(line, flush=True)
