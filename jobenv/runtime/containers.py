"""The container-runtime table: what jobenv must know of each runtime, one row each, and the one
function that turns a row into the argv a rank's keeper runs before the program (`prefix`).

`jobenv launch --container IMAGE` keeps the launcher and each rank's keeper on the host: the
keeper stays the program's parent and runs `RUNTIME ... IMAGE PROGRAM...` (the prefix goes where
the staged copy's does: between the per-rank wrapper and the program, jobenv.launch.command).
What the keeper then records is what the runtime's process ended with, so each row says how
the runtime reports its program's end (`ends`):
- "exec": the runtime becomes the program (ch-run sets up its namespaces, then execs): the
  keeper waits for the program itself, and `exit:N` / `signal:S` are the program's, exact;
- "exit128": the runtime is a parent that exits 128+S when its program died of signal S
  (Apptainer's starter, podman's conmon/crun, shifter's): the keeper records `exit:137`
  where the program died of SIGKILL, and says so (docs/containers.md).
Pyxis is no prefix: `srun --container-image` puts the whole task (wrapper, keeper, program)
inside the container (`launcher_flags`), so the keeper is the program's parent in there.

Flags are spelled as each runtime's documentation spells them (cited in docs/containers.md).
Plain data, no imports beyond the standard library: `jobenv launch` loads it on every run.
"""
from __future__ import annotations

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Sequence, Tuple


class Runtime:
    """One container runtime.  A flag ending in '=' takes its value in the same word."""

    __slots__ = ("name", "title", "program", "argv", "image_flag", "image_last", "bind", "bind_join",
                 "read_only", "env_all", "image_path", "gpu", "workdir", "ends", "needs_target", "launcher_flags")

    def __init__(self, name: str, title: str, program: str, *, argv: Tuple[str, ...], image_flag: str = "",
                 image_last: Tuple[str, ...] = (), bind: str, bind_join: str = "", read_only: str = "",
                 env_all: Tuple[str, ...] = (), image_path: Tuple[str, ...] = (), gpu: Dict[str, Tuple[str, ...]],
                 workdir: str, ends: str, needs_target: bool = False, launcher_flags: bool = False) -> None:
        self.name, self.title, self.program = name, title, program
        self.argv = argv  # the runtime's words before its options (`apptainer exec`)
        self.image_flag = image_flag  # the image is this flag's value ("" : a word of its own after the options)
        self.image_last = image_last  # words between the image and the program (ch-run's `--`)
        self.bind = bind  # one SRC:DST per flag
        self.bind_join = bind_join  # or all binds in one flag, joined by this (Pyxis: ',')
        self.read_only = read_only  # the suffix of a read-only bind ("" : the runtime has none)
        self.env_all = env_all  # flags that pass the host's whole environment (() : passed by default)
        # flags that give the program the image's PATH, not the host's (Apptainer does so itself): a
        # host PATH would find the host's programs wherever a bound directory holds them
        self.image_path = image_path
        self.gpu = gpu  # vendor (nvidia | amd | intel) -> the flags that give the container the GPUs
        self.workdir = workdir  # the container's working directory ("" : it keeps the host's, as shifter does)
        self.ends = ends  # how its program's end reaches the keeper: "exec" | "exit128" (docstring)
        self.needs_target = needs_target  # a bind's DST must exist in the image (a read-only directory image)
        self.launcher_flags = launcher_flags  # goes on the launcher's line (Pyxis), not before the program


RUNTIMES = (
    Runtime("apptainer", "Apptainer (Singularity)", "apptainer", argv=("apptainer", "exec"),
            bind="--bind=", read_only=":ro",
            gpu={"nvidia": ("--nv",), "amd": ("--rocm",), "intel": ()},
            workdir="--pwd=", ends="exit128"),
    Runtime("charliecloud", "Charliecloud", "ch-run", argv=("ch-run",), image_last=("--",), bind="--bind=",
            image_path=("--unset-env=PATH",),
            gpu={"nvidia": (), "amd": (), "intel": ()}, workdir="--cd=", ends="exec", needs_target=True),
    Runtime("podman", "Podman", "podman", argv=("podman", "run", "--rm", "--net=host", "--pid=host",
                                                "--ipc=host", "--userns=keep-id"),
            bind="--volume=", read_only=":ro", env_all=("--env-host",),
            gpu={"nvidia": ("--device=nvidia.com/gpu=all",), "amd": ("--device=/dev/kfd", "--device=/dev/dri"),
                 "intel": ("--device=/dev/dri",)},
            workdir="--workdir=", ends="exit128"),
    Runtime("podman-hpc", "podman-hpc (NERSC)", "podman-hpc", argv=("podman-hpc", "run", "--rm"),
            bind="--volume=", read_only=":ro", env_all=("--env-host",),
            gpu={"nvidia": ("--gpu",), "amd": (), "intel": ()}, workdir="--workdir=", ends="exit128"),
    Runtime("shifter", "Shifter (NERSC)", "shifter", argv=("shifter",), image_flag="--image=", bind="--volume=",
            gpu={"nvidia": ("--module=gpu",), "amd": (), "intel": ()}, workdir="",
            ends="exit128"),
    Runtime("pyxis", "Pyxis/Enroot (srun --container-image)", "srun", argv=(), image_flag="--container-image=",
            bind="--container-mounts=", bind_join=",", read_only=":ro",
            gpu={"nvidia": (), "amd": (), "intel": ()}, workdir="--container-workdir=", ends="exec",
            launcher_flags=True),
)
NAMES = tuple(r.name for r in RUNTIMES)
_BY_NAME = {r.name: r for r in RUNTIMES}


def get(name: str) -> Runtime:
    """The row named `name` (KeyError for none: the CLI's choice list holds only these names)."""
    return _BY_NAME[name]


def bind_word(row: Runtime, src: str, dst: str, read_only: bool) -> str:
    """One bind as the runtime spells it (SRC:DST, with its read-only suffix when asked and it has one)."""
    return f"{src}:{dst}{row.read_only if read_only else ''}"


def prefix(row: Runtime, image: str, binds: Sequence[Tuple[str, str, bool]], workdir: str, gpu: str,
           extra: Sequence[str] = ()) -> List[str]:
    """The words before the program: the runtime, its options (the host's environment, the binds
    (SRC, DST, read-only), the working directory, the GPU flags for vendor `gpu` ("" : none), the
    profile's `extra` flags), then the image.  For Pyxis, the flags for srun's line (no program)."""
    words = list(row.argv) + list(row.env_all) + list(row.image_path)
    if row.bind_join and binds:
        words.append(row.bind + row.bind_join.join(bind_word(row, s, d, ro) for s, d, ro in binds))
    else:
        words += [row.bind + bind_word(row, s, d, ro) for s, d, ro in binds]
    if workdir and row.workdir:
        words.append(row.workdir + workdir)
    words += list(row.gpu.get(gpu, ())) if gpu else []
    words += list(extra)
    words += [row.image_flag + image] if row.image_flag else [image]
    return words + ([] if row.launcher_flags else list(row.image_last))


def which(names: Sequence[str], path: str) -> Optional[Tuple[str, str]]:
    """(runtime name, program path) of the first of `names` whose program is on `path`; None if none.
    Pyxis is never found so (srun on PATH says nothing of its plugin): a profile or the flag names it."""
    import os

    for name in names:
        if _BY_NAME[name].launcher_flags:
            continue
        prog = _BY_NAME[name].program
        for d in path.split(os.pathsep):
            exe = os.path.join(d or ".", prog)
            if os.path.isfile(exe) and os.access(exe, os.X_OK):
                return name, exe
    return None
