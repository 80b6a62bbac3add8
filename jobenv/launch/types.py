"""launch's own data types: what the user asked for (`Request`), how to launch (`Options`),
its time limits (`Limits`) and what the supervisor needs for pre-emption (`Preempt`), in a
module of their own so that the modules that read them (attempt, report, clocks) need not
import the modules that act on them (command, supervise), which import those readers.
"""
from __future__ import annotations


TYPE_CHECKING = False  # `import typing`/`dataclasses` cost ~50 ms: `launch` starts on every run
if TYPE_CHECKING:
    from typing import AbstractSet, Any, Callable, List, Optional, Sequence, Tuple


class Request:
    """What the user asked for; None means "as the job was saved"."""

    __slots__ = ("nranks", "ppn", "nhosts", "hosts", "exclude")

    def __init__(self, nranks: Optional[int] = None, ppn: Optional[int] = None, nhosts: Optional[int] = None,
                 hosts: Optional[str] = None, exclude: Optional[str] = None) -> None:
        self.nranks, self.ppn, self.nhosts = nranks, ppn, nhosts
        self.hosts, self.exclude = hosts, exclude  # hostlist syntax

    def replace(self, **changes: Any) -> "Request":
        values = {k: getattr(self, k) for k in self.__slots__}
        values.update(changes)
        return Request(**values)

    def __repr__(self) -> str:
        return "Request(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


class Preempt:
    """What the supervisor needs: the signals that mean pre-emption, the grace, and how to
    tell the ranks (called once, from the supervisor's loop, with the signal)."""

    def __init__(self, signals: Tuple[int, ...], grace: float, deliver: Callable[[int], None]) -> None:
        self.signals, self.grace, self.deliver = signals, grace, deliver


class ContainerRequest:
    """What `--container` asked for (jobenv.launch.plan.container decides the rest): the image, the runtime (None: the default), the binds."""

    def __init__(self, image: str, runtime: Optional[str] = None, binds: Sequence[str] = (), gpu: str = "") -> None:
        self.image, self.runtime, self.binds, self.gpu = image, runtime, list(binds), gpu


class Limits:
    """--timeout and --idle-timeout (seconds; None: no limit), which jobenv.launch.watch.clocks watches."""

    def __init__(self, timeout: Optional[float] = None, idle_timeout: Optional[float] = None) -> None:
        self.timeout, self.idle_timeout = timeout, idle_timeout


class Options:
    """How to launch, beyond the command: sizing, pass-through flags, supervision."""

    def __init__(self, request: Optional[Request] = None, launcher_args: Optional[List[str]] = None,
                 label: bool = False, log_dir: Optional[str] = None, limits: Optional[Limits] = None,
                 retries: int = 0, exclude_failed: bool = False, gpu_bind: bool = False,
                 python: bool = True, spares: int = 0, tee: Optional[AbstractSet[int]] = frozenset({0}),
                 hook: bool = True, requeue: bool = False, grace: Optional[float] = None,
                 stacks: bool = False, module: bool = False, local_rank_arg: bool = False,
                 standalone: bool = False, master_addr: Optional[str] = None,
                 master_port: Optional[int] = None, container: Optional[ContainerRequest] = None,
                 launcher: Optional[str] = None, allow_mismatch: bool = False) -> None:
        self.request = request or Request()
        self.launcher_args = list(launcher_args or [])
        self.label, self.log_dir = label, log_dir
        self.limits = limits or Limits()
        self.retries, self.exclude_failed = retries, exclude_failed
        self.gpu_bind, self.python = gpu_bind, python  # gpu_bind: use the profile's binding
        self.spares = spares  # --spare-nodes: hosts held out of the first attempt
        self.tee = tee  # with log_dir: the ranks whose output the terminal gets too (None: all)
        self.hook = hook  # the ranks' Python hook (jobenv/rankhook) first on their PYTHONPATH
        self.stacks = stacks  # the hook arms faulthandler for the dump signal (launch --stacks)
        self.requeue, self.grace = requeue, grace  # pre-emption: jobenv.launch.requeue.preempt
        self.module = module  # -m: the command is a module the job's Python runs (jobenv.launch.plan.program)
        self.local_rank_arg = local_rank_arg  # each rank's program gets DeepSpeed's --local_rank=N
        self.standalone = standalone  # torchrun's --standalone: this host alone (jobenv.launchflow)
        # torchrun's --master-addr/--master-port (--rdzv-endpoint): the ranks' MASTER_ADDR/PORT as given
        self.master_addr, self.master_port = master_addr, master_port
        self.container = container  # --container IMAGE: each rank's program runs in it (jobenv.launch.plan.container)
        self.launcher = launcher  # --launcher PATH|family: this launch's launcher (launch.plan.launcher)
        self.allow_mismatch = allow_mismatch  # launch even when plan.worlds.misfits finds a split world

    @property
    def failover(self) -> bool:
        """A failed host is retired and replaced on a retry (--spare-nodes, --exclude-failed:
        then the job's hosts this launch does not use are its spares)."""
        return self.retries > 0 and (self.spares > 0 or self.exclude_failed)
