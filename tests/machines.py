"""Environments and nodefiles shaped exactly like real systems (see shared design notes).

Each builder writes its nodefile under `root` (same file name as on the machine) and
returns the environment a user's first shell would have.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

POLARIS_SUFFIX = ".hsn.cm.polaris.alcf.anl.gov"


def _nodefile(root: Path, name: str, lines: List[str]) -> str:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(ln + "\n" for ln in lines))
    return str(path)


def pbs_common(jobid: str, nodefile: str, interactive: bool = True) -> Dict[str, str]:
    return {
        "PBS_JOBID": jobid, "PBS_JOBNAME": "STDIN" if interactive else "train.sh",
        "PBS_NODEFILE": nodefile, "PBS_ENVIRONMENT": "PBS_INTERACTIVE" if interactive else "PBS_BATCH",
        "PBS_QUEUE": "debug", "PBS_O_WORKDIR": "/home/alice/proj", "PBS_O_HOME": "/home/alice",
        "PBS_O_HOST": "polaris-login-04" + POLARIS_SUFFIX, "PBS_O_SHELL": "/bin/bash",
        "PBS_O_LOGNAME": "alice", "PBS_O_PATH": "/usr/bin:/bin", "PBS_O_QUEUE": "debug",
        "PBS_O_SYSTEM": "Linux", "PBS_O_LANG": "en_US.UTF-8", "PBS_O_MAIL": "/var/spool/mail/alice",
        "PBS_JOBDIR": "/home/alice", "PBS_ACCOUNT": "datascience", "PBS_JOBCOOKIE": "4F1B2C8D9E0A7B6C",
        "PBS_MOMPORT": "15003", "PBS_NODENUM": "0", "PBS_TASKNUM": "1", "NCPUS": "64",
        "OMP_NUM_THREADS": "64", "TMPDIR": f"/var/tmp/pbs.{jobid}",
        # a real OpenPBS 23.06 batch job has ENVIRONMENT=BATCH, an interactive one none at all
        **({} if interactive else {"ENVIRONMENT": "BATCH"}),
    }


def polaris(root: Path, nodes: int = 2) -> Dict[str, str]:
    jobid = "2024084.polaris-pbs-01" + POLARIS_SUFFIX
    hosts = [f"x3006c0s{13 + 6 * i}b0n0{POLARIS_SUFFIX}" for i in range(nodes)]
    return pbs_common(jobid, _nodefile(root, f"var/spool/pbs/aux/{jobid}", hosts))


def aurora(root: Path) -> Dict[str, str]:
    jobid = "1234567.aurora-pbs-0001.hostmgmt.cm.aurora.alcf.anl.gov"
    hosts = ["x4102c5s2b0n0.hostmgmt2000.cm.aurora.alcf.anl.gov", "x4102c5s3b0n0.hostmgmt2000.cm.aurora.alcf.anl.gov"]
    return pbs_common(jobid, _nodefile(root, f"var/spool/pbs/aux/{jobid}", hosts), interactive=False)


def sunspot(root: Path) -> Dict[str, str]:
    jobid = "98765.amn-0001"
    hosts = ["x1921c0s3b0n0.hostmgmt2000.cm.americas.sgi.com", "x1921c0s4b0n0.hostmgmt2000.cm.americas.sgi.com"]
    return pbs_common(jobid, _nodefile(root, f"var/spool/pbs/aux/{jobid}", hosts))


def pbs_repeated(root: Path) -> Dict[str, str]:
    """select=1:mpiprocs=1+5:mpiprocs=28: 141 lines for 6 hosts, uneven."""
    jobid = "5555.pbs01.cluster.edu"
    hosts = [f"cn{n:03d}" for n in (17, 3, 4, 5, 6, 9)]
    lines = [hosts[0]] + [h for h in hosts[1:] for _ in range(28)]
    return pbs_common(jobid, _nodefile(root, f"var/spool/pbs/aux/{jobid}", lines), interactive=False)


def pbs_mpiprocs4(root: Path) -> Dict[str, str]:
    jobid = "6000.pbs01.cluster.edu"
    lines = [h for h in ("cn001", "cn002") for _ in range(4)]
    return pbs_common(jobid, _nodefile(root, f"var/spool/pbs/aux/{jobid}", lines), interactive=False)


def pbs_array(root: Path) -> Dict[str, str]:
    jobid = "123[3].pbs01.cluster.edu"
    env = pbs_common(jobid, _nodefile(root, f"var/spool/pbs/aux/{jobid}", ["cn010", "cn011"]), interactive=False)
    env.update(PBS_ARRAY_ID="123[].pbs01.cluster.edu", PBS_ARRAY_INDEX="3")
    return env


def slurm_common(jobid: str, nodelist: str, nnodes: int, tasks: str, ntasks: int) -> Dict[str, str]:
    return {
        "SLURM_JOB_ID": jobid, "SLURM_JOBID": jobid, "SLURM_JOB_NAME": "interactive",
        "SLURM_JOB_NODELIST": nodelist, "SLURM_NODELIST": nodelist,
        "SLURM_JOB_NUM_NODES": str(nnodes), "SLURM_NNODES": str(nnodes),
        "SLURM_JOB_CPUS_PER_NODE": f"128(x{nnodes})", "SLURM_TASKS_PER_NODE": tasks,
        "SLURM_NTASKS": str(ntasks), "SLURM_NPROCS": str(ntasks), "SLURM_JOB_PARTITION": "gpu",
        "SLURM_JOB_ACCOUNT": "m1234_g", "SLURM_SUBMIT_DIR": "/global/homes/a/alice",
        "SLURM_SUBMIT_HOST": "login31", "SLURM_JOB_USER": "alice", "SLURM_JOB_UID": "54321",
        "SLURM_JOB_QOS": "interactive", "SLURM_CONF": "/etc/slurm/slurm.conf",
        "SLURM_CPUS_ON_NODE": "128", "SLURMD_NODENAME": "first", "SLURM_PRIO_PROCESS": "0",
        "SLURM_TOPOLOGY_ADDR": "first", "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
    }


def perlmutter(root: Path) -> Dict[str, str]:
    env = slurm_common("12345678", "nid[001234-001235]", 2, "4(x2)", 8)
    env.update(SLURM_CLUSTER_NAME="perlmutter", SLURM_GPUS_ON_NODE="4", SLURM_GPUS_PER_NODE="4",
               SLURM_JOB_GPUS="0,1,2,3", SLURM_NTASKS_PER_NODE="4", SLURMD_NODENAME="nid001234",
               JOBENV_HOSTNAME="nid001234")
    return env


def frontier(root: Path) -> Dict[str, str]:
    env = slurm_common("2001234", "frontier[00001-00003,00007]", 4, "1(x4)", 4)
    env.update(SLURM_CLUSTER_NAME="frontier", JOBENV_HOSTNAME="frontier00001")
    return env


def slurm_two_groups(root: Path) -> Dict[str, str]:
    env = slurm_common("777", "gpu[098-101],cpu[01-02]", 6, "2(x6)", 12)
    env.update(JOBENV_HOSTNAME="gpu098")
    return env


def slurm_multibracket(root: Path) -> Dict[str, str]:
    env = slurm_common("778", "rack[1-2]-node[01-02]", 4, "1(x4)", 4)
    env.update(JOBENV_HOSTNAME="rack1-node01")
    return env


def slurm_het(root: Path) -> Dict[str, str]:
    env = slurm_common("900", "cpu[1-2]", 2, "1(x2)", 2)
    env.update(SLURM_JOB_NODELIST_HET_GROUP_0="cpu[1-2]", SLURM_JOB_NODELIST_HET_GROUP_1="gpu[01-02]",
               SLURM_HET_SIZE="2", JOBENV_HOSTNAME="cpu1")
    return env


def slurm_cpu_only(root: Path) -> Dict[str, str]:
    env = slurm_common("901", "c[001-002]", 2, "64(x2)", 128)
    env.update(JOBENV_HOSTNAME="c001")
    return env


def slurm_step(root: Path) -> Dict[str, str]:
    """`srun -N1 --pty bash` inside a 2-node job: step variables describe one node."""
    env = perlmutter(root)
    env.update(SLURM_STEP_ID="0", SLURM_STEPID="0", SLURM_STEP_NODELIST="nid001234",
               SLURM_NODELIST="nid001234", SLURM_NNODES="1", SLURM_STEP_NUM_NODES="1",
               SLURM_NTASKS="1", SLURM_NPROCS="1", SLURM_TASKS_PER_NODE="1",
               SLURM_STEP_NUM_TASKS="1", SLURM_STEP_TASKS_PER_NODE="1", SLURM_PROCID="0",
               SLURM_LOCALID="0", SLURM_NODEID="0", SLURM_TASK_PID="4242", SLURM_GTIDS="0",
               SLURM_SRUN_COMM_HOST="10.0.0.1", SLURM_SRUN_COMM_PORT="40000",
               SLURM_STEP_LAUNCHER_PORT="40000", SLURM_DISTRIBUTION="cyclic")
    return env


def slurm_step_outside(root: Path) -> Dict[str, str]:
    """`srun --jobid J -N1 --overlap bash` from outside the job, as measured on Slurm 22.05:
    SLURM_JOB_NODELIST is the step's node, SLURM_NODELIST the job's, no SLURM_JOB_NUM_NODES."""
    env = perlmutter(root)
    del env["SLURM_JOB_NUM_NODES"]
    env.update(SLURM_JOB_NODELIST="nid001234", SLURM_NODELIST="nid[001234-001235]", SLURM_NNODES="1",
               SLURM_STEP_ID="0", SLURM_STEPID="0", SLURM_STEP_NODELIST="nid001234",
               SLURM_STEP_NUM_NODES="1", SLURM_STEP_NUM_TASKS="1", SLURM_STEP_TASKS_PER_NODE="1",
               SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_NODEID="0", SLURM_STEP_LAUNCHER_PORT="33333")
    return env


def slurm_salloc_login(root: Path) -> Dict[str, str]:
    env = perlmutter(root)
    env.update(JOBENV_HOSTNAME="login31")
    return env


def thetagpu(root: Path) -> Dict[str, str]:
    jobid = "10446"
    path = _nodefile(root, f"var/tmp/cobalt.{jobid}", ["thetagpu13", "thetagpu12", "thetagpu19", "thetagpu18"])
    return {"COBALT_JOBID": jobid, "COBALT_NODEFILE": path, "COBALT_JOBSIZE": "32",
            "COBALT_PARTNAME": "thetagpu13", "COBALT_PARTSIZE": "4", "COBALT_BLOCKNAME": "thetagpu13"}


def local(root: Path) -> Dict[str, str]:
    return {"JOBENV_HOSTNAME": "workstation7"}


FLUX_STUB = """#!/bin/sh
# `flux`, as far as jobenv asks it: `flux hostlist SOURCE` prints an RFC 29 hostlist
# (flux-core doc/man1/flux-hostlist.rst); `flux --parent jobs -n -o FMT ID...` one
# `{id.dec} {state} {result}` line per id (src/cmd/flux-jobs.py)
echo "$*" >> "$(dirname "$0")/flux.log"
case "$1 $2" in
  "hostlist instance"|"hostlist local") echo '%s' ;;
  "--parent jobs") shift 5; for id in "$@"; do echo "$id %s"; done ;;
  *) echo "flux: unknown command $*" >&2; exit 1 ;;
esac
"""


def elcapitan(root: Path, hosts: str = "elcap[1001-1002]", state: str = "RUN") -> Dict[str, str]:
    """The shell of `flux alloc -N2` on El Capitan: the broker unset FLUX_JOB_ID and set
    FLUX_URI (the new instance) and FLUX_ENCLOSING_ID (the allocation's F58 id in the system
    instance); flux-core doc/man7/flux-environment.rst, INITIAL PROGRAM ENVIRONMENT.  A
    stub `flux` in root/bin answers `flux hostlist` and `flux jobs` (put it first on PATH)."""
    bindir = root / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    stub = bindir / "flux"
    stub.write_text(FLUX_STUB % (hosts, state))
    stub.chmod(0o755)
    return {"FLUX_ENCLOSING_ID": "ƒ2oLkTLb", "FLUX_URI": "local:///var/tmp/flux-Gq8dWn/local-0",
            "JOBENV_HOSTNAME": "elcap1001"}


def lassen(root: Path, nodes: int = 2) -> Dict[str, str]:
    """The shell of `bsub -nnodes 2 -Is bash` on Lassen: it runs on a launch node, which LSF
    lists first with one slot; each compute host has 40 slots (IBM LSF 10.1, "Environment
    variables set for job execution"; LSB_DJOB_HOSTFILE has one line per slot)."""
    jobid = "3456789"
    hosts = ["lassen710"] + [f"lassen{11 + i}" for i in range(nodes)]
    slots = [1] + [40] * nodes
    hostfile = _nodefile(root, f"home/alice/.lsbatch/{jobid}.hostfile",
                         [h for h, n in zip(hosts, slots) for _ in range(n)])
    return {"LSB_JOBID": jobid, "LSB_JOBNAME": "bash", "LSB_QUEUE": "pdebug", "LSB_DJOB_HOSTFILE": hostfile,
            "LSB_MCPU_HOSTS": " ".join(f"{h} {n}" for h, n in zip(hosts, slots)),
            "LSB_HOSTS": " ".join(h for h, n in zip(hosts, slots) for _ in range(n)),
            "LSB_DJOB_NUMPROC": str(sum(slots)), "LSB_JOBRES_PID": "123456", "LSB_EXEC_CLUSTER": "lassen",
            "LSF_ENVDIR": "/etc/lsf", "LSF_BINDIR": "/opt/ibm/spectrumcomputing/lsf/10.1/linux3.10-glibc2.17-ppc64le-csm/bin",
            "JOBENV_HOSTNAME": "lassen710"}
