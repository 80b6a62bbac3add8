"""Capturing a job from outside it (`jobenv save --job`): each scheduler's parser on recorded
outputs of its own command, and the capture's refusals.

Recorded outputs (tests/data):
- slurm-scontrol-show-job-d.txt: `scontrol show job -d 1` of `sbatch -N 2 --ntasks-per-node 2`
  on the test cluster (Slurm 22.05.8, tests/cluster/slurm.py), verbatim.
- slurm-scontrol-show-job-d-gpu.txt: the same record with the GPU lines of a GPU job as
  sites print them: `JOB_GRES=gpu:a100:4` and the per-node detail line
  `Nodes=uri-gpu003 CPU_IDs=0-63 Mem=515000 GRES=gpu:a100:4(IDX:0-3)` (UMass Unity docs,
  "Monitor a batch job", `scontrol -d show job` sample) and TRES `gres/gpu=N` (OSC/ood_core
  issue 870: `cpu=10,mem=100G,node=1,billing=10,gres/gpu=1`); a JobName and WorkDir with spaces.
- slurm-scontrol-show-job-d-name-{words,newline}.txt: `scontrol show job -d ID` on the test cluster
  of jobs of the second local user submitted with `sbatch --uid=jobenvmallory -J NAME`, NAME
  `x UserId=root(0) NodeList=evilnode[1-2] WorkDir=/tmp/evil` and `x<newline>   UserId=root(0)
  GroupId=root(0)`: Slurm prints the name as it is, before the real UserId line.
- pbs-qstat-fx-json*.txt: `qstat -x -f -F json` on Polaris (PBS Pro 2022.1), also its
  unescaped form (PBS writes Variable_List values without JSON escaping).
- openpbs-qstat-f-json-running-{user,manager}-view.txt: `qstat -f -F json ID` of one running
  job (root's, `qsub -v 'A=1,B=two words,...' -l select=2:ncpus=2:mpiprocs=2 -l place=scatter`)
  on the real 3-host OpenPBS 23.06.06 of tests/cluster/pbs.py, asked by an ordinary user and by
  root (a manager): the ordinary user's view has no `euser`/`egroup`, only `Job_Owner`.
- cobalt-qstat-lf.txt: `qstat -lf` in Cobalt's vertical format (Cobalt.Util.print_vertical,
  ido/cobalt src/lib/Util.py: `JobID: N`, then `    %-<w>s: value` per field), for the jobs of
  cobalt-qstat.txt.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from jobenv.capture import outside
from jobenv.store import record
from jobenv.core.errors import BadInput, BadRecord, JobEnded, NoRecord
from jobenv.launch.plan.template import context, render
from jobenv.launch.plan import sizing
from jobenv.capture.save import Options, build, save
from jobenv.schedulers import cobalt, pbs, slurm
from jobenv.launch.types import Request

DATA = Path(__file__).parent / "data"


def data(name: str) -> str:
    return (DATA / name).read_text()


def test_scontrol_recorded_output():
    cap = slurm.parse_job(data("slurm-scontrol-show-job-d.txt"), "1")
    assert cap.hosts == ["node1", "node2"] and cap.slots == [2, 2] and cap.gpus_hint is None
    assert (cap.state, cap.owner) == ("RUNNING", "root(0)")
    assert cap.env["SLURM_JOB_NODELIST"] == "node[1-2]" and cap.env["SLURM_JOB_NUM_NODES"] == "2"
    assert cap.sources["hosts"] == "scontrol NodeList" and cap.sources["slots"] == "scontrol NtasksPerN"
    assert "SLURM_JOB_ACCOUNT" not in cap.env  # `(null)` is no account


def test_scontrol_gpus_per_node_and_words_with_spaces():
    text = data("slurm-scontrol-show-job-d-gpu.txt")
    cap = slurm.parse_job(text, "3141592")
    assert cap.hosts == ["nid001000", "nid001001"] and cap.gpus_hint == 4 and cap.slots == [4, 4]
    assert cap.sources["gpus_per_host"] == "scontrol -d GRES per node"
    assert cap.jobname == "train gpt" and cap.env["SLURM_SUBMIT_DIR"] == "/pscratch/sd/a/alice/run 1"
    no_detail = "\n".join(ln for ln in text.splitlines() if "CPU_IDs=" not in ln)
    cap = slurm.parse_job(no_detail, "3141592")
    assert cap.gpus_hint == 4 and cap.sources["gpus_per_host"] == "scontrol TRES gres/gpu"


@pytest.mark.parametrize("bad", ["NodeList=node[1-", "NodeList=n;rm", "NodeList=$(id)", "NodeList=a b"])
def test_scontrol_hostile_nodelist_is_one_error(bad):
    text = data("slurm-scontrol-show-job-d.txt").replace("NodeList=node[1-2]", bad)
    with pytest.raises(BadInput):
        slurm.parse_job(text, "1")


def test_scontrol_text_about_another_job_is_refused():
    with pytest.raises(BadInput, match="does not describe job 2"):
        slurm.parse_job(data("slurm-scontrol-show-job-d.txt"), "2")
    with pytest.raises(BadInput):
        slurm.parse_job("slurm_load_jobs error: Invalid job id specified\n", "1")


@pytest.mark.parametrize("name", ["pbs-qstat-fx-json.txt", "pbs-qstat-fx-json-unescaped.txt"])
def test_pbs_qstat_json_recorded_output(name):
    text = data(name)
    cap = pbs.parse_job(text, "2024084")
    assert cap.jobid == "2024084.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov"
    assert cap.hosts == ["x3006c0s13b0n0", "x3006c0s19b0n0"] and cap.gpus_hint == 4
    assert (cap.state, cap.owner) == ("R", "alice")
    assert cap.sources["hosts"] == "qstat exec_host" and cap.sources["gpus_per_host"] == "qstat exec_vnode ngpus"
    assert cap.env["PBS_JOBID"] == cap.jobid and cap.env["PBS_ACCOUNT"] == "datascience"
    assert pbs.parse_found(text, "x3006c0s19b0n0.hsn.cm.polaris.alcf.anl.gov", "alice") == [cap.jobid]
    assert pbs.parse_found(text, "x3006c0s19b0n0", "bob") == []
    ended = pbs.parse_job(text, "2023999")
    assert ended.state == "F"


def test_openpbs_job_as_an_ordinary_user_sees_it_is_owned_through_job_owner():
    """issue 25: OpenPBS shows `euser` to managers only; `save --job` refused every ordinary
    user's own job ("belongs to '', not to you").  `Job_Owner` (user@host) is in both views."""
    user = pbs.parse_job(data("openpbs-qstat-f-json-running-user-view.txt"), "0")
    manager = pbs.parse_job(data("openpbs-qstat-f-json-running-manager-view.txt"), "0")
    assert (user.owner, user.sources["owner"]) == ("root", "qstat Job_Owner")
    assert (manager.owner, manager.sources["owner"]) == ("root", "qstat euser")
    for cap in (user, manager):
        assert cap.jobid == "0.pbs1" and cap.hosts == ["pbs1", "pbs2"] and cap.slots == [2, 2]
        assert cap.state == "R" and cap.jobname == "train.v2-x_y"
    assert pbs.parse_found(data("openpbs-qstat-f-json-running-user-view.txt"), "pbs2", "root") == ["0.pbs1"]


def test_openpbs_owner_may_save_its_job_from_outside(tmp_path, monkeypatch):
    env = stub(tmp_path, "qstat", data("openpbs-qstat-f-json-running-user-view.txt"))
    monkeypatch.setattr(outside, "_user", lambda: "root")
    cap, asked = outside.describe("pbs", "0", env)
    assert cap.hosts == ["pbs1", "pbs2"] and asked == "qstat -f -F json 0"
    monkeypatch.setattr(outside, "_user", lambda: "bob")
    with pytest.raises(BadInput, match="belongs to 'root', not to you"):
        outside.describe("pbs", "0", env)


def test_pbs_hostile_exec_host_is_one_error():
    text = data("pbs-qstat-fx-json.txt").replace("x3006c0s13b0n0/0*64+", "$(id)/0*64+")
    with pytest.raises(BadInput):
        pbs.parse_job(text, "2024084")


def test_cobalt_qstat_lf_recorded_shape():
    text = data("cobalt-qstat-lf.txt")
    cap = cobalt.parse_job(text, "10446")
    assert cap.hosts == [f"thetagpu{i:02d}" for i in range(1, 9)] and (cap.state, cap.owner) == ("running", "alice")
    assert cap.jobname == "train" and cap.sources["hosts"] == "qstat -lf Location"
    assert cobalt.parse_job(text, "10450").hosts == []  # queued: no Location yet
    assert cobalt.parse_found(text, "thetagpu05", "alice") == ["10446"]
    assert cobalt.parse_found(text, "thetagpu09", "alice") == []


@pytest.mark.parametrize("owner,uid,user,mine", [
    ("root(0)", 0, "root", True), ("alice(51234)", 0, "root", False), ("alice(51234)", 51234, "x", True),
    ("alice", 1, "alice", True), ("alice", 1, "bob", False), ("", 1, "", False), ("(0)x", 0, "root", False),
])
def test_is_mine_by_uid_where_the_scheduler_names_one(owner, uid, user, mine):
    assert outside.is_mine(owner, uid, user) is mine


def stub(tmp_path: Path, program: str, text: str, rc: int = 0) -> dict:
    """A PATH whose `program` prints recorded output (no PBS or Cobalt server here)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "out.txt").write_text(text)
    exe = bindir / program
    exe.write_text(f"#!/bin/sh\necho \"$@\" > {bindir}/args\ncat {bindir}/out.txt\nexit {rc}\n")
    exe.chmod(0o755)
    return {"PATH": f"{bindir}:/usr/bin:/bin", "JOBENV_HOME": str(tmp_path / "home"), "JOBENV_HOSTNAME": "login1"}


def test_pbs_job_captured_from_outside_runs_through_its_nodes(tmp_path, monkeypatch):
    monkeypatch.setattr(outside, "_user", lambda: "alice")
    env = stub(tmp_path, "qstat", data("pbs-qstat-fx-json.txt"))
    rec, _ = build(env, Options(scheduler="pbs", outside=True, job="2024084"), probe=lambda: (8, "probe of this login node"))
    assert rec.scheduler == "pbs" and rec.hosts == ["x3006c0s13b0n0", "x3006c0s19b0n0"]
    assert rec.gpus_per_host == 4 and rec.status["gpus_from"] == "qstat exec_vnode ngpus"  # not this node's probe
    assert rec.machine == "polaris" and rec.launch[0] == "mpiexec" and "--jobid=2024084" not in rec.launch
    i = rec.launch.index("-n")
    assert rec.launch[i + 1] == "8" and rec.launch[rec.launch.index("--hostfile") + 1] == rec.hostfile
    saved, _ = save(env, Options(scheduler="pbs", outside=True, job="2024084"))
    assert Path(saved.hostfile).read_text().split() == rec.hosts  # the job's nodes, from exec_host
    assert rec.provenance == {"how": "outside", "command": "qstat -f -F json 2024084", "on": "login1",
                              "fields": {"state": "qstat job_state", "owner": "qstat euser",
                                         "hosts": "qstat exec_host", "gpus_per_host": "qstat exec_vnode ngpus"}}
    assert (tmp_path / "bin" / "args").read_text().split() == ["-f", "-F", "json", "2024084"]
    again = record.from_json(rec.to_json())
    assert again.provenance == rec.provenance


def test_refusals(tmp_path, monkeypatch):
    env = stub(tmp_path, "qstat", data("pbs-qstat-fx-json.txt"))
    monkeypatch.setattr(outside, "_user", lambda: "bob")
    with pytest.raises(BadInput, match="belongs to 'alice', not to you"):
        outside.describe("pbs", "2024084", env)
    monkeypatch.setattr(outside, "_user", lambda: "alice")
    with pytest.raises(JobEnded, match="has ended"):
        outside.describe("pbs", "2023999", env)
    with pytest.raises(BadInput, match="not a pbs job id"):
        outside.describe("pbs", "-x", env)
    env = stub(tmp_path, "qstat", "qstat: Unknown Job Id 7.pbs\n", rc=153)
    with pytest.raises(NoRecord, match="does not know job 7"):
        outside.describe("pbs", "7", env)
    env = stub(tmp_path, "qstat", data("cobalt-qstat-lf.txt"))
    with pytest.raises(BadInput, match="queued, not running"):
        outside.describe("cobalt", "10450", env)


def test_no_id_finds_one_job_or_names_them_all(tmp_path, monkeypatch):
    monkeypatch.setattr(outside, "_user", lambda: "alice")
    two = data("cobalt-qstat-lf.txt").replace("State         : queued", "State         : running").replace(
        "Location      : None", "Location      : thetagpu03")
    env = stub(tmp_path, "qstat", two)
    env["JOBENV_HOSTNAME"] = "thetagpu03"
    with pytest.raises(BadInput, match=r"2 running cobalt jobs of alice on thetagpu03 \(10446, 10450\)"):
        outside.find("cobalt", env)
    env["JOBENV_HOSTNAME"] = "thetagpu01"
    assert outside.find("cobalt", env) == "10446"
    env["JOBENV_HOSTNAME"] = "login1"
    with pytest.raises(NoRecord, match="no running cobalt job of alice on login1"):
        outside.find("cobalt", env)
    env = stub(tmp_path, "qstat", "qstat: error: no\x1b[2J server\n", rc=1)
    with pytest.raises(NoRecord, match=r"on login1 \(qstat: error: no.*server\): give its id"):
        outside.find("cobalt", env)


def test_srun_is_attached_to_the_job_once_and_mpiexec_never():
    template = sizing.job_template(["srun", "-N", "{nhosts}"], "srun", outside=True)
    ctx = context(2, 1, 0, None, "42", {})
    assert render(template, ctx) == ["srun", "--jobid=42", "--overlap", "-N", "2"]
    size = sizing.choose(["a", "b"], 1, Request(nhosts=1), "42")
    argv, _ = sizing.render_sized(template, size, 0, "42", {}, "/hf", "srun")  # a sized launch: attached once
    assert argv.count("--jobid=42") == 1 and argv.count("--overlap") == 1
    assert sizing.job_template(["srun", "-N", "{nhosts}"], "srun", outside=False) == ["srun", "-N", "{nhosts}"]
    assert sizing.job_template(["mpiexec", "-n", 8], "pals", outside=True) == ["mpiexec", "-n", "8"]


def test_a_record_from_outside_records_its_attached_template_and_family(tmp_path, monkeypatch):
    mine = data("slurm-scontrol-show-job-d-gpu.txt").replace("alice(51234)", f"alice({os.getuid()})")
    env = stub(tmp_path, "scontrol", mine)
    rec, _ = build(env, Options(scheduler="slurm", outside=True, job="3141592"), probe=lambda: None)
    assert rec.launcher_family == "srun" and rec.launch_template["argv"][:3] == ["srun", "--jobid={jobid}", "--overlap"]
    assert rec.launch.count("--jobid=3141592") == 1


def test_records_without_provenance_still_load_and_bad_ones_are_named():
    old = json.loads(data("record-v1.json"))
    assert record.from_dict(old).provenance is None and "provenance" not in record.from_dict(old).to_dict()
    for bad in ({"how": "inside"}, {"how": "outside", "command": "x", "on": "h", "fields": {"a": 1}}, "x"):
        with pytest.raises(BadRecord, match="bad provenance"):
            record.from_dict({**old, "provenance": bad})


def test_scheduler_command_output_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(outside, "MAX_OUTPUT", 100)
    env = stub(tmp_path, "qstat", data("pbs-qstat-fx-json.txt"))
    with pytest.raises(BadInput, match="more than jobenv reads"):
        outside.describe("pbs", "2024084", env)
    assert os.path.exists(tmp_path / "bin" / "args")


RECORDED = {"slurm": ("slurm-scontrol-show-job-d-gpu.txt", "3141592"), "pbs": ("pbs-qstat-fx-json.txt", "2024084"),
            "cobalt": ("cobalt-qstat-lf.txt", "10446")}
PARSERS = {"slurm": slurm, "pbs": pbs, "cobalt": cobalt}


@pytest.mark.parametrize("name", list(RECORDED))
@settings(max_examples=150, deadline=None)
@given(cut=st.integers(0, 10_000), junk=st.text(max_size=40), at=st.integers(0, 10_000))
def test_mangled_outputs_give_a_capture_or_one_error(name, cut, junk, at):
    """A scheduler's answer cut short or with anything spliced in: a capture whose hosts
    are valid host names, or BadInput; never another exception."""
    from jobenv.core.hostlist import is_valid_host

    file, jobid = RECORDED[name]
    text = data(file)
    text = text[:at % (len(text) + 1)] + junk + text[at % (len(text) + 1):]
    text = text[:len(text) - cut % (len(text) + 1)]
    mod = PARSERS[name]
    try:
        cap = mod.parse_job(text, jobid)
    except BadInput:
        return
    assert all(is_valid_host(h) for h in cap.hosts)
    assert cap.gpus_hint is None or 0 <= cap.gpus_hint <= 1_000_000
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in cap.env.items())
    mod.parse_found(text, "x", "alice")


@pytest.mark.parametrize("old,new", [("gres/gpu=8", "gres/gpu=" + "9" * 5000), ("NumTasks=8", "NumTasks=" + "9" * 5000),
                                     ("NtasksPerN:B:S:C=4", "NtasksPerN:B:S:C=" + "9" * 5000),
                                     ("GRES=gpu:a100:4(", "GRES=gpu:a100:" + "9" * 5000 + "(")])
def test_numbers_past_python_int_limit_are_ignored_not_a_traceback(old, new):
    cap = slurm.parse_job(data("slurm-scontrol-show-job-d-gpu.txt").replace(old, new), "3141592")
    assert cap.gpus_hint in (None, 4) and cap.slots == [4, 4]
    text = data("pbs-qstat-fx-json-unescaped.txt").replace('"ngpus":8', '"ngpus":' + "9" * 5000)
    assert pbs.parse_job(text.replace("ngpus=4", "x=4"), "2024084").gpus_hint is None


def test_het_job_is_the_union_of_its_components():
    """Slurm's heterogeneous_jobs.html: each component has its own JobId and the leader's
    HetJobId, and `scontrol show job LEADER` prints every component.  (This shape is the
    recorded job twice, the second as component 1 on node4: the test cluster's select
    plugin refuses het jobs.)"""
    one = data("slurm-scontrol-show-job-d.txt")
    lead = one.replace("JobId=1 JobName=train", "JobId=1 HetJobId=1 HetJobOffset=0 JobName=train")
    comp = one.replace("JobId=1 JobName=train", "JobId=2 HetJobId=1 HetJobOffset=1 JobName=train").replace(
        "NodeList=node[1-2]", "NodeList=node4").replace("BatchHost=node1", "BatchHost=node4")
    cap = slurm.parse_job(lead + "\n" + comp, "1")
    assert cap.hosts == ["node1", "node2", "node4"] and cap.env["SLURM_JOB_NODELIST"] == "node1,node2,node4"
    assert cap.slots is None  # components differ: no one count per node


def test_pbs_an_attribute_named_twice_is_refused_not_read_first_wins():
    """PBS leaves Variable_List values unescaped: one quote in a `qsub -v` value breaks the
    JSON, and the line-by-line reading then also sees a user's `-v euser=root` (printed inside
    Variable_List, before the real euser) as the job's owner.  A key named twice in a job's
    block is ambiguous: refused, and never a match for `save --job` with no id."""
    text = data("pbs-qstat-fx-json-unescaped.txt").replace(
        '"PBS_O_SYSTEM":"Linux",', '"PBS_O_SYSTEM":"Linux",\n                "euser":"root",', 1)
    with pytest.raises(BadInput, match="names euser twice"):
        pbs.parse_job(text, "2024084")
    assert pbs.parse_found(text, "x3006c0s19b0n0", "root") == []
    assert pbs.parse_job(text, "2023999").state == "F"  # the other job's block is its own


# Another user's job whose name holds `Key=Value` words (scontrol prints the name at the end of
# the first line, before UserId=): the name is read whole, the fields are the job's own.
FORGED_NAME = "x UserId=root(0) NodeList=evilnode[1-2] WorkDir=/tmp/evil"
MALLORY = "UserId=jobenvmallory(1001) GroupId=jobenvmallory(1001)"


def mallorys(name: str) -> str:
    return data("slurm-scontrol-show-job-d.txt").replace("JobId=1 JobName=train", f"JobId=1 JobName={name}").replace(
        "UserId=root(0) GroupId=root(0)", MALLORY)


@pytest.mark.parametrize("name", [FORGED_NAME, "run x=1 y = 2  z=  StdOut=/root/.bashrc", "a JobName=b"])
def test_scontrol_job_name_with_key_value_words_is_read_whole(name):
    cap = slurm.parse_job(mallorys(name), "1")
    assert cap.jobname == name and cap.env["SLURM_JOB_NAME"] == name
    assert cap.owner == "jobenvmallory(1001)" and cap.hosts == ["node1", "node2"]
    assert cap.env["SLURM_SUBMIT_DIR"] == "/work/wt/s16-capture/tests"
    assert not outside.is_mine(cap.owner, 0, "root")


# A name (or comment) holding a newline puts lines of its own into the record; Slurm prints each
# key once per record, UserId= second, and only the job asked (its het components, array tasks).
NEWLINE_NAMES = [
    "x\n   UserId=root(0) GroupId=root(0)",  # a second UserId line
    "x\n   NodeList=evilnode1\n   WorkDir=/tmp/evil",  # fields before the real UserId=
    "x\n   UserId=root(0)\n   NodeList=evilnode1\n\nJobId=9 JobName=y",  # the real rest under another job
    "x\n   UserId=root(0)\n\nJobId=9 HetJobId=1 HetJobOffset=1 JobName=y",  # ... posing as a component
    "x\n\nJobId=1 JobName=y\n   UserId=root(0)",  # job 1 described twice
    "x\n     Nodes=evilnode1 CPU_IDs=0 Mem=0 GRES=gpu:64(IDX:0-63)",  # a detail line out of place
]


@pytest.mark.parametrize("name", NEWLINE_NAMES)
def test_scontrol_record_with_forged_lines_is_refused(name):
    with pytest.raises(BadInput, match="ambiguous|out of place|before UserId|describes job|twice"):
        slurm.parse_job(mallorys(name), "1")


def test_scontrol_array_task_forging_its_owner_is_refused():
    """An array task's name holding a planted UserId and a record break: the real rest of its
    record goes under a planted sibling task, whose owner then differs."""
    text = mallorys("x\n   UserId=root(0)\n\nJobId=9 ArrayJobId=1 ArrayTaskId=1 JobName=y").replace(
        "JobId=1 JobName=", "JobId=1 ArrayJobId=1 ArrayTaskId=0 JobName=")
    with pytest.raises(BadInput, match="different owners"):
        slurm.parse_job(text, "1")


def test_recorded_names_that_forge_fields():
    cap = slurm.parse_job(data("slurm-scontrol-show-job-d-name-words.txt") + "scontrol: warning: x=1\n", "1")
    assert cap.jobname == "x UserId=root(0) NodeList=evilnode[1-2] WorkDir=/tmp/evil"
    assert (cap.owner, cap.hosts, cap.env["SLURM_SUBMIT_DIR"]) == ("jobenvmallory(1001)", ["node1"], "/tmp")
    with pytest.raises(BadInput, match="ambiguous: UserId= is printed twice or out of place"):
        slurm.parse_job(data("slurm-scontrol-show-job-d-name-newline.txt"), "2")


def test_save_job_of_another_users_job_is_refused_end_to_end(tmp_path, home):
    """`jobenv save --job` through an `scontrol` on PATH printing Slurm's format for another
    user's job: refused (exit 5, one line), whatever its name says."""
    from conftest import base_env, jobenv

    for name, why in ((FORGED_NAME, "belongs to 'jobenvmallory(1001)', not to you"),
                      (NEWLINE_NAMES[0], "scontrol's answer about job 1 is ambiguous")):
        env = base_env(home, stub(tmp_path, "scontrol", mallorys(name)))
        p = jobenv(["save", "--job", "1", "--scheduler", "slurm"], env)
        assert p.returncode == 5 and p.stderr.count("\n") == 1 and why in p.stderr, p.stderr
        assert p.stderr.startswith("jobenv: error: ") and not list(Path(env["JOBENV_HOME"]).rglob("*.json"))
    env = base_env(home, stub(tmp_path, "scontrol", mallorys("x").replace(MALLORY, "UserId=root(0) GroupId=root(0)")))
    assert jobenv(["save", "--job", "1", "--scheduler", "slurm"], env).returncode == 0  # the control: root's own job
    assert list(Path(env["JOBENV_HOME"]).rglob("*.json"))
