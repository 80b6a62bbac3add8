"""The relay directory of a broadcast stage (jobenv.stage.relay) and the tree's shape.

`jobenv stage` makes the directory on the launch host before it starts a worker: private
(0700) in the store's stage directory, holding the tree's hosts (one per line: 10,000 names
overflow one argument of a command) and the secret every connection is authenticated with
(0600, O_EXCL).  A worker reads them back only from a private file of the user's own.  Kept
apart from the wire protocol because its readers differ: the stage command makes and sweeps
directories and computes the tree's depth for its report, and never opens a socket.
Stdlib only (the worker imports it).
"""
from __future__ import annotations

import os
import stat
import time
from typing import List, Optional, Tuple

from jobenv.core.hostlist import hostfile_text


class RelayError(Exception):
    pass


def parent(i: int, k: int) -> Optional[int]:
    return None if i == 0 else (i - 1) // k


def children(i: int, k: int, n: int) -> List[int]:
    return list(range(i * k + 1, min(i * k + k, n - 1) + 1))


def depth(n: int, k: int) -> int:
    """Hops from the root to the deepest host of an n-host, fan-out-k tree."""
    d, i = 0, n - 1
    while i > 0:
        i, d = (i - 1) // k, d + 1
    return d


def make_dir(sdir: str, hosts: List[str], until: float) -> Tuple[str, str]:
    """A fresh private relay directory in the store's stage directory, with its secret and
    the tree's hosts, one per line (a file: 10,000 names overflow one argument of a command).
    Its name carries the stage's deadline: `sweep` removes one a killed stage left."""
    sweep(sdir, time.time())
    d = os.path.join(sdir, f"relay.{int(until)}.{os.urandom(8).hex()}")
    os.mkdir(d, 0o700)
    for name, text in (("hosts", hostfile_text(hosts)), ("secret", os.urandom(32).hex() + "\n")):
        fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
    return d, os.path.join(d, "secret")


def sweep(sdir: str, now: float) -> List[str]:
    """Remove relay directories whose stage's deadline has passed (their `jobenv stage` was
    killed before it could remove them); only entries named as make_dir names them."""
    import shutil

    gone = []
    for name in os.listdir(sdir):
        parts = name.split(".")
        if len(parts) == 3 and parts[0] == "relay" and parts[1].isdigit() and int(parts[1]) + 60 < now:
            path = os.path.join(sdir, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
                gone.append(path)
    return gone


def read_secret(path: str) -> bytes:
    """The secret, only from a regular file of ours that no one else can read or write."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise RelayError(f"relay secret {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise RelayError(f"relay secret {path} is not a private file of yours; refusing it")
        data = f.read(200).strip()
    if len(data) < 32:
        raise RelayError(f"relay secret {path} is too short")
    return data
