"""The transparency probe: what a rank can see of how it was started, as JSON in OUTDIR/probe-<rank>.json.

tests/test_rank_transparency.py runs it under each launcher bare and under `jobenv launch`, and
compares the two rank by rank: jobenv may differ only in the documented variables."""
import json
import os
import stat
import sys

# taken before anything else runs: what the interpreter started with
MODULES, PATH = sorted(sys.modules), list(sys.path)
SITE = getattr(sys.modules.get("sitecustomize"), "__file__", None)


def status() -> dict:
    with open("/proc/self/status") as f:
        rows = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    return {k: rows[k].strip() for k in ("SigIgn", "SigBlk", "SigCgt", "Threads")}


def kind(fd: int) -> str:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return "closed"
    for name in ("S_ISFIFO", "S_ISSOCK", "S_ISCHR", "S_ISREG", "S_ISDIR"):
        if getattr(stat, name)(mode):
            target = os.readlink(f"/proc/self/fd/{fd}") if name == "S_ISCHR" else ""
            if target.startswith("/dev/pts/"):  # a terminal (Open MPI's mpirun gives each rank one): which is chance
                target = "/dev/pts/N"
            return name[4:].lower() + (f":{target}" if target else "")
    return "other"


def fds() -> dict:
    names = os.listdir("/proc/self/fd")  # its own descriptor is gone once listdir returns
    return {n: kind(int(n)) for n in sorted(names, key=int) if kind(int(n)) != "closed"}


def rank_process() -> int:
    """The process the launcher started for this rank: this one, or its parent when that is
    jobenv's rank keeper (the program runs one process down, in the keeper's group and session)."""
    ppid = os.getppid()
    try:
        with open(f"/proc/{ppid}/cmdline", "rb") as f:
            keeper = b"jobenv/rank/keeper.py" in f.read()
    except OSError:
        keeper = False
    return ppid if keeper else os.getpid()


def main() -> None:
    out, rank = sys.argv[1], next(os.environ[v] for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID",
                                                            "FLUX_TASK_RANK", "RANK") if v in os.environ)
    pid = rank_process()
    ppid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])  # the launcher's process
    report = {
        **status(), "fds": fds(), "stdin": kind(0),
        # the rank's place in groups and sessions, and that the program shares the rank's group and session
        "group_leader": os.getpgid(pid) == pid, "session_leader": os.getsid(pid) == pid,
        "in_rank_group": os.getpgid(0) == os.getpgid(pid), "in_rank_session": os.getsid(0) == os.getsid(pid),
        "parent_group": os.getpgid(pid) == os.getpgid(ppid), "parent_session": os.getsid(pid) == os.getsid(ppid),
        "modules": MODULES, "path": PATH, "sitecustomize": SITE, "env": sorted(os.environ),
    }
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    p = ctx.Process(target=sys.exit, args=(7,))
    p.start()
    p.join()
    report["spawn_sys_exit"] = p.exitcode
    child = os.fork()
    if child == 0:
        os._exit(3 if status()["SigCgt"] == report["SigCgt"] else 4)
    report["fork_child"] = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
    with open(os.path.join(out, f"probe-{rank}.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
