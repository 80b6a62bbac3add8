"""The remote side of a `--remote` call: `jobenv remote exec HEX` and `jobenv remote receive HEX`.

`exec` runs the ordinary jobenv command the laptop asked for, as a child in a session of its
own, and ends that child when its own stdin (the ssh channel) closes: the laptop holds that
stdin open for exactly as long as it waits, so ^C there, a killed laptop command or a dropped
connection all end `logs -f` here, and its output keeps its two streams and its bytes (no
terminal in between, as `ssh -tt` would put: CR LF, one merged stream).  Its exit code is
the child's (a signal N as 128+N: ssh's own 255 stays ssh's).

`send-runs` writes the run history as a tar stream (`report --remote`).  `receive` unpacks a tar stream from stdin into a new directory (the `submit --sync` copy),
with tarfile's `data` filter: no member may leave the directory, be a device, or keep
set-uid bits.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import Any, Dict, List

from jobenv.core.errors import BadInput
from jobenv.remote.ssh import MARKER

GRACE = 5.0  # seconds between SIGTERM and SIGKILL of the child once the laptop is gone


def _started() -> None:
    sys.stderr.flush()
    os.write(2, MARKER)


def _jobenv_argv() -> List[str]:
    """This very jobenv (its package directory first on sys.path, never the cwd's)."""
    from jobenv.core.interpreter import code_argv

    parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return code_argv(sys.executable, "from jobenv.__main__ import main; sys.exit(main(sys.argv[1:]))", pin=parent)


def run_exec(payload: Dict[str, Any]) -> int:
    argv, cwd = payload.get("argv"), payload.get("cwd")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) or not (cwd is None or
                                                                                       isinstance(cwd, str)):
        raise BadInput("remote exec: the call is not one a jobenv wrote")
    _started()
    if cwd:
        try:
            os.chdir(os.path.expanduser(cwd))
        except OSError as exc:
            raise BadInput(f"cannot enter {cwd}: {exc.strerror}") from None
    child = subprocess.Popen(_jobenv_argv() + argv, stdin=subprocess.DEVNULL, start_new_session=True)

    def end(*_: object) -> None:
        for sig, wait in ((signal.SIGTERM, GRACE), (signal.SIGKILL, 0.0)):
            try:
                os.killpg(child.pid, sig)
            except ProcessLookupError:
                return
            try:
                child.wait(wait)
                return
            except subprocess.TimeoutExpired:
                pass

    def watch() -> None:  # the laptop's end of the channel: EOF when it is gone
        try:
            while os.read(0, 65536):
                pass
        except OSError:
            pass
        end()

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda *_: threading.Thread(target=end, daemon=True).start())
    threading.Thread(target=watch, daemon=True).start()
    while True:
        try:
            rc = child.wait()
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for clarity
            continue
    return rc if rc >= 0 else 128 - rc


def run_receive(payload: Dict[str, Any]) -> int:
    """Unpack stdin's tar stream into payload["dir"] (created; must not exist yet)."""
    import tarfile

    target = payload.get("dir")
    if not isinstance(target, str) or not target:
        raise BadInput("remote receive: the call is not one a jobenv wrote")
    _started()
    target = os.path.abspath(os.path.expanduser(target))
    from jobenv.store.paths import own_dir

    own_dir(os.path.dirname(target), "sync directory", "choose a --workdir of your own")
    try:
        os.mkdir(target, 0o700)
    except FileExistsError:
        raise BadInput(f"{target} exists already: every --sync makes a new copy") from None
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|*") as tar:
        tar.extractall(target, filter="data")
    return 0


def run_send_runs(payload: Dict[str, Any]) -> int:
    """Write the run history (the store's runs directory) to stdout as a tar stream, for
    `report --remote`, which renders the page on the laptop."""
    import tarfile

    from jobenv.core.trust import check_ancestors
    from jobenv.history.runs import root
    from jobenv.store.paths import check_safe

    _started()
    base = root(os.environ)
    check_ancestors(base, "the runs directory")
    check_safe(base, True, "runs directory")
    sys.stdout.flush()
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|gz") as tar:
        if os.path.isdir(base):
            tar.add(base, arcname="runs")
    sys.stdout.buffer.flush()
    return 0
