"""Rank 0's summary of every rank's result, as JSON and as tables."""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Tuple

from ..runtime import DistInfo
from . import PHASES


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
            "losses": ranks[0]["losses"] if ranks else [], "ranks": ranks}


def print_report(rep: Dict[str, Any], quiet: bool) -> None:
    """Tables (rich on a terminal, plain columns when piped, never wrapped), then one line."""
    ok = "PASSED" if rep["ok"] else "FAILED"
    line = (f"jobenv selftest {ok}: {rep['world_size']} ranks on {len(rep['ranks_per_host'])} host(s), "
            f"{rep['framework']} via {rep['launcher']}")
    if rep["failed_checks"]:
        line += f"; failed checks: {rep['failed_checks']}"
    if rep["missing_results"]:
        line += f"; no result from ranks {rep['missing_results']}"
    if quiet:
        print(line, flush=True)
        return
    from ..output import print_table

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
    print(line, flush=True)
