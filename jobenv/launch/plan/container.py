"""`launch --container IMAGE`: the launch's container, decided once as one value (`Container`).

Which runtime (--container-runtime, else the profile's first, else the first of the table found on
PATH), what is bound in, and the variables the ranks get; jobenv.runtime.containers holds the
runtimes' flags and builds the words.  The rank sees what it would see outside, at the same
paths: the working directory, the job's store ($JOBENV_HOME: the run directory, its ledger and
hostfile are there), the launch's --log-dir, the staged copy's directory, jobenv itself
(read-only where the runtime can) and the user's --bind's.  jobenv need not be in the image:
PYTHONPATH's first entry is a directory of the store holding one link, `jobenv`, to this jobenv
(bound at its own path), so `python3 -m jobenv.selftest` runs this jobenv and nothing else of
the host's site-packages comes along.  JOBENV_CONTAINER and JOBENV_CONTAINER_RUNTIME name the
image and the runtime to the ranks (the selftest's report shows them).
"""
from __future__ import annotations

import os

import jobenv

from jobenv.core.errors import BadInput, visible
from jobenv.launch.types import ContainerRequest as Request
from jobenv.runtime import containers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Sequence, Tuple

PACKAGE = os.path.dirname(os.path.abspath(jobenv.__file__))  # this jobenv's package directory (wherever this module sits in it)


class Container:
    """The launch's container: runtime row, image, the words before each rank's program
    (`words`; for Pyxis the launcher's flags, `launcher_flags`), and the variables to set."""

    def __init__(self, row: containers.Runtime, image: str, words: List[str], env: Dict[str, str]) -> None:
        self.row, self.image, self.env = row, image, env
        self.words = [] if row.launcher_flags else words
        self.launcher_flags = words if row.launcher_flags else []


def choose_runtime(asked: Optional[str], site: Sequence[str], path: str) -> str:
    """The runtime: the one asked for, else the profile's first found on PATH (its first when none
    is), else the table's first found on PATH; BadInput when none is."""
    if asked:
        return asked
    found = containers.which(list(site) or list(containers.NAMES), path)
    if found:
        return found[0]
    if site:
        return site[0]
    raise BadInput("--container: no container runtime found on PATH (looked for "
                   f"{', '.join(containers.get(n).program for n in containers.NAMES if n != 'pyxis')}); "
                   "name one with --container-runtime")


def parse_bind(text: str) -> Tuple[str, str, bool]:
    """--bind SRC[:DST[:ro]] as (SRC, DST, read-only); SRC and DST absolute (SRC from the cwd)."""
    parts = text.split(":")
    if not parts[0] or len(parts) > 3 or (len(parts) == 3 and parts[2] not in ("ro", "rw")) or \
            any(c in text for c in ",\n\0"):
        raise BadInput(f"--bind {visible(text)}: expected SRC[:DST[:ro]] (no ',' in a path)")
    src = os.path.abspath(parts[0])
    dst = parts[1] if len(parts) > 1 and parts[1] else src
    if not os.path.isabs(dst):
        raise BadInput(f"--bind {visible(text)}: the destination {visible(dst)} is not an absolute path")
    return src, dst, len(parts) == 3 and parts[2] == "ro"


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def same_path_binds(paths: Sequence[Tuple[str, bool]]) -> List[Tuple[str, str, bool]]:
    """Each (path, read-only) bound at its own path, once: a path inside another one's is left out
    (read-write wins over read-only for the outer one)."""
    out: List[Tuple[str, str, bool]] = []
    for p, ro in sorted(((os.path.normpath(p), ro) for p, ro in paths), key=lambda t: (len(t[0]), t[1])):
        outer = next((i for i, (q, _, _) in enumerate(out) if _inside(p, q)), None)
        if outer is None:
            out.append((p, p, ro))
        elif not ro and out[outer][2]:
            out[outer] = (out[outer][0], out[outer][1], False)
    return out


def onto_image(binds: Sequence[Tuple[str, str, bool]], image: str) -> List[Tuple[str, str, bool]]:
    """For a runtime that binds only onto directories the image has (ch-run on a read-only directory
    image): each same-path bind moved up to its deepest directory the image has, so the path
    is there inside; BadInput naming the mount point to make when only / would do."""
    if not os.path.isdir(image):  # a SquashFS or a named image: the runtime itself says what is missing
        return list(binds)
    out: List[Tuple[str, str, bool]] = []
    for src, dst, ro in binds:
        if src != dst:
            out.append((src, dst, ro))
            continue
        at = src
        while at != "/" and not os.path.isdir(os.path.join(image, at.lstrip("/"))):
            at = os.path.dirname(at)
        if at == "/":
            top = "/" + src.strip("/").split("/")[0]
            raise BadInput(f"--container {visible(image)}: the image has no directory {visible(top)} to bind "
                           f"{visible(src)} onto (ch-run binds only onto directories in the image); "
                           f"make the mount point: mkdir {visible(os.path.join(image, top.lstrip('/')))}")
        out.append((at, at, ro))
    return _dedup(out)


def _dedup(binds: Sequence[Tuple[str, str, bool]]) -> List[Tuple[str, str, bool]]:
    same = same_path_binds([(s, ro) for s, d, ro in binds if s == d])
    return same + [b for b in binds if b[0] != b[1]]


def staged_root(template: str) -> str:
    """The directory that holds every host's staged copy: the template's path up to the host's
    name (`/local/%h/env` -> /local), or the copy itself when every host has it at one path."""
    if "%h" not in template:
        return template
    head = template.split("%h")[0]
    return (head if head.endswith("/") else os.path.dirname(head)).rstrip("/") or "/"


def host_gpus() -> str:
    """The GPU vendor whose device files this host has ("" : none): which GPU flag the runtime gets
    when the profile names none."""
    for vendor, dev in (("nvidia", "/dev/nvidiactl"), ("amd", "/dev/kfd")):
        if os.path.exists(dev):
            return vendor
    return ""


def python_path_dir(store: str) -> str:
    """A directory of the store that holds one entry, `jobenv`, a link to this jobenv (made or
    corrected here): PYTHONPATH's entry inside the container."""
    import hashlib

    from jobenv.store.paths import own_dir

    d = os.path.join(store, "container-path", hashlib.sha256(PACKAGE.encode()).hexdigest()[:16])
    own_dir(d, "container path directory")
    link = os.path.join(d, "jobenv")
    if os.path.islink(link) and os.readlink(link) == PACKAGE:
        return d
    tmp = f"{link}.{os.getpid()}"
    os.symlink(PACKAGE, tmp)
    os.replace(tmp, link)
    return d


def plan(req: Request, env: Mapping[str, str], cwd: str, log_dir: Optional[str], staged: Optional[str],
         site: Sequence[str] = (), site_flags: Optional[Dict[str, List[str]]] = None, gpu: str = "") -> Container:
    """The launch's container (see the module docstring).  `staged`: the staged copies' path
    template (`%h` for the host) or None; `site`/`site_flags`/`gpu`: the profile's runtimes, their
    extra flags and the GPU vendor."""
    from jobenv.store.paths import home

    name = choose_runtime(req.runtime, site, env.get("PATH", ""))
    row = containers.get(name)
    if not req.image or "\n" in req.image or "\0" in req.image:
        raise BadInput(f"--container {visible(req.image)}: expected an image")
    image = os.path.abspath(req.image) if os.path.exists(req.image) else req.image
    store = home(env)
    paths: List[Tuple[str, bool]] = [(cwd, False), (store, False), (PACKAGE, True)]
    if log_dir:
        paths.append((log_dir, False))
    if staged:
        paths.append((staged_root(staged), True))
    binds = same_path_binds(paths) + [parse_bind(b) for b in req.binds]
    if any(src == "/" for src, _, _ in binds):
        raise BadInput("--container: refusing to bind / into the container (the working directory, the store "
                       "or a staged copy is /): run from a directory of your own")
    if row.needs_target:
        binds = onto_image(binds, image)
    pp = python_path_dir(store)
    vendor = req.gpu or gpu or host_gpus()
    words = containers.prefix(row, image, binds, cwd, vendor, (site_flags or {}).get(name, []))
    ranks_env = {"JOBENV_CONTAINER": image, "JOBENV_CONTAINER_RUNTIME": name,
                 "PYTHONPATH": os.pathsep.join(p for p in (pp, env.get("PYTHONPATH", "")) if p)}
    return Container(row, image, words, ranks_env)
