"""`jobenv submit --dry-run`: the batch script per site, compared with the site's own example
scripts, and every input (command line, profile) treated as hostile.

The site examples below are copied from the sites' documentation sources, cited with
their lines; a test asserts that each of their directives is one of jobenv's (same
values asked for), so a profile that drifts from its site's documentation fails here.
"""
from __future__ import annotations

import os
import shlex
import stat

import pytest

from conftest import base_env, jobenv

# ALCF, "Example Job Scripts", GPU MPI example: https://docs.alcf.anl.gov/running-jobs/example-job-scripts/
# source: github.com/argonne-lcf/user-guides docs/running-jobs/example-job-scripts.md lines 124-131
# (commit 7d04a3f91d5eaf6d731be6d267617c2e5cbe722e, 2026-08-19)
POLARIS_DOC = """\
#!/bin/bash -l
#PBS -l select=2:system=polaris
#PBS -l place=scatter
#PBS -l walltime=0:30:00
#PBS -l filesystems=home:eagle
#PBS -j oe
#PBS -q debug
#PBS -A Catalyst
"""
# ALCF, "Running Jobs on Aurora", sample 4-node script: https://docs.alcf.anl.gov/aurora/running-jobs-aurora/
# source: argonne-lcf/user-guides docs/aurora/running-jobs-aurora.md lines 246-253 (same commit);
# `<fs1:fs2>` is the page's placeholder, `filesystems=flare:home` its own example (line 61's
# directive with the values of the interactive line 45 and the Aurora profile)
AURORA_DOC = """\
#!/bin/bash -l
#PBS -N AFFINITY
#PBS -l select=4
#PBS -l place=scatter
#PBS -l walltime=0:10:00
#PBS -l filesystems=flare:home
#PBS -q debug-scaling
#PBS -A <MYPROJECT>
"""
# OLCF, Frontier User Guide, "Batch Scripts": https://docs.olcf.ornl.gov/systems/frontier_user_guide.html
# source: github.com/olcf/olcf-user-docs systems/frontier_user_guide.rst lines 1153-1159
# (commit 2745903177977d57d4ad353203f5fd4df05dcc97, 2026-07-22)
FRONTIER_DOC = """\
#!/bin/bash
#SBATCH -A ABC123
#SBATCH -J RunSim123
#SBATCH -o %x-%j.out
#SBATCH -t 1:00:00
#SBATCH -p batch
#SBATCH -N 1024
"""
# ALCF, "Job and Queue Scheduling on ThetaGPU" (Cobalt): directives on the script's top
# lines, `#COBALT -n 2 -t 2:00:00 -q full-node`; Cobalt "records the path to the executable
# or script, but it does not make a copy" (so it runs that very file: it must be executable).
# source: argonne-lcf/user-guides docs/sophia/not_in_nav/queueing-and-running-jobs/
# job-and-queue-scheduling.md lines 146 and 246 (commit e83c3bfa4c1fd7479daac3598a00f38271567816, 2026-05-21)
COBALT_DOC = "#COBALT -n 2 -t 2:00:00 -q full-node\n"
# NERSC's own Perlmutter GPU training example, github.com/NERSC/Migrate-to-Perlmutter
# GPU/Ex-4/batch.sh lines 1-7 (commit 197295e1aa1959f526e7800b58c2ff0b9fc386a8), and NERSC
# "Queues and Charges" (https://docs.nersc.gov/jobs/policy/: the queue is a QOS chosen with
# -q, "debug" the default). jobenv writes `-G 4` (GPUs in all) as --gpus-per-node=4, the
# same on one node and right on several, and -t as H:MM:SS (EQUIVALENT below).
PERLMUTTER_DOC = """\
#!/bin/bash
#SBATCH -N 1
#SBATCH -C gpu
#SBATCH -G 4
#SBATCH -t 5
# replace xxx below with the NERSC repo you plan to use, eg m1234
#SBATCH -A xxx
"""
EQUIVALENT = {"-G 4": "--gpus-per-node=4", "-t 5": "-t 0:05:00"}

# the site-specific lines jobenv writes differently on purpose: the job name, the output
# file (jobenv's own), the join (jobenv's PBS -j oe comes with its -o)
OURS = ("-N AFFINITY", "-J RunSim123", "-o %x-%j.out")


def directives(text: str, prefix: str) -> list:
    """Each option of each directive line, as `-opt value` pairs (Cobalt puts several on one line)."""
    out = []
    for line in text.splitlines():
        if line.startswith(prefix + " "):
            words = line[len(prefix) + 1:].split()
            i = 0
            while i < len(words):
                takes = i + 1 < len(words) and not words[i + 1].startswith("-")
                out.append(" ".join(words[i:i + 2]) if takes else words[i])
                i += 2 if takes else 1
    return out


def dry_run(home, *args, extra=None):
    env = base_env(home, extra)
    p = jobenv(["submit", "--dry-run", *args, "--", "python3", "train.py"], env)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("profile,doc,prefix,args", [
    ("polaris", POLARIS_DOC, "#PBS", ["--nodes", "2", "--time", "0:30:00", "-q", "debug", "-A", "Catalyst"]),
    ("aurora", AURORA_DOC, "#PBS", ["--nodes", "4", "--time", "10", "-q", "debug-scaling", "-A", "<MYPROJECT>"]),
    ("frontier", FRONTIER_DOC, "#SBATCH", ["--nodes", "1024", "--time", "60", "-A", "ABC123"]),
    ("cobalt", COBALT_DOC, "#COBALT", ["--nodes", "2", "--time", "2:00:00", "-q", "full-node"]),
    ("perlmutter", PERLMUTTER_DOC, "#SBATCH", ["--nodes", "1", "--time", "5", "-A", "xxx"]),
])
def test_site_scripts_match_their_documentation(home, profile, doc, prefix, args):
    if "<MYPROJECT>" in args:  # the page's placeholder is no account name: compare with a real word
        args = [a if a != "<MYPROJECT>" else "myproj" for a in args]
        doc = doc.replace("<MYPROJECT>", "myproj")
    script = dry_run(home, "--profile", profile, *args)
    assert script.startswith("#!/bin/sh\n")
    ours = directives(script, prefix)
    for want in directives(doc, prefix):
        want = EQUIVALENT.get(want, want)
        if want not in OURS:
            assert want in ours, f"{profile}: the site's `{prefix} {want}` is missing from\n{script}"
    # every directive comes before the first command (schedulers stop reading there)
    body = script.splitlines()[1:]
    first_cmd = next(i for i, ln in enumerate(body) if not ln.startswith("#"))
    assert not any(ln.startswith(prefix) for ln in body[first_cmd:])


def test_script_runs_save_then_launch_with_flags_and_exact_words(home):
    cmd = ["python3", "-c", "print('it''s $HOME `id` $(id)')", "a b", "new\nline", "*", "--"]
    env = base_env(home)
    p = jobenv(["submit", "--dry-run", "--profile", "slurm", "--nodes", "2", "--ranks-per-host", "2",
                "--timeout", "600", "--retries", "2", "--label", "--launcher-args", "--cpu-bind none", "--", *cmd], env)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "#SBATCH -N 2" in lines and "#SBATCH --ntasks-per-node=2" in lines
    save = next(ln for ln in lines if ln.startswith("jobenv save"))
    launch = p.stdout[p.stdout.index("\njobenv launch") + 1:p.stdout.index("\nrc=$?")]  # a word may hold a newline
    assert shlex.split(save)[2:7] == ["--quiet", "--profile", "slurm", "--ranks-per-host", "2"]
    words = shlex.split(launch)
    assert words[words.index("--timeout") + 1] == "600" and words[words.index("--retries") + 1] == "2"
    assert "--label" in words and "--launcher-args=--cpu-bind none" in words and "--idle-timeout" not in words
    assert "--gpu-bind" not in words and "--exclude-failed" not in words  # flags not given stay off
    assert words[words.index("--") + 1:] == cmd  # every byte of the command survives the shell
    func = next(ln for ln in lines if ln.startswith("jobenv() {"))
    assert func.split()[2].startswith("'/") and "sys.path.insert(0" in func  # this jobenv, by absolute path


def test_the_container_goes_to_launch_in_the_script(home):
    env = base_env(home)
    p = jobenv(["submit", "--dry-run", "--profile", "slurm", "--container", "img dir", "--container-runtime",
                "charliecloud", "--bind", "/data:/data:ro", "--bind", "/scratch", "--", "python3", "t.py"], env)
    assert p.returncode == 0, p.stderr
    launch = p.stdout[p.stdout.index("\njobenv launch") + 1:p.stdout.index("\nrc=$?")]
    words = shlex.split(launch)
    assert words[words.index("--container") + 1] == "img dir" and "--container-runtime" in words
    assert [w for w in words if w.startswith("--bind")] == ["--bind=/data:/data:ro", "--bind=/scratch"]
    assert words[words.index("--") + 1:] == ["python3", "t.py"]
    p = jobenv(["submit", "--dry-run", "--profile", "slurm", "--bind", "/data", "--", "python3", "t.py"], env)
    assert p.returncode == 2 and "--bind needs --container IMAGE" in p.stderr, p.stderr


def test_cobalt_script_is_executable(home, tmp_path):
    out = tmp_path / "job.sh"
    dry_run(home, "--profile", "cobalt", "--nodes", "2", "--script-out", str(out))
    mode = stat.S_IMODE(out.stat().st_mode)
    assert mode & 0o100 and not mode & 0o022, oct(mode)
    slurm = tmp_path / "slurm.sh"
    dry_run(home, "--profile", "slurm", "--script-out", str(slurm))
    assert not stat.S_IMODE(slurm.stat().st_mode) & 0o111  # sbatch copies the script: no need


@pytest.mark.parametrize("args,says", [
    (["--profile", "polaris", "-q", "debug\n#PBS -l select=999"], "--queue"),
    (["--profile", "polaris", "-A", "a b"], "--account"),
    (["--profile", "polaris", "--time", "1e9"], "--time"),
    (["--profile", "polaris", "--time", "0"], "--time"),
    (["--profile", "local"], "declares no `submit`"),
    (["--profile", "nope"], "unknown profile"),
])
def test_hostile_command_line_is_one_line_and_exit_5(home, args, says):
    p = jobenv(["submit", "--dry-run", *args, "--", "true"], base_env(home))
    assert p.returncode == 5 and p.stdout == "", (p.returncode, p.stdout)
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("jobenv: error:") and says in p.stderr, p.stderr


def write_profile(home, text):
    d = home / ".config" / "jobenv" / "profiles"
    d.mkdir(parents=True, exist_ok=True)
    (d / "mysite.yaml").write_text(text)


MYSITE = """\
name: mysite
scheduler: slurm
launchers:
  - argv: [srun, -n, '{nranks}']
vars: {constraint: a100}
submit:
  directives:
    - '-N {nodes}'
    - '-C {constraint}'
    - '-A {account}'
    - {when: queue, args: ['--qos={queue}']}
"""


def test_user_profile_adds_its_own_directives(home):
    write_profile(home, MYSITE)
    script = dry_run(home, "--profile", "mysite", "-A", "proj1", "--nodes", "3")
    assert directives(script, "#SBATCH")[-3:] == ["-N 3", "-C a100", "-A proj1"]
    p = jobenv(["submit", "--dry-run", "--profile", "mysite", "--", "true"], base_env(home))
    assert p.returncode == 5 and "needs --account" in p.stderr


@pytest.mark.parametrize("directive", ['"-q x\\n/bin/rm -rf ~"', "'-A {nope}'", "{when: nope, args: ['-x']}",
                                       "[a, b]", '"-q \\u001b[2J"'])
def test_hostile_profile_directives_are_refused(home, directive):
    write_profile(home, MYSITE.replace("'-N {nodes}'", directive))
    p = jobenv(["submit", "--dry-run", "--profile", "mysite", "-A", "x", "--", "true"], base_env(home))
    assert p.returncode == 5 and p.stderr.count("\n") == 1 and "submit" in p.stderr, p.stderr
    assert "\x1b" not in p.stderr


def test_profile_var_with_a_newline_never_makes_a_second_line(home):
    write_profile(home, MYSITE.replace("vars: {constraint: a100}", 'vars: {constraint: "a100\\ntouch /tmp/owned"}'))
    p = jobenv(["submit", "--dry-run", "--profile", "mysite", "-A", "x", "--", "true"], base_env(home))
    assert p.returncode == 5 and p.stdout == "" and "not one printable line" in p.stderr, p.stdout + p.stderr


def test_submission_directory_with_odd_characters_is_refused(home, tmp_path):
    odd = tmp_path / "my store"
    p = jobenv(["submit", "--profile", "slurm", "--", "true"], base_env(home, {"JOBENV_HOME": str(odd)}))
    assert p.returncode == 5 and "JOBENV_HOME" in p.stderr, p.stderr
    assert not os.path.exists(odd / "batch" / "x")


@pytest.mark.parametrize("scheduler,printed,jobid", [
    ("slurm", "1\n", "1"),  # sbatch --parsable, recorded on tests/cluster (Slurm 22.05)
    ("slurm", "4821;cluster2\n", "4821"),  # sbatch(1): --parsable prints `jobid[;cluster_name]`
    ("pbs", "2024084.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov\n", "2024084.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov"),
    ("pbs", "123[].server\n", "123[].server"),  # an array job (design.md §3: ids contain [])
    ("cobalt", "12345\n", "12345"),  # ALCF Cobalt page: `qsub submit.csh` prints `12345` (line 152)
    ("lsf", "Job <12345> is submitted to queue <pbatch>.\n", "12345"),  # IBM LSF 10.1 bsub
    ("flux", "ƒ2oLkTLb\n", "ƒ2oLkTLb"),  # flux-batch(1) prints the F58 id
    ("slurm", "Submitted batch job 1; touch /tmp/x\n", None),
    ("slurm", "-rf\n", None),
    ("pbs", "qsub: Unknown queue\n", None),
    ("cobalt", "12345 && reboot\n", None),
    ("flux", "--help\n", None),
])
def test_job_id_read_from_submit_output(scheduler, printed, jobid):
    from jobenv.schedulers import descriptor

    assert descriptor(scheduler).batch.read_jobid(printed) == jobid


@pytest.mark.parametrize("profile", ["pbs", "polaris", "aurora", "sunspot"])
def test_pbs_scripts_place_each_chunk_on_its_own_host(home, profile):
    """`select=N` alone lets PBS pack every chunk onto one host (OpenPBS's default place is
    `free`: seen on a real 3-host OpenPBS, both chunks of `--nodes 2` on one host)."""
    args = ["--nodes", "2", "--time", "10", "-q", "debug", "-A", "proj"]
    assert "-l place=scatter" in directives(dry_run(home, "--profile", profile, *args), "#PBS")


def test_script_carries_the_submitting_shells_path(home, tmp_path):
    """PBS starts the job with its own PATH (qsub passes no environment): the script sets the
    submitting shell's, so save and launch find the venv's mpiexec there, not Debian's Open
    MPI one (issue 25).  The line is run by a real sh whose PATH finds another mpiexec."""
    import subprocess
    import sys

    venv_bin = os.path.dirname(sys.executable)
    odd = tmp_path / "it's a dir"
    odd.mkdir()
    path = f"{odd}:{venv_bin}:/usr/bin:/bin"
    script = dry_run(home, "--profile", "pbs", "--nodes", "2", "--time", "10", extra={"PATH": path})
    line = next(ln for ln in script.splitlines() if ln.startswith("PATH="))
    p = subprocess.run(["/bin/sh", "-c", f"{line}\ncommand -v mpiexec; printf %s \"$PATH\""],
                       env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True)
    assert p.stdout == f"{venv_bin}/mpiexec\n{path}"


def submit_dry(home, *args, cmd=("python3", "train.py")):
    return jobenv(["submit", "--dry-run", *args, "--", *cmd], base_env(home))


def test_queue_is_picked_from_the_profiles_limits_or_refused_in_one_line(home):
    """Polaris's debug queue takes 2 nodes (docs.alcf.anl.gov/polaris/running-jobs/): -N 8 without
    -q asks for debug-scaling and says so; -q debug with -N 8, or 8 nodes for 2 hours, is refused."""
    p = submit_dry(home, "--profile", "polaris", "-N", "8")
    assert p.returncode == 0 and "#PBS -q debug-scaling" in p.stdout.splitlines(), p.stdout + p.stderr
    assert p.stderr.count("\n") == 1 and "queue debug takes 1-2 nodes" in p.stderr and "debug-scaling" in p.stderr
    p = submit_dry(home, "--profile", "polaris", "-N", "2")
    assert "#PBS -q debug" in p.stdout.splitlines() and p.stderr == "", p.stderr  # the default fits: silent
    p = submit_dry(home, "--profile", "polaris", "-N", "12", "-t", "3:00:00")
    assert "#PBS -q prod" in p.stdout.splitlines(), p.stdout + p.stderr
    for args, says in ((["-N", "8", "-q", "debug"], "queue debug of profile polaris takes 1-2 nodes"),
                       (["-N", "8", "-t", "2:00:00"], "no queue of profile polaris takes 8 nodes for 2:00:00")):
        p = submit_dry(home, "--profile", "polaris", *args)
        assert p.returncode == 5 and p.stdout == "" and p.stderr.count("\n") == 1 and says in p.stderr, p.stderr
    p = submit_dry(home, "--profile", "polaris", "-N", "8", "-q", "preemptable")  # a queue the profile does not judge
    assert p.returncode == 0 and "#PBS -q preemptable" in p.stdout.splitlines(), p.stderr


def test_perlmutter_debug_qos_runs_30_minutes(home):
    p = submit_dry(home, "--profile", "perlmutter", "-t", "1:00:00")
    assert "#SBATCH -q regular" in p.stdout.splitlines() and "at most 0:30:00" in p.stderr, p.stdout + p.stderr
    p = submit_dry(home, "--profile", "perlmutter", "-t", "30")
    assert "#SBATCH -q debug" in p.stdout.splitlines() and p.stderr == "", p.stderr


@pytest.mark.parametrize("cmd,name", [
    (["python3", "train.py", "--lr", "1"], "train"), (["python", "-u", "-m", "pkg.trainer"], "trainer"),
    (["./ior", "-w"], "ior"), (["env", "A=1", "python3.11", "/x/y/run_me.sh"], "run_me"),
    (["torchrun", "--nproc-per-node", "4", "t.py"], "t"), (["python3", "-c", "print(1)"], "jobenv"),
    (["sh", "-c", "echo $RANK"], "jobenv"), (["python3", "9lives.py"], "lives"), (["--", "sleep", "3"], "sleep"),
])
def test_job_is_named_after_its_command(home, cmd, name):
    from jobenv.batch.script import job_name

    assert job_name(cmd) == name
    if cmd[0] != "--":
        p = submit_dry(home, "--profile", "slurm", cmd=cmd)
        assert f"#SBATCH -J {name}" in p.stdout.splitlines(), p.stdout + p.stderr


@pytest.mark.parametrize("queues", ["[debug]", "{debug: {max_nodes: 0}}", "{debug: {walltime: 30}}",
                                    "{'a b': {}}", "{debug: {min_nodes: 5, max_nodes: 2}}", "{debug: {max_nodes: true}}"])
def test_hostile_queue_limits_are_refused(home, queues):
    write_profile(home, MYSITE + f"  queues: {queues}\n")
    p = jobenv(["submit", "--dry-run", "--profile", "mysite", "-A", "x", "--", "true"], base_env(home))
    assert p.returncode == 5 and p.stderr.count("\n") == 1 and "queue" in p.stderr, p.stderr
