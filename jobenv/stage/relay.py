"""Staging as a broadcast: the shared file system is read once per job, not once per host.

The stage's workers (one per host, started by the job's launcher) form a k-ary tree over
the job's host list: host i's parent is (i-1)//k.  Only the root reads the archive from the
shared file system; every other host receives it over TCP from its parent, spools it to its
own stage directory while already forwarding what it has to its children (cut-through, so a
hop adds latency, not a second full transfer), and checks size and SHA-256 against the
sidecar before the worker unpacks and compares it as before.

Demand flows up, bytes flow down: a host asks its parent for the archive (`G`) only when it
or one of its children needs a copy, and otherwise says `S` (skip) once all its children
have answered, so a re-stage with nothing changed reads nothing at all.

Trust: every connection is authenticated both ways by HMAC over fresh nonces with a secret
that `jobenv stage` writes (0600, O_EXCL) into its private relay directory in the store;
another local user can neither download the environment nor push one (the SHA-256 check
would refuse it anyway).  The relay directory also holds each worker's listening port
(`<i>.port`, written atomically).

Tolerance: a host whose parent does not appear within `wait` seconds, refuses, or breaks
off reads the rest from the shared file system itself (reported as a fallback, with the
bytes it read), and still serves its own children.  Stdlib only (runs in the worker).

The relay directory, the tree's shape and the secret (what `jobenv stage` makes on the launch
host before any worker runs) are jobenv.stage.relaydir; this module is the wire protocol.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import socket
import struct
import threading
import time
from typing import BinaryIO, Dict, List, Optional

from .relaydir import RelayError, children, parent, read_secret

CHUNK = 1 << 20
MAGIC = b"JER1"
NONCE = 16
MAC = 32


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        got = sock.recv(n - len(buf))
        if not got:
            raise RelayError("connection closed early")
        buf += got
    return buf


def _mac(secret: bytes, side: bytes, a: bytes, b: bytes) -> bytes:
    return hmac.new(secret, side + a + b, hashlib.sha256).digest()


class Node:
    """One host's place in the tree: its server for its children and its one fetch."""

    def __init__(self, rdir: str, secret: bytes, hosts: List[str], index: int, k: int,
                 archive: str, total: int, sha: str, spool: str, wait: float) -> None:
        self.rdir, self.secret, self.hosts, self.index = rdir, secret, hosts, index
        self.archive, self.total, self.sha, self.spool, self.wait = archive, total, sha, spool, wait
        self.parent = parent(index, k)
        self.kids = children(index, k, len(hosts))
        self.cond = threading.Condition()
        self.have, self.state, self.error = 0, "idle", ""  # idle, fetching, done, failed
        self.answered: Dict[int, bytes] = {}
        self.streams = 0
        self.source, self.shared_bytes, self.fallback = "", 0, ""
        self.sent = 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("", 0))
        self.sock.listen(max(8, 2 * k))
        self.sock.settimeout(0.5)
        port = self.sock.getsockname()[1]
        tmp = os.path.join(rdir, f".{index}.port.{os.getpid()}")
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.rename(tmp, os.path.join(rdir, f"{index}.port"))
        self.closing = False
        self.deadline = time.time() + wait
        threading.Thread(target=self._accept, daemon=True).start()

    # ------------------------------------------------------------------ serving children
    def _accept(self) -> None:
        while not self.closing:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(self.wait)
                ns = os.urandom(NONCE)
                conn.sendall(MAGIC + ns)
                hello = _recv(conn, 4 + NONCE + MAC + 1)
                who, nc, mac, want = struct.unpack("!I", hello[:4])[0], hello[4:4 + NONCE], hello[4 + NONCE:-1], hello[-1:]
                if not hmac.compare_digest(mac, _mac(self.secret, b"c", ns, nc + hello[:4] + want)) or who not in self.kids:
                    return  # not one of ours: say nothing more
                conn.sendall(_mac(self.secret, b"s", nc, ns))
                with self.cond:  # counted as a stream before `finish` can see the answer
                    self.answered[who] = want
                    self.streams += want == b"G"
                    self.cond.notify_all()
                if want != b"G":
                    return
                try:
                    self.start_fetch()
                    conn.sendall(struct.pack("!Q", self.total))
                    self._stream(conn)
                finally:
                    with self.cond:
                        self.streams -= 1
                        self.cond.notify_all()
            except (OSError, RelayError):
                return

    def _stream(self, conn: socket.socket) -> None:
        with open(self._spool_ready(), "rb") as f:
            off = 0
            while off < self.total:
                with self.cond:
                    while self.have <= off and self.state == "fetching":
                        self.cond.wait(1.0)
                    if self.have <= off:
                        raise RelayError("fetch failed")  # state failed: the child falls back
                    upto = self.have
                while off < upto:
                    data = os.pread(f.fileno(), min(CHUNK, upto - off), off)
                    conn.sendall(data)
                    off += len(data)
                    with self.cond:
                        self.sent += len(data)

    def _spool_ready(self) -> str:
        with self.cond:
            while not os.path.exists(self.spool) and self.state == "fetching":
                self.cond.wait(0.2)
        return self.spool

    # ------------------------------------------------------------------ the one fetch
    def start_fetch(self) -> None:
        with self.cond:
            if self.state != "idle":
                return
            self.state = "fetching"
        threading.Thread(target=self._fetch, daemon=True).start()

    def fetched(self) -> str:
        """Start the fetch (if not yet) and wait for it: the verified spool's path."""
        self.start_fetch()
        with self.cond:
            while self.state == "fetching":
                self.cond.wait(1.0)
            if self.state != "done":
                raise RelayError(self.error)
        return self.spool

    def _fetch(self) -> None:
        h = hashlib.sha256()
        try:
            fd = os.open(self.spool, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                if self.parent is None:
                    self.source = "shared"
                else:
                    try:
                        self.source = "parent"
                        self._from_parent(out, h)
                    except (OSError, RelayError) as exc:
                        self.source, self.fallback = "fallback", f"{self.hosts[self.parent]}: {exc}"
                if self.have < self.total:
                    self._from_shared(out, h)
            if h.hexdigest() != self.sha:
                raise RelayError(f"archive hash {h.hexdigest()[:12]} != {self.sha[:12]} ({self.source})")
            state, err = "done", ""
        except (OSError, RelayError) as exc:
            state, err = "failed", str(exc) if isinstance(exc, RelayError) else f"spool {self.spool}: {exc.strerror}"
        with self.cond:
            self.state, self.error = state, err
            self.cond.notify_all()

    def _grow(self, out: BinaryIO, h: "hashlib._Hash", data: bytes) -> None:
        out.write(data)
        out.flush()
        h.update(data)
        with self.cond:
            self.have += len(data)
            self.cond.notify_all()

    def _from_shared(self, out: BinaryIO, h: "hashlib._Hash") -> None:
        """The rest of the archive (all of it, unless a parent broke off) from the shared file system."""
        with open(self.archive, "rb") as f:
            f.seek(self.have)
            while self.have < self.total:
                data = f.read(min(CHUNK, self.total - self.have))
                if not data:
                    raise RelayError(f"{self.archive} is shorter than the sidecar says")
                self.shared_bytes += len(data)
                self._grow(out, h, data)

    def _from_parent(self, out: BinaryIO, h: "hashlib._Hash") -> None:
        conn = self._connect(self.parent if self.parent is not None else 0, b"G")
        with conn:
            (size,) = struct.unpack("!Q", _recv(conn, 8))
            if size != self.total:
                raise RelayError(f"parent sends {size} bytes, the sidecar says {self.total}")
            while self.have < self.total:
                data = conn.recv(min(CHUNK, self.total - self.have))
                if not data:
                    raise RelayError("parent broke off")
                self._grow(out, h, data)

    def _connect(self, who: int, want: bytes) -> socket.socket:
        """An authenticated connection to host `who` (its port file waited for until the deadline)."""
        pfile = os.path.join(self.rdir, f"{who}.port")
        while True:
            try:
                with open(pfile) as f:
                    port = int(f.read(16).strip())
                break
            except (OSError, ValueError):
                if time.time() > self.deadline:
                    raise RelayError(f"no relay started within {self.wait:g} s") from None
                time.sleep(0.1)
        conn = socket.create_connection((self.hosts[who], port), timeout=self.wait)
        try:
            head = _recv(conn, 4 + NONCE)
            if head[:4] != MAGIC:
                raise RelayError("not a jobenv relay")
            ns, nc, me = head[4:], os.urandom(NONCE), struct.pack("!I", self.index)
            conn.sendall(me + nc + _mac(self.secret, b"c", ns, nc + me + want) + want)
            if not hmac.compare_digest(_recv(conn, MAC), _mac(self.secret, b"s", nc, ns)):
                raise RelayError("relay failed authentication")
        except BaseException:
            conn.close()
            raise
        return conn

    # ------------------------------------------------------------------ the end
    def finish(self) -> Dict[str, object]:
        """Tell the parent `S` when nothing was fetched, wait until every child has answered
        (until the deadline) and every stream has ended; what this host did."""
        with self.cond:
            while len(self.answered) < len(self.kids) and time.time() < self.deadline:
                self.cond.wait(0.5)
        if self.state != "idle":
            try:
                self.fetched()
            except RelayError:
                pass
        elif self.parent is not None:
            try:
                self._connect(self.parent, b"S").close()
            except (OSError, RelayError):
                pass
        with self.cond:
            while self.streams:  # each ends by itself: all sent, the child gone, or a send timed out
                self.cond.wait(0.5)
        self.closing = True
        self.sock.close()
        try:
            os.unlink(self.spool)
        except OSError:
            pass
        missing = [self.hosts[c] for c in self.kids if c not in self.answered]
        return {"source": self.source or "none", "shared_bytes": self.shared_bytes, "relayed_bytes": self.sent,
                "fallback": self.fallback, "children": len(self.kids), "silent_children": missing}


def join(spec: Dict[str, object], meta: Dict[str, object], host: str, root: str) -> Optional[Node]:
    """This host's Node when the stage is a broadcast and this host is one of its hosts
    (matched by name), else None (the worker reads the shared archive itself, as before)."""
    relay = spec.get("relay")
    if not isinstance(relay, dict) or not isinstance(meta.get("archive_sha256"), str):
        return None
    from jobenv.core.hostlist import host_index

    with open(os.path.join(str(relay["dir"]), "hosts")) as f:
        hosts = f.read().split()
    index = host_index(hosts, host)
    if index is None:
        return None
    spool = os.path.join(root, f".{spec['name']}.spool.{host}.{os.getpid()}")
    return Node(str(relay["dir"]), read_secret(str(relay["secret"])), hosts, index, int(relay["fanout"]),
                str(spec["archive"]), int(str(meta["archive_bytes"])), str(meta["archive_sha256"]), spool,
                float(str(relay["wait"])))
