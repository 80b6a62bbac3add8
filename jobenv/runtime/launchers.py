"""The launcher-variable table: how each launcher tells a process where it sits.

One table, two readers: `jobenv.runtime.detect` (Python, in every rank) and the per-rank
wrapper `jobenv/rankwrap.sh` (POSIX sh, generated from this table by
`jobenv.rankwrap.render`; a test proves the shipped script is that rendering and that the
two agree on every row).  Plain tuples, no imports: this module is loaded by every rank.

A row is live when its rank variable and every `requires` variable are set, one of its
size variables is set and, for `check: "srun"`, this process is the task srun started
(variables left over from a batch script or a step shell are not a launch).  The first
live row gives launcher, rank and size; any other live row must agree on rank and size.
Local rank, local size and node come from the first live row only (first variable set in
each list); what it lacks is computed (see `jobenv.runtime.detect`).
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final, Tuple

    Row = Tuple[str, Tuple[str, ...], Tuple[str, ...], Tuple[str, ...], Tuple[str, ...], Tuple[str, ...],
                Tuple[str, ...], str, str]

# field positions in a row
NAME: Final = 0
RANK: Final = 1
SIZE: Final = 2
LOCAL: Final = 3
LSIZE: Final = 4
NODE: Final = 5
REQUIRES: Final = 6
CHECK: Final = 7

# name, rank vars, size vars, local rank vars, local size vars, node vars, requires, check, what
LAUNCHERS: "Tuple[Row, ...]" = (
    ("torchrun", ("RANK",), ("WORLD_SIZE",), ("LOCAL_RANK",), ("LOCAL_WORLD_SIZE",), ("GROUP_RANK",),
     ("TORCHELASTIC_RUN_ID",), "", "torchrun / torch.distributed.run (left untouched)"),
    ("horovodrun", ("HOROVOD_RANK",), ("HOROVOD_SIZE",), ("HOROVOD_LOCAL_RANK",), ("HOROVOD_LOCAL_SIZE",),
     ("HOROVOD_CROSS_RANK",), (), "", "horovodrun (gloo controller)"),
    ("pals", ("PALS_RANKID",), ("PMI_SIZE",), ("PALS_LOCAL_RANKID", "PMI_LOCAL_RANK"),
     ("PMI_LOCAL_SIZE", "PALS_LOCAL_SIZE"), ("PALS_NODEID",), (), "", "Cray PALS mpiexec (ALCF Polaris, Aurora)"),
    ("srun", ("SLURM_PROCID",), ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"), ("SLURM_LOCALID",), (),
     ("SLURM_NODEID",), ("SLURM_STEP_ID",), "srun", "Slurm srun (--mpi=none, pmi2, pmix)"),
    ("jsrun", ("JSM_NAMESPACE_RANK",), ("JSM_NAMESPACE_SIZE",), ("JSM_NAMESPACE_LOCAL_RANK",),
     ("JSM_NAMESPACE_LOCAL_SIZE",), (), (), "", "IBM jsrun (LSF)"),
    ("openmpi", ("OMPI_COMM_WORLD_RANK",), ("OMPI_COMM_WORLD_SIZE",), ("OMPI_COMM_WORLD_LOCAL_RANK",),
     ("OMPI_COMM_WORLD_LOCAL_SIZE",), (), (), "",
     "Open MPI 4/5 mpirun, Cobalt's mpirun (OMPI_COMM_WORLD_NODE_RANK is not a node index)"),
    ("mvapich2", ("MV2_COMM_WORLD_RANK",), ("MV2_COMM_WORLD_SIZE",), ("MV2_COMM_WORLD_LOCAL_RANK",),
     ("MV2_COMM_WORLD_LOCAL_SIZE",), (), (), "", "MVAPICH2 mpirun_rsh / mpiexec"),
    ("mpich", ("PMI_RANK",), ("PMI_SIZE",), ("MPI_LOCALRANKID", "PMI_LOCAL_RANK"),
     ("MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"), (), (), "", "MPICH Hydra mpiexec, Intel MPI"),
    ("pmix", ("PMIX_RANK",), ("OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"),
     ("OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"), ("OMPI_COMM_WORLD_LOCAL_SIZE",), ("SLURM_NODEID",), (), "",
     "a PMIx launcher that sets no launcher-specific rank variable"),
)

# Seeds of the rendezvous port, most specific first: a per-launch id, so back-to-back
# launches in one job use different ports (see jobenv.runtime.detect.port_seed).
PORT_SEED_VARS = ("PALS_APID", "PMIX_NAMESPACE", "TORCHELASTIC_RUN_ID")
# Slurm step ids that are not a launch: the batch script and the extern step.
SLURM_NOT_A_STEP = ("4294967294", "4294967295", "batch", "extern")
# The largest rank, size or port number accepted (9 digits: also safe in sh arithmetic).
MAX_DIGITS = 9
