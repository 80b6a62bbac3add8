"""Small real file systems for failure tests: a tmpfs of a given size, remountable read-only.

Needs root (CI runs as root); tests skip elsewhere.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(where: Path, size: str = "1m"):
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    where.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def remount_ro(where: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)


# Files an environment variable may name instead of a nodefile or env file: each must be
# refused with one line, at once (no hang, no memory exhausted, no 10 MB error message).
HOSTILE_FILES = ("fifo", "dev-zero", "directory", "dangling-symlink", "one-10MB-line", "sparse-300MB")


def hostile_file(root: Path, kind: str) -> str:
    """A path of the `kind` named in HOSTILE_FILES, created under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    p = root / kind
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "dev-zero":
        return "/dev/zero"
    elif kind == "directory":
        p.mkdir()
    elif kind == "dangling-symlink":
        p.symlink_to(root / "nowhere")
    elif kind == "one-10MB-line":
        p.write_bytes(b"n" * (10 << 20) + b"\n")
    elif kind == "sparse-300MB":
        with open(p, "wb") as f:
            f.truncate(300 << 20)
    return str(p)


def jobenv_within(seconds: int, args, env) -> subprocess.CompletedProcess:
    """`python -m jobenv ARGS` under coreutils `timeout`: a hang is a failure (rc 137), not a stuck suite."""
    import sys

    p = subprocess.run(["timeout", "-s", "KILL", str(seconds), sys.executable, "-m", "jobenv", *args], env=dict(env),
                       capture_output=True, text=True, errors="surrogateescape")
    assert p.returncode != 137, f"jobenv {args} hung for {seconds} s"
    return p
