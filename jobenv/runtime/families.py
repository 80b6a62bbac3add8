"""The launcher-family table: what jobenv must know of each launcher program, one row each.

Sizing (`sizing.render_sized`), supervision (`supervise.cancel_step`), failure attribution
(`ranks.lines_of`), `jobenv launch --label` and `jobenv doctor` (which launcher, which MPI)
read their facts from here; nothing else spells a launcher's flags.  A launcher this
table does not name is an error (BadInput, exit 5), never MPICH's flags by default.

How a program is recognised, in order (`family`):
1. its name, when only one family uses it (`srun`, `jsrun`, `flux`, `torchrun`, `orterun`...);
2. for the shared names (`mpiexec`, `mpirun`), where it really lives: a marker in the
   resolved path (`/pals/`, `openmpi`) or a program installed beside it (`hydra_pmi_proxy`,
   `ompi_info`, `impi_info`, `mpirun_rsh`);
3. else the name's convention: `mpirun` is Open MPI's, `mpiexec` takes Hydra's flags
   (which PALS, Intel MPI and MVAPICH2 share for everything jobenv adds).
`doctor` also reads the launcher's `--version` text (`from_banner`): that is what tells Cray
PALS (`mpiexec version 1.8.0 revision ...`; its usage line reads `[global_options]
[command_options]`) from MPICH Hydra (`HYDRA build details:`) when the path does not.

`runtime/launchers.py` is the other table: the variables each launcher sets in its ranks.
`env_row` names that table's row for each family; tests/test_runtime_families.py proves the
two agree.  Plain data, no imports beyond the error type: `jobenv launch` loads it on every run.
"""
from __future__ import annotations

from jobenv.core.errors import BadInput

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple


class Family:
    """One launcher family.  Flags are spelled as the launcher's documentation spells them."""

    __slots__ = ("name", "title", "flavor", "programs", "banner", "path_marks", "siblings", "mpi", "env_row",
                 "words", "nranks", "ppn", "nhosts", "hostfile", "hosts", "exclude", "subset", "label",
                 "label_pattern", "step_flag", "cancel", "system_bin", "attach", "oversubscribe", "cpu_bind", "cpus",
                 "gpu_off", "as_root", "interrupt")

    def __init__(self, name: str, title: str, flavor: str, *, programs: Tuple[str, ...] = (),
                 banner: Tuple[str, ...] = (), path_marks: Tuple[str, ...] = (), siblings: Tuple[str, ...] = (),
                 mpi: str, env_row: str, words: int = 1, nranks: Tuple[str, ...] = (),
                 ppn: Tuple[str, ...] = (), nhosts: Tuple[str, ...] = (), hostfile: Tuple[str, ...] = (),
                 hosts: Tuple[str, ...] = (), exclude: Tuple[str, ...] = (), subset: str = "",
                 label: Tuple[str, ...] = (), label_pattern: str = r"(?!)", step_flag: str = "",
                 cancel: str = "", system_bin: Tuple[str, ...] = (), attach: Tuple[str, ...] = (),
                 oversubscribe: Tuple[str, ...] = (), cpu_bind: Tuple[str, ...] = (),
                 cpus: Tuple[str, ...] = (), gpu_off: Tuple[str, ...] = (), as_root: Tuple[str, ...] = (),
                 interrupt: Tuple[str, ...] = ()) -> None:
        self.name, self.title, self.flavor = name, title, flavor  # flavor: the name doctor prints
        self.programs = programs  # program names only this family uses
        self.banner = banner  # regexes (case-insensitive, multi-line) for its `--version` text
        self.path_marks = path_marks  # substrings of the resolved path (lower case)
        self.siblings = siblings  # programs installed beside it
        self.mpi = mpi  # the MPI ABI its ranks must be built for: mpich | openmpi | any | none
        self.env_row = env_row  # the row of runtime/launchers.py its ranks match
        self.words = words  # argv words that name the launcher (`flux run`: 2); flags go after them
        self.nranks, self.ppn, self.nhosts = nranks, ppn, nhosts  # sizing flags (profiles use them)
        # subset-of-hosts flags; the first spelling of each is the one jobenv writes
        self.hostfile, self.hosts, self.exclude = hostfile, hosts, exclude
        # how a launch on fewer hosts than the job names them: "hostfile" (a sub-hostfile after
        # hostfile[0]), "flag" (hosts[0] + the hostlist), "here" (runs on this host only), "" (cannot)
        self.subset = subset
        self.label, self.label_pattern = label, label_pattern  # --label flags; the group that matched is the rank
        self.step_flag = step_flag  # names the launch, so that it can be cancelled by name
        self.cancel = cancel  # how a named launch is cancelled: "slurm-step", "flux-pkill" or "" (its
        # ranks all end with the launcher's process group)
        self.system_bin = system_bin  # flags when it is run by absolute path from /usr/bin, /bin
        # flags that run it inside job {jobid} from a shell outside it (a record captured with
        # `save --job`), sharing the nodes with the job's running steps; () where the hostfile
        # alone says where (mpiexec through the job's nodes)
        self.attach = attach
        # flags for more ranks on a host than the job has slots there (MPICH's Hydra, PALS and
        # Intel MPI allow it as they are; Open MPI refuses without --oversubscribe, srun
        # without --overcommit)
        self.oversubscribe = oversubscribe
        self.cpu_bind = cpu_bind  # its CPU binding flags (each takes a value), as `--dry-run` shows them
        self.cpus = cpus  # its CPUs-per-rank flags (each takes a value): where the binding puts each rank
        # its own GPU binding flag turned off: `launch --gpu-bind` binds in the wrapper, and two
        # bindings disagree (srun's may leave a task only its own device, then the wrapper's
        # number names one it cannot see)
        self.gpu_off = gpu_off
        # flags without which it refuses to run as root (Open MPI: "mpirun has detected an attempt
        # to run as root"); `jobenv launch` run by root passes them, and says so
        self.as_root = as_root
        # its flag (first spelling: the one jobenv writes) that makes one SIGINT reach the ranks, as
        # a ^C to `jobenv launch` is forwarded: srun's first SIGINT only prints the tasks' status
        # (a second within a second kills them), `--disable-status` forwards it to the tasks
        self.interrupt = interrupt

    def __repr__(self) -> str:
        return f"Family({self.name!r})"


_MPI_LABEL = r"\[(\d+)\] "  # Hydra's -l: "[3] text"
# Order matters where a path or a directory could name two rows: a path mark is looked for in
# every row before any row's siblings, and Open MPI's ompi_info (a Debian /usr/bin holds both
# MPIs) is looked for last.
FAMILIES: Tuple[Family, ...] = (
    Family("pals", "Cray PALS mpiexec", "Cray PALS", path_marks=("/pals/",),
           banner=(r"^mpiexec version \d", r"\[global_options\] \[command_options\]", r"\bpals\b"),
           mpi="mpich", env_row="pals", nranks=("-n", "--np"), ppn=("-ppn", "--ppn"),
           hostfile=("--hostfile",), hosts=("--hosts",), subset="hostfile", cpu_bind=("--cpu-bind",),
           cpus=("-d", "--depth"),
           # `--label` as ALCF job scripts pass it; its prefix read both ways (Hydra's, srun's)
           label=("--label",), label_pattern=r"(?:\[(\d+)\] |\s*(\d+): )"),
    Family("intelmpi", "Intel MPI mpiexec.hydra", "Intel MPI", path_marks=("/intel/oneapi/mpi/", "/impi/"),
           siblings=("impi_info",), banner=(r"intel\(r\) mpi",), mpi="mpich", env_row="mpich",
           nranks=("-n", "-np"), ppn=("-ppn", "-perhost"), hostfile=("--hostfile", "-f", "-hostfile"),
           hosts=("-hosts",), subset="hostfile", label=("-l",), label_pattern=_MPI_LABEL),
    Family("mvapich", "MVAPICH2 mpiexec (Hydra)", "MVAPICH", siblings=("mpirun_rsh", "mpiname"),
           banner=(r"mvapich",), mpi="mpich", env_row="mvapich2", nranks=("-n", "-np"), ppn=("-ppn",), cpu_bind=("-bind-to",),
           hostfile=("--hostfile", "-f"), hosts=("-hosts",), subset="hostfile", label=("-l",),
           label_pattern=_MPI_LABEL),
    Family("mpich", "MPICH Hydra mpiexec", "MPICH", programs=("mpiexec.hydra", "mpirun.mpich", "mpiexec.mpich"),
           path_marks=("hydra",), siblings=("hydra_pmi_proxy", "mpichversion"), banner=(r"hydra",),
           mpi="mpich", env_row="mpich", nranks=("-n", "-np"), ppn=("-ppn",), cpu_bind=("-bind-to", "--bind-to"),
           hostfile=("--hostfile", "-f"), hosts=("-hosts",), subset="hostfile", label=("-l",),
           label_pattern=_MPI_LABEL),
    Family("openmpi", "Open MPI mpirun", "Open MPI", programs=("orterun", "prterun", "mpirun.openmpi",
                                                                "mpiexec.openmpi"),
           path_marks=("openmpi", "/orterun", "/prterun"), siblings=("ompi_info",),
           banner=(r"open mpi", r"openrte"), mpi="openmpi", env_row="openmpi",
           nranks=("-n", "-np"), ppn=("-N", "--npernode"), hostfile=("--hostfile",), hosts=("--host",),
           subset="hostfile", label=("--tag-output",), label_pattern=r"\[\d+,(\d+)\]<std(?:out|err)>: ?",
           # run by absolute path it acts as --prefix and puts its bin directory first on the
           # ranks' PATH: /usr/bin would shadow the job's venv python3
           system_bin=("--noprefix",), oversubscribe=("--oversubscribe",), cpu_bind=("--bind-to",),
           as_root=("--allow-run-as-root",)),
    Family("srun", "Slurm srun", "Slurm srun", programs=("srun",), banner=(r"^slurm \d",), mpi="any",
           env_row="srun", nranks=("-n", "--ntasks"), ppn=("--ntasks-per-node",), nhosts=("-N", "--nodes"),
           hosts=("--nodelist=", "-w"), exclude=("--exclude=", "-x"), subset="flag",
           label=("--label",), label_pattern=r"\s*(\d+): ", step_flag="--job-name=", cancel="slurm-step",
           attach=("--jobid={jobid}", "--overlap"), oversubscribe=("--overcommit",),
           cpu_bind=("--cpu-bind", "--cpu_bind"), cpus=("-c", "--cpus-per-task"), gpu_off=("--gpu-bind", "none"),
           interrupt=("--disable-status", "-X")),
    Family("jsrun", "IBM jsrun (LSF)", "IBM jsrun", programs=("jsrun",), banner=(r"\bjsrun\b",), mpi="openmpi",
           env_row="jsrun", nranks=("-n", "--nrs"), ppn=("-r", "--rs_per_host"), subset="", cpu_bind=("-b", "--bind"),
           cpus=("-c", "--cpu_per_rs"), label=("--stdio_mode", "prepended"), label_pattern=r"\s*(\d+): "),
    # flux's job shell serves simple PMI-1 and sets PMI_FD, PMI_RANK and PMI_SIZE in each task
    # (flux-core src/shell/pmi): its ranks match the "mpich" row of runtime/launchers.py.
    Family("flux", "flux run", "Flux", programs=("flux",), banner=(r"libflux-core",), mpi="any",
           env_row="mpich", words=2, nranks=("-n", "--ntasks"), ppn=("--tasks-per-node",),
           nhosts=("-N", "--nodes"), hosts=("--requires=host:",), subset="flag", cpus=("-c", "--cores-per-task"),
           label=("--label-io",), label_pattern=r"\s*(\d+): ", step_flag="--job-name=", cancel="flux-pkill"),
    Family("torchrun", "torchrun (torch.distributed.run)", "torchrun", programs=("torchrun",), mpi="none",
           env_row="torchrun", ppn=("--nproc-per-node", "--nproc_per_node"), nhosts=("--nnodes",),
           subset="here", label=("--tee", "3"), label_pattern=r"\[default(\d+)\]:"),
)

BY_NAME: Dict[str, Family] = {f.name: f for f in FAMILIES}


def get(name: str) -> Family:
    """The row named `name` (a name `family` returned); BadInput for any other."""
    row = BY_NAME.get(name)
    if row is None:
        raise BadInput(f"unknown launcher family {name!r} (known: {', '.join(BY_NAME)})")
    return row


def known(argv0: str, resolved: Optional[str] = None) -> Optional[Family]:
    """The family `argv0` (found at `resolved`) is known to be, without guessing; None when
    neither its name nor where it lives tells."""
    import os

    base = os.path.basename(argv0)
    row = next((r for r in FAMILIES if base in r.programs), None)
    if row is not None or base not in ("mpiexec", "mpirun") or not resolved:
        return row
    real = os.path.realpath(resolved)
    lower, rdir, rbase = real.lower(), os.path.dirname(real), os.path.basename(real)
    return (next((r for r in FAMILIES if any(m in lower for m in r.path_marks)), None)
            or next((r for r in FAMILIES if any(os.path.exists(os.path.join(rdir, s)) for s in r.siblings)), None)
            or next((r for r in FAMILIES if rbase in r.programs), None))


def identify(argv0: str, resolved: Optional[str] = None) -> Tuple[Optional[Family], str]:
    """(the row `known` tells, the family's name): the launcher program `argv0` (found at
    `resolved`, when known) as `known` tells, else the shared names' convention; "" when
    neither names one.  Save asks once and records the name (the record's `launcher_family`)."""
    row = known(argv0, resolved)
    if row is not None:
        return row, row.name
    base = argv0.rpartition("/")[2]
    return None, ("openmpi" if base == "mpirun" else "mpich" if base == "mpiexec" else "")


def unknown(argv0: str) -> BadInput:
    """The refusal of a launch by a launcher that is no family jobenv knows."""
    names = sorted({p for r in FAMILIES for p in r.programs} | {"mpiexec", "mpirun"})
    return BadInput(f"launcher {argv0!r} is not one jobenv knows ({', '.join(names)}); "
                    "use a profile whose launcher is one of them")


def from_banner(text: str) -> Optional[Family]:
    """The family whose `--version` text this is, or None."""
    import re

    for row in FAMILIES:
        if any(re.search(p, text, re.IGNORECASE | re.MULTILINE) for p in row.banner):
            return row
    return None


def label_rank(row: Family, line: str) -> Optional[int]:
    """The rank a line of `--label`led output names, or None."""
    import re

    m = re.match(row.label_pattern, line)
    if not m:
        return None
    return next(int(g) for g in m.groups() if g is not None)


def insert(argv: List[str], row: Family, flags: List[str]) -> None:
    """Put `flags` right after the words that name the launcher (`srun X`, `flux run X`)."""
    argv[row.words:row.words] = flags
