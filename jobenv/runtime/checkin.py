"""A check-in barrier that names the ranks that never arrived.

Backends' own rendezvous (MPI_Init, TCPStore, NCCL) wait silently when a rank is
missing.  Before any of them, every rank opens one TCP connection to rank 0 and says
hello; rank 0 answers `go` once all have, or `abort` naming the missing ranks at the
deadline.  The connections stay open: ranks report each phase they enter (`at`) and
their results, so a hang is reported with the ranks that never reached the phase.
Standard library only; one line of text per message.
"""
from __future__ import annotations

import errno
import json
import selectors
import socket
import threading
import time
from typing import Any, Dict, List, Set

from .info import MAX_PORT, DistInfo


class CheckinError(RuntimeError):
    pass


def checkin_port(info: DistInfo) -> int:
    """The check-in listens next to the backend's rendezvous port (MASTER_PORT is the backend's)."""
    return port_beside(info.master_port)


def port_beside(port: int) -> int:
    """The port next to `port` (below it at the top of the range); doctor checks it is free too."""
    return port + 1 if port < MAX_PORT else port - 1


def expected_host(rank: int, info: DistInfo) -> str:
    """Where the launcher places a rank: blocks of local_world_size over the job's hosts."""
    i = rank // max(info.local_world_size, 1)
    return info.hosts[i] if i < len(info.hosts) else "?"


def ranks_hosts(ranks: List[int], info: DistInfo) -> str:
    return ", ".join(f"{r} (on {expected_host(r, info)})" for r in ranks)


def check_in(info: DistInfo, host: str, timeout: float) -> None:
    """Every rank says hello to rank 0 before a backend's silent rendezvous; within
    `timeout` seconds rank 0 answers go, or everyone fails naming the missing ranks and
    their hosts (what `jobenv.setup_torch()` and the selftest tell a user whose rank
    never started).  One rank: nothing to do."""
    if info.world_size == 1:
        return
    import os

    addr = info.master_addr
    if addr is None:
        raise CheckinError("no rendezvous host to check in at: set MASTER_ADDR")
    deadline = time.time() + timeout
    me = {"rank": info.rank, "host": host, "pid": os.getpid()}
    if info.rank == 0:
        server = Server(addr, checkin_port(info), info.world_size, me)
        try:
            missing = server.wait_hello(deadline)
        finally:
            server.close()
        if missing:
            raise CheckinError(f"ranks {ranks_hosts(missing, info)} never checked in within {timeout:g} s; "
                               f"{info.world_size - len(missing)} of {info.world_size} did")
        return
    try:
        Client(addr, checkin_port(info), me, deadline).close()
    except CheckinError as exc:
        text = str(exc)
        if "never checked in" in text and "[" in text:
            missing = json.loads(text[text.rindex("["):text.rindex("]") + 1])
            text = text[:text.rindex("[")] + ranks_hosts(missing, info) + " never checked in"
        raise CheckinError(text) from None


class Server:
    """Rank 0's side: accepts one connection per other rank."""

    def __init__(self, addr: str, port: int, world_size: int, me: Dict[str, Any]) -> None:
        self.world_size = world_size
        self.hello: Dict[int, Dict[str, Any]] = {0: me}
        self.at: Dict[str, Set[int]] = {}
        self.results: Dict[int, Dict[str, Any]] = {}
        self.conns: Dict[int, socket.socket] = {}
        self.cond = threading.Condition()
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        # TIME_WAIT from a previous run is not "in use"; a live listener still is
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((addr, port))
        except OSError as exc:
            self.sock.close()
            if exc.errno == errno.EADDRINUSE:
                raise CheckinError(f"rendezvous port {port} on {addr} is already in use (another job, or a "
                                   "leftover process?); set MASTER_PORT to a free port") from None
            if exc.errno == errno.EADDRNOTAVAIL:
                raise CheckinError(f"rank 0 runs on {socket.gethostname()}, but the rendezvous address {addr} "
                                   "is not on this host; set MASTER_ADDR to rank 0's host") from None
            raise CheckinError(f"cannot listen on {addr}:{port}: {exc}") from None
        self.sock.listen(max(world_size, 16))
        self.sock.setblocking(False)
        self._stop = False
        self.thread = threading.Thread(target=self._serve, name="jobenv-checkin", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ, None)
        buffers: Dict[socket.socket, bytes] = {}
        while not self._stop:
            for key, _ in sel.select(timeout=0.2):
                if key.data is None:
                    try:
                        conn, _ = self.sock.accept()
                    except OSError:
                        continue
                    conn.setblocking(False)
                    buffers[conn] = b""
                    sel.register(conn, selectors.EVENT_READ, "c")
                    continue
                conn = key.fileobj  # type: ignore[assignment]  # we registered sockets only
                try:
                    chunk = conn.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(conn)
                    buffers.pop(conn, None)
                    continue
                buffers[conn] += chunk
                while b"\n" in buffers[conn]:
                    line, buffers[conn] = buffers[conn].split(b"\n", 1)
                    self._handle(conn, line.decode("utf-8", "replace"))

    def _handle(self, conn: socket.socket, line: str) -> None:
        kind, _, rest = line.partition(" ")
        with self.cond:
            if kind == "hello":
                info = json.loads(rest)
                self.hello[int(info["rank"])] = info
                self.conns[int(info["rank"])] = conn
            elif kind == "at":
                rank, _, phase = rest.partition(" ")
                self.at.setdefault(phase, set()).add(int(rank))
            elif kind == "result":
                res = json.loads(rest)
                self.results[int(res["rank"])] = res
            self.cond.notify_all()

    def _send_all(self, text: str) -> None:
        for conn in list(self.conns.values()):
            try:
                conn.setblocking(True)
                conn.sendall(text.encode() + b"\n")
            except OSError:
                pass

    def wait_hello(self, deadline: float) -> List[int]:
        """Wait for every rank; tell them go (returns []) or abort (returns the missing)."""
        with self.cond:
            self.cond.wait_for(lambda: len(self.hello) >= self.world_size, max(0.0, deadline - time.time()))
            missing = [r for r in range(self.world_size) if r not in self.hello]
        self._send_all("go" if not missing else "abort " + json.dumps(missing))
        return missing

    def mark(self, phase: str) -> None:
        with self.cond:
            self.at.setdefault(phase, set()).add(0)

    def not_at(self, phase: str) -> List[int]:
        with self.cond:
            return [r for r in range(self.world_size) if r not in self.at.get(phase, set())]

    def wait_results(self, deadline: float) -> Dict[int, Dict[str, Any]]:
        with self.cond:
            self.cond.wait_for(lambda: len(self.results) >= self.world_size, max(0.0, deadline - time.time()))
            return dict(self.results)

    def add_result(self, res: Dict[str, Any]) -> None:
        with self.cond:
            self.results[int(res["rank"])] = res
            self.cond.notify_all()

    def close(self) -> None:
        self._stop = True
        self.thread.join(timeout=1.0)
        for conn in self.conns.values():
            conn.close()
        self.sock.close()


class Client:
    """Every other rank's side."""

    def __init__(self, addr: str, port: int, me: Dict[str, Any], deadline: float) -> None:
        last = None
        while True:
            try:
                self.sock = socket.create_connection((addr, port), timeout=max(0.1, min(2.0, deadline - time.time())))
                break
            except OSError as exc:  # rank 0 not listening yet: retry until the deadline
                last = exc
                if time.time() >= deadline:
                    raise CheckinError(
                        f"rank {me['rank']} on {me['host']}: rank 0 did not answer at {addr}:{port} "
                        f"({last}); did rank 0 start, and do MASTER_ADDR/MASTER_PORT point at it?") from None
                time.sleep(0.05)
        self.sock.settimeout(None)
        self.me = me
        self._send("hello " + json.dumps(me))
        self.sock.settimeout(max(0.1, deadline - time.time()))
        try:
            reply = self.sock.makefile("r").readline().strip()
        except socket.timeout:
            raise CheckinError(f"rank {me['rank']}: no word from rank 0 before the deadline") from None
        self.sock.settimeout(None)
        if reply.startswith("abort"):
            missing = json.loads(reply.split(" ", 1)[1])
            raise CheckinError(f"rank {me['rank']}: aborted by rank 0: ranks {missing} never checked in")
        if reply != "go":
            raise CheckinError(f"rank {me['rank']}: rank 0 went away during check-in")

    def _send(self, text: str) -> None:
        self.sock.sendall(text.encode() + b"\n")

    def mark(self, phase: str) -> None:
        try:
            self._send(f"at {self.me['rank']} {phase}")
        except OSError:
            pass

    def send_result(self, res: Dict[str, Any]) -> None:
        try:
            self._send("result " + json.dumps(res))
        except OSError:
            pass

    def close(self) -> None:
        self.sock.close()
