"""All-reduce bus bandwidth within hosts and between hosts, as nccl-tests reports it.

nccl-tests' busbw = algbw * 2(n-1)/n (algbw: bytes / seconds), the rate each rank's link
must carry in a ring all-reduce, comparable with the link's speed whatever n is.  Two
kinds of groups run at once, so that every link carries what training puts on it: the
ranks of each host (intra) and, for each local index i, the i-th rank of every host
(inter: each rank's traffic leaves its host).  Every rank creates every group in the same
order (torch.distributed's rule), times its own group, and the figure kept per size is
the slowest group's (a world-wide minimum), so every rank reports the same numbers.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Sequence, Tuple

SIZES_GPU = (1 << 20, 16 << 20, 128 << 20)
SIZES_CPU = (64 << 10, 1 << 20, 8 << 20)
ITERS = 5


def busbw_factor(n: int) -> float:
    """nccl-tests' all-reduce factor: 0 for one rank (nothing crosses a link)."""
    return 2.0 * (n - 1) / n if n > 0 else 0.0


def plan_groups(hosts: Sequence[str]) -> Tuple[List[List[int]], List[List[int]]]:
    """(intra, inter) groups of ranks from each rank's host (in rank order); groups of one
    rank are left out: they measure no link."""
    by_host: Dict[str, List[int]] = {}
    for rank, host in enumerate(hosts):
        by_host.setdefault(host, []).append(rank)
    columns = max((len(r) for r in by_host.values()), default=0)
    intra = [ranks for ranks in by_host.values() if len(ranks) > 1]
    inter = [[ranks[i] for ranks in by_host.values() if len(ranks) > i] for i in range(columns)]
    return intra, [g for g in inter if len(g) > 1]


def measure(comm: Any, hosts: Sequence[str], sizes: Sequence[int] = (), iters: int = ITERS) -> Dict[str, Any]:
    """{"intra": [...], "inter": [...]}: per size, the slowest group's busbw and algbw in GB/s
    (10**9 bytes per second, as nccl-tests) and that group's rank count.  `comm` is the
    selftest's torch adapter (its dist, torch and device)."""
    dist, torch, dev = comm.dist, comm.torch, comm.dev
    sizes = sizes or (SIZES_GPU if dev.type != "cpu" else SIZES_CPU)
    me = dist.get_rank()
    out: Dict[str, Any] = {}
    for kind, groups in zip(("intra", "inter"), plan_groups(hosts)):
        handles = [dist.new_group(g) for g in groups]
        mine = [(h, len(g)) for h, g in zip(handles, groups) if me in g]
        rows = []
        for size in sizes:
            busbw = algbw = float("inf")
            n = 0
            if mine:
                group, n = mine[0]
                seconds = _time_allreduce(torch, dist, group, dev, size, iters)
                algbw = size / seconds / 1e9
                busbw = algbw * busbw_factor(n)
            # the slowest group's figure, on every rank (a minimum as the maximum of negatives)
            worst_bus = -comm.allreduce(-busbw if mine else -1e30, "max")
            worst_alg = -comm.allreduce(-algbw if mine else -1e30, "max")
            ranks = int(comm.allreduce(n, "max"))
            if groups:
                rows.append({"bytes": size, "busbw": worst_bus, "algbw": worst_alg, "ranks": ranks})
        out[kind] = {"groups": len(groups), "rows": rows}
    return out


def _time_allreduce(torch: Any, dist: Any, group: Any, dev: Any, size: int, iters: int) -> float:
    """Seconds per all-reduce of `size` bytes of float32 in `group`, after one warm-up."""
    buf = torch.ones(max(1, size // 4), dtype=torch.float32, device=dev)
    dist.all_reduce(buf, group=group)  # warm-up: connections and buffers are set up here
    _sync(torch, dev)
    dist.all_reduce(torch.ones(1, device=dev), group=group)  # a barrier on the group's own device
    _sync(torch, dev)
    t = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf, group=group)
    _sync(torch, dev)
    return (time.perf_counter() - t) / iters


def _sync(torch: Any, dev: Any) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "xpu":
        torch.xpu.synchronize(dev)


def at_largest(rows: List[Dict[str, Any]]) -> Any:
    """The bus bandwidth at the largest message size (the one a fabric's floor is judged by)."""
    return max(rows, key=lambda r: r["bytes"])["busbw"] if rows else None
