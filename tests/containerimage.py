"""A real container image for the container tests, made here from Debian's packages alone.

`debootstrap --variant=minbase --include=python3 bookworm DIR` (about a minute, 261 MB) gives a
directory image that Charliecloud's ch-run runs as it is.  It is built once per machine into
~/.cache/jobenv-ci/images/<KEY>/ (KEY names what is in it: change it when the recipe changes),
first into a temporary directory then renamed, so a half-built image is never taken for one.
Outside CI a machine that cannot reach Debian's mirror skips the tests that need it, saying so;
under CI=true it fails them.

`python3 tests/containerimage.py` builds it ahead of the tests (what `.ci/run --setup` does).
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

KEY = "debian-bookworm-minbase-python3-2"  # 2: empty /etc/hosts and /etc/resolv.conf
MIRROR = "http://deb.debian.org/debian"
CACHE = Path(os.environ.get("JOBENV_CI_IMAGES", str(Path.home() / ".cache" / "jobenv-ci" / "images")))
DONE = ".jobenv-image-ok"


class Unavailable(Exception):
    """The image cannot be made on this machine (no debootstrap, no mirror): the reason."""


def image(key: str = KEY) -> Path:
    """The image directory, built now when this machine has none yet (one builder at a time)."""
    target = CACHE / key
    if (target / DONE).exists():
        return target
    if shutil.which("debootstrap") is None:
        raise Unavailable("debootstrap is not installed (apt-get install debootstrap)")
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be building it
        if (target / DONE).exists():
            return target
        work = CACHE / f".{key}.part"
        shutil.rmtree(work, ignore_errors=True)
        p = subprocess.run(["debootstrap", "--variant=minbase", "--include=python3", "bookworm", str(work), MIRROR],
                           capture_output=True, text=True, errors="replace", timeout=1800)
        if p.returncode != 0:
            shutil.rmtree(work, ignore_errors=True)
            tail = (p.stdout + p.stderr).strip().splitlines()[-3:]
            raise Unavailable(f"debootstrap bookworm from {MIRROR} failed ({p.returncode}): {' / '.join(tail)}")
        for name in ("hosts", "resolv.conf"):  # ch-run binds the host's over these, only where the image has them
            (work / "etc" / name).touch()
        (work / DONE).write_text(KEY + "\n")
        shutil.rmtree(target, ignore_errors=True)
        work.rename(target)
    return target


if __name__ == "__main__":
    try:
        print(image())
    except Unavailable as exc:
        sys.exit(f"containerimage: {exc}")
