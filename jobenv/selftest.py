"""`launch python3 -m jobenv.selftest`: prove the allocation works before spending it.

Every rank finds its place (jobenv.runtime), checks in with rank 0 (ranks that never
arrive are named), initializes the backend, runs collectives whose results are known in
advance, trains a tiny data-parallel model, and reports phase timings.  Rank 0 prints
the report.  Exit 0 only when every check passed on every rank; 3 on a timeout or a
missing rank; 4 on a setup error (framework missing, bad environment).
"""
import time

T_INTERP = time.time()  # before any import: "interpreter ready"

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from typing import Dict, List, Optional  # noqa: E402

from .runtime import DetectError, DistInfo, detect  # noqa: E402
from .runtime.checkin import CheckinError, Client, Server  # noqa: E402

EXIT_OK, EXIT_FAILED, EXIT_TIMEOUT, EXIT_SETUP = 0, 1, 3, 4
PHASES = ("launch", "interpreter", "imports", "rendezvous", "first_collective", "first_step", "teardown")


def process_start_time() -> Optional[float]:
    """When the OS started this process (wall clock), from /proc: 10 ms resolution."""
    try:
        with open("/proc/self/stat", "rb") as f:
            ticks = int(f.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m jobenv.selftest", description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", choices=["torch", "tensorflow", "mpi"],
                   help="default: torch when installed, else mpi (mpi4py)")
    p.add_argument("--backend", choices=["ddp", "horovod", "deepspeed", "nccl", "xccl", "gloo", "multiworker"],
                   help="torch: ddp (process group from the device: nccl/xccl/gloo), nccl, xccl, gloo, horovod, "
                        "deepspeed; tensorflow: multiworker or horovod")
    p.add_argument("--steps", type=int, default=5, help="training steps (default 5)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds from process start until the run is ended as hung (default 300)")
    p.add_argument("--json", metavar="FILE", help="write the report as JSON (rank 0)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only failures and the summary line")
    return p.parse_args(argv)


def checkin_port(info: DistInfo) -> int:
    """The check-in listens next to the backend's rendezvous port (MASTER_PORT is the backend's)."""
    return info.master_port + 1 if info.master_port < 65535 else info.master_port - 1


class Link:
    """This rank's connection to the check-in barrier (rank 0 holds the server)."""

    def __init__(self, info: DistInfo, host: str, deadline: float) -> None:
        self.info, self.server, self.client = info, None, None
        if info.world_size == 1:
            return
        me = {"rank": info.rank, "host": host, "pid": os.getpid()}
        if info.rank == 0:
            self.server = Server(info.master_addr, checkin_port(info), info.world_size, me)
            missing = self.server.wait_hello(deadline)
            if missing:
                raise CheckinError(f"ranks {_ranks_hosts(missing, info)} never checked in within the timeout; "
                                   f"{info.world_size - len(missing)} of {info.world_size} did")
        else:
            self.client = Client(info.master_addr, checkin_port(info), me, deadline)

    def mark(self, phase: str) -> None:
        (self.server or self.client).mark(phase) if (self.server or self.client) else None

    def not_at(self, phase: str) -> List[int]:
        return self.server.not_at(phase) if self.server else []


def _expected_host(rank: int, info: DistInfo) -> str:
    """Where the launcher places a rank: blocks of local_world_size over the job's hosts."""
    i = rank // max(info.local_world_size, 1)
    return info.hosts[i] if i < len(info.hosts) else "?"


def _ranks_hosts(ranks: List[int], info: DistInfo) -> str:
    return ", ".join(f"{r} (on {_expected_host(r, info)})" for r in ranks)


class Watchdog:
    """Ends the process when a phase outlives the run's deadline, naming who is missing."""

    def __init__(self, info: DistInfo, host: str, link: Link, deadline: float) -> None:
        self.info, self.host, self.link, self.deadline = info, host, link, deadline

    def phase(self, name: str):
        wd = self

        class _Phase:
            def __enter__(self):
                wd.link.mark(name)
                self.timer = threading.Timer(max(0.0, wd.deadline - time.time()), wd.fire, args=(name,))
                self.timer.daemon = True
                self.timer.start()
                self.t0 = time.time()
                return self

            def __exit__(self, *exc):
                self.timer.cancel()
                self.seconds = time.time() - self.t0
                return False

        return _Phase()

    def fire(self, name: str) -> None:
        msg = f"jobenv.selftest: TIMEOUT: phase {name} did not finish before the deadline on rank {self.info.rank} ({self.host})"
        missing = self.link.not_at(name)
        if missing:
            msg += f"; ranks that never reached it: {_ranks_hosts(missing, self.info)}"
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()
        os._exit(EXIT_TIMEOUT)


def _digest(values) -> str:
    return hashlib.sha256(repr([float(v) for v in values]).encode()).hexdigest()[:16]


# ---------------------------------------------------------------- frameworks
# Each returns (comm, device description, import seconds, init seconds) and exposes:
# allreduce(value, op) -> float, broadcast(value) -> float, allgather(str) -> list,
# barrier(), train(steps, wd) -> (losses, first step seconds, parameter digest), close().


class MPIComm:
    def __init__(self, info: DistInfo) -> None:
        t = time.time()
        import mpi4py

        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
        from mpi4py import MPI

        self.imports = time.time() - t
        t = time.time()
        MPI.Init()
        self.init = time.time() - t
        self.MPI, self.comm = MPI, MPI.COMM_WORLD
        if (self.comm.Get_rank(), self.comm.Get_size()) != (info.rank, info.world_size):
            raise DetectError(f"MPI says rank {self.comm.Get_rank()} of {self.comm.Get_size()}, {info.launcher} "
                              f"says {info.rank} of {info.world_size}")
        self.device = f"cpu ({MPI.Get_library_version().splitlines()[0].strip()[:40]})"

    def allreduce(self, value: float, op: str) -> float:
        return self.comm.allreduce(value, op={"sum": self.MPI.SUM, "max": self.MPI.MAX}[op])

    def broadcast(self, value: float) -> float:
        return self.comm.bcast(value, root=0)

    def allgather(self, text: str) -> list:
        return self.comm.allgather(text)

    def barrier(self) -> None:
        self.comm.Barrier()

    def train(self, steps: int, wd: Watchdog):
        """Linear regression by data-parallel SGD in pure Python: gradients summed over ranks."""
        rng = random.Random(1000 + self.comm.Get_rank())
        true_w = [0.5 * (i % 5) - 1.0 for i in range(8)]
        xs = [[rng.gauss(0, 1) for _ in range(8)] for _ in range(64)]
        ys = [sum(a * b for a, b in zip(x, true_w)) + 0.3 for x in xs]
        w, b, lr, n = [0.0] * 8, 0.0, 0.1, self.comm.Get_size()
        losses, first = [], None
        for step in range(steps):
            t = time.time()
            with wd.phase(f"step{step}"):
                preds = [sum(a * c for a, c in zip(x, w)) + b for x in xs]
                errs = [p - y for p, y in zip(preds, ys)]
                grad = [2 * sum(e * x[i] for e, x in zip(errs, xs)) / len(xs) for i in range(8)]
                grad.append(2 * sum(errs) / len(xs))
                loss = sum(e * e for e in errs) / len(xs)
                parts = self.comm.allgather(grad + [loss])
                total = [sum(p[i] for p in parts) / n for i in range(9 + 1)]
                w = [wi - lr * gi for wi, gi in zip(w, total[:8])]
                b -= lr * total[8]
                losses.append(total[9])
            if first is None:
                first = time.time() - t
        return losses, first, _digest(w + [b])

    def close(self) -> None:
        self.MPI.Finalize()


class TorchComm:
    def __init__(self, info: DistInfo, backend: Optional[str], timeout: float) -> None:
        t = time.time()
        import warnings

        # torch warns at import when numpy is absent; the selftest never needs numpy
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch
        import torch.distributed as dist

        self.imports = time.time() - t
        self.torch, self.dist, self.kind = torch, dist, backend or "ddp"
        t = time.time()
        from .runtime import backends

        tinfo = info
        if self.kind == "horovod":
            self.hvd = backends.setup_horovod("torch")
            import horovod.torch as hvd

            self.hvd = hvd
            self.dev = torch.device("cuda", hvd.local_rank()) if torch.cuda.is_available() else torch.device("cpu")
        elif self.kind == "deepspeed":
            os.environ.update(MASTER_ADDR=str(tinfo.master_addr), MASTER_PORT=str(tinfo.master_port))
            backends.setup_deepspeed(timeout=timeout)
            self.dev = self._current_device()
        else:
            pg = None if self.kind == "ddp" else self.kind
            backends.setup_torch(backend=pg, timeout=timeout, info=tinfo)
            self.dev = self._current_device()
        self.init = time.time() - t
        if self.kind == "horovod":
            name = "horovod"
        elif self.kind == "deepspeed":
            name = f"deepspeed, {self.dist.get_backend()}"
        else:
            name = self.dist.get_backend()
        self.device = f"{self.dev} ({name})"

    def _current_device(self):
        torch = self.torch
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        if hasattr(torch, "xpu") and torch.xpu.is_available():
            return torch.device("xpu", torch.xpu.current_device())
        return torch.device("cpu")

    def _tensor(self, value: float):
        return self.torch.tensor([float(value)], dtype=self.torch.float64 if self.dev.type == "cpu" else self.torch.float32, device=self.dev)

    def allreduce(self, value: float, op: str) -> float:
        t = self._tensor(value)
        if self.kind == "horovod":
            return float(self.hvd.allreduce(t, op=self.hvd.Sum if op == "sum" else self.hvd.Max).item())
        self.dist.all_reduce(t, op=self.dist.ReduceOp.SUM if op == "sum" else self.dist.ReduceOp.MAX)
        return float(t.item())

    def broadcast(self, value: float) -> float:
        t = self._tensor(value)
        if self.kind == "horovod":
            return float(self.hvd.broadcast(t, root_rank=0).item())
        self.dist.broadcast(t, src=0)
        return float(t.item())

    def allgather(self, text: str) -> list:
        """Gather short strings as NUL-padded byte tensors: all_gather_object needs numpy."""
        torch = self.torch
        data = list(text.encode())
        longest = int(self.allreduce(len(data), "max"))
        buf = torch.zeros(max(longest, 1), dtype=torch.uint8)
        buf[: len(data)] = torch.tensor(data, dtype=torch.uint8)
        buf = buf.to(self.dev)
        if self.kind == "horovod":
            parts = self.hvd.allgather(buf.unsqueeze(0))
            rows = [parts[i] for i in range(parts.shape[0])]
        else:
            rows = [torch.zeros_like(buf) for _ in range(self.dist.get_world_size())]
            self.dist.all_gather(rows, buf)
        return [bytes(r.cpu().tolist()).rstrip(b"\0").decode() for r in rows]

    def barrier(self) -> None:
        if self.kind == "horovod":
            self.hvd.barrier()
        else:
            self.dist.barrier()

    def train(self, steps: int, wd: Watchdog):
        torch = self.torch
        torch.manual_seed(0)  # same initial weights everywhere; data differs per rank
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(self.dev)
        gen = torch.Generator().manual_seed(1000 + self.rank())
        x = torch.randn(64, 8, generator=gen).to(self.dev)
        y = (x.sum(dim=1, keepdim=True) * 0.5 + 0.3).to(self.dev)
        if self.kind == "horovod":
            opt = torch.optim.SGD(model.parameters(), lr=0.05)
            self.hvd.broadcast_parameters(model.state_dict(), root_rank=0)
            opt = self.hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
            step_fn = lambda loss: (opt.zero_grad(), loss.backward(), opt.step())  # noqa: E731
            net = model
        elif self.kind == "deepspeed":
            import deepspeed

            net, opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config={
                "train_micro_batch_size_per_gpu": 64, "optimizer": {"type": "SGD", "params": {"lr": 0.05}},
                "steps_per_print": 10 ** 9})
            step_fn = lambda loss: (net.backward(loss), net.step())  # noqa: E731
        else:
            from torch.nn.parallel import DistributedDataParallel as DDP

            net = DDP(model, device_ids=[self.dev.index] if self.dev.type == "cuda" else None)
            opt = torch.optim.SGD(net.parameters(), lr=0.05)
            step_fn = lambda loss: (opt.zero_grad(), loss.backward(), opt.step())  # noqa: E731
        losses, first = [], None
        for step in range(steps):
            t = time.time()
            with wd.phase(f"step{step}"):
                loss = torch.nn.functional.mse_loss(net(x), y)
                step_fn(loss)
                losses.append(self.allreduce(float(loss.item()), "sum") / self.size())
            if first is None:
                first = time.time() - t
        params = [v for p in model.parameters() for v in p.detach().cpu().flatten().tolist()]
        return losses, first, _digest(params)

    def rank(self) -> int:
        return self.hvd.rank() if self.kind == "horovod" else self.dist.get_rank()

    def size(self) -> int:
        return self.hvd.size() if self.kind == "horovod" else self.dist.get_world_size()

    def close(self) -> None:
        if self.kind == "horovod":
            self.hvd.shutdown()
        else:
            from .runtime import backends

            backends.cleanup()


def make_comm(framework: str, backend: Optional[str], info: DistInfo, timeout: float):
    from .runtime.backends import ensure_installed

    if framework == "mpi":
        ensure_installed("mpi4py", "mpi4py")
        return MPIComm(info)
    if framework == "tensorflow":
        ensure_installed("tensorflow", "tensorflow")
        from .tfcheck import TFComm

        return TFComm(info, backend)
    ensure_installed("torch", "torch")
    return TorchComm(info, backend, timeout)


def default_framework() -> str:
    import importlib.util

    return "torch" if importlib.util.find_spec("torch") is not None else "mpi"


# ---------------------------------------------------------------- one rank


def run_rank(args, info: DistInfo, host: str, t_start: Optional[float], deadline: float, link: Link,
             t_checkin: float) -> dict:
    wd = Watchdog(info, host, link, deadline)
    framework = args.framework or default_framework()
    with wd.phase("backend_init"):
        comm = make_comm(framework, args.backend, info, max(1.0, deadline - time.time()) + 30)
    phases: Dict[str, Optional[float]] = {}
    launch_t = os.environ.get("JOBENV_LAUNCH_TIME")
    try:
        phases["launch"] = max(0.0, t_start - float(launch_t)) if (launch_t and t_start) else None
    except ValueError:
        phases["launch"] = None
    phases["interpreter"] = (T_INTERP - t_start) if t_start else None
    phases["imports"] = comm.imports
    phases["rendezvous"] = t_checkin + comm.init
    n, r = info.world_size, info.rank
    checks: Dict[str, bool] = {}
    with wd.phase("first_collective") as ph:
        checks["allreduce_sum"] = comm.allreduce(r + 1, "sum") == n * (n + 1) / 2
    phases["first_collective"] = ph.seconds
    t_first_allreduce = time.time()
    checks["allreduce_max"] = comm.allreduce(r, "max") == n - 1
    with wd.phase("broadcast"):
        checks["broadcast"] = comm.broadcast(4242.0 + n if r == 0 else -1.0) == 4242.0 + n
    with wd.phase("allgather"):
        hosts = comm.allgather(host)
    checks["allgather_hosts"] = len(hosts) == n and hosts[r] == host
    with wd.phase("barrier"):
        comm.barrier()
    checks["barrier"] = True
    losses, first_step, digest = comm.train(args.steps, wd)
    phases["first_step"] = first_step
    with wd.phase("digests"):
        digests = comm.allgather(digest)
    checks["loss_decreases"] = len(losses) >= 2 and losses[-1] < losses[0]
    checks["params_identical"] = len(set(digests)) == 1
    t = time.time()
    comm.close()
    phases["teardown"] = time.time() - t
    return {"rank": r, "host": host, "local_rank": info.local_rank, "node_rank": info.node_rank,
            "device": comm.device, "framework": framework, "launcher": info.launcher,
            "phases": phases, "checks": checks, "losses": losses, "rank_host_map": hosts,
            "start_to_first_allreduce": (t_first_allreduce - t_start) if t_start else None}


# ---------------------------------------------------------------- report


def summarize(results: Dict[int, dict], info: DistInfo) -> dict:
    ranks = [results[r] for r in sorted(results)]
    per_host: Dict[str, List[int]] = {}
    for res in ranks:
        per_host.setdefault(res["host"], []).append(res["rank"])
    phases = {}
    for name in PHASES + ("start_to_first_allreduce",):
        vals = [(res["phases"].get(name) if name in PHASES else res.get(name), res) for res in ranks]
        vals = [(v, res) for v, res in vals if v is not None]
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


def print_report(rep: dict, quiet: bool) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # rich is a core dependency, but the selftest must still report
        Console = None
    ok = "PASSED" if rep["ok"] else "FAILED"
    line = (f"jobenv selftest {ok}: {rep['world_size']} ranks on {len(rep['ranks_per_host'])} host(s), "
            f"{rep['framework']} via {rep['launcher']}")
    if rep["failed_checks"]:
        line += f"; failed checks: {rep['failed_checks']}"
    if rep["missing_results"]:
        line += f"; no result from ranks {rep['missing_results']}"
    if quiet or Console is None:
        print(line, flush=True)
        return
    con = Console(highlight=False, markup=False, emoji=False, soft_wrap=True)
    t = Table(title="ranks per host", box=None)
    for c in ("host", "ranks", "devices"):
        t.add_column(c)
    by_rank = {res["rank"]: res for res in rep["ranks"]}
    for host, ranks in rep["ranks_per_host"].items():
        t.add_row(host, f"{len(ranks)}: {ranks}", ", ".join(sorted({by_rank[r]['device'] for r in ranks})))
    con.print(t)
    p = Table(title="start-up phases (seconds)", box=None)
    for c in ("phase", "min", "median", "max", "slowest rank", "on host"):
        p.add_column(c)
    for name, s in rep["phases"].items():
        p.add_row(name, f"{s['min']:.3f}", f"{s['median']:.3f}", f"{s['max']:.3f}", str(s["slowest_rank"]), s["slowest_host"])
    con.print(p)
    checks = ", ".join(rep["checks"])
    con.print(f"checks on every rank: {checks}")
    if rep["losses"]:
        con.print(f"loss: {rep['losses'][0]:.4f} -> {rep['losses'][-1]:.4f} over {len(rep['losses'])} steps")
    con.print(line)


# ---------------------------------------------------------------- main


def main(argv=None) -> int:
    args = parse_args(argv)
    t_start = process_start_time()
    deadline = (t_start or T_INTERP) + args.timeout
    from .hostlist import this_host

    host = this_host()
    try:
        info = detect()
        if info.master_addr is None:
            from .runtime import _NO_ADDR

            raise DetectError(_NO_ADDR)
    except DetectError as exc:
        sys.stderr.write(f"jobenv.selftest: error: {exc}\n")
        return EXIT_SETUP
    t = time.time()
    try:
        link = Link(info, host, deadline)
    except CheckinError as exc:
        sys.stderr.write(f"jobenv.selftest: TIMEOUT: {exc}\n")
        return EXIT_TIMEOUT
    t_checkin = time.time() - t
    try:
        result = run_rank(args, info, host, t_start, deadline, link, t_checkin)
    except (DetectError, ImportError, CheckinError) as exc:
        sys.stderr.write(f"jobenv.selftest: error on rank {info.rank} ({host}): {exc}\n")
        return EXIT_SETUP
    except Exception as exc:  # a collective failed (a peer died, a backend error): say where
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        sys.stderr.write(f"jobenv.selftest: FAILED on rank {info.rank} ({host}): {type(exc).__name__}: {msg}\n")
        return EXIT_FAILED
    own_ok = all(result["checks"].values())
    if link.client:
        link.client.send_result(result)
        link.client.close()
        return EXIT_OK if own_ok else EXIT_FAILED
    results = {0: result}
    if link.server:
        link.server.add_result(result)
        results = link.server.wait_results(min(deadline, time.time() + 30))
        link.server.close()
    rep = summarize(results, info)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rep, f, indent=2)
    print_report(rep, args.quiet)
    return EXIT_OK if rep["ok"] else EXIT_FAILED


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    if "torch" in sys.modules:
        # torch's store and gloo threads can abort the process during C++ static
        # destruction ("terminate called without an active exception") after a clean
        # teardown, so skip it.  Not for MPI: MPICH's Hydra kills the other ranks when
        # one leaves without its exit-time clean-up.
        os._exit(code)
    sys.exit(code)
