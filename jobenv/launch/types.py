"""launch's own data types: how to launch (`Options`) and its time limits (`Limits`), in a
module of their own so that the modules that read them (attempt, report, clocks) need not
import the modules that act on them (command, supervise), which import those readers.
"""
from __future__ import annotations

from .sizing import Request

TYPE_CHECKING = False  # `import typing`/`dataclasses` cost ~50 ms: `launch` starts on every run
if TYPE_CHECKING:
    from typing import AbstractSet, List, Optional


class Limits:
    """--timeout and --idle-timeout (seconds; None: no limit), which jobenv.launch.clocks watches."""

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
                 master_port: Optional[int] = None, launcher: Optional[str] = None,
                 allow_mismatch: bool = False) -> None:
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
        self.requeue, self.grace = requeue, grace  # pre-emption: jobenv.launch.preempt
        self.module = module  # -m: the command is a module the job's Python runs (jobenv.launch.program)
        self.local_rank_arg = local_rank_arg  # each rank's program gets DeepSpeed's --local_rank=N
        self.standalone = standalone  # torchrun's --standalone: this host alone (jobenv.fastlaunch)
        # torchrun's --master-addr/--master-port (--rdzv-endpoint): the ranks' MASTER_ADDR/PORT as given
        self.master_addr, self.master_port = master_addr, master_port
        self.launcher = launcher  # --launcher PATH|family: this launch's launcher (launch.software)
        self.allow_mismatch = allow_mismatch  # launch even when worlds.misfits finds a split world

    @property
    def failover(self) -> bool:
        """A failed host is retired and replaced on a retry (--spare-nodes, --exclude-failed:
        then the job's hosts this launch does not use are its spares)."""
        return self.retries > 0 and (self.spares > 0 or self.exclude_failed)
