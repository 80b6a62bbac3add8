"""The scheduler files are the one source of their facts: every table the rest of jobenv
reads (Python, the generated shell gate, the per-rank wrapper, init's gates, the CLI's
choices) is derived from the descriptors, and detection follows their rules."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from jobenv import schedulers
from jobenv.capture import importer
from jobenv.restore import init
from jobenv.store import liveness
from jobenv.restore import plan
from jobenv.profiles import load as profiles
from jobenv.runtime import discovery
from jobenv.schedulers import parse, render

REPO = Path(__file__).resolve().parent.parent


def test_tables_and_shell_gate_are_the_rendering_of_the_scheduler_files():
    assert render.main(["--check"]) == 0, "run: python -m jobenv.schedulers.render"
    descs = render.descriptors()
    for key, value in render.tables(descs).items():
        assert getattr(schedulers, key) == value, key
    assert [d.name for d in descs][-1] == "local"  # no variables of its own: detected last


def test_every_scheduler_fact_table_is_derived_from_the_descriptors():
    descs = render.descriptors()
    jobids = tuple(v for d in descs for v in d.jobid_vars)
    prefixes = tuple(p for d in descs for p in d.prefixes)
    assert plan.SITE_VARS is schedulers.SITE_VARS
    assert plan.is_secret is schedulers.is_secret and parse.is_secret is schedulers.is_secret
    assert liveness._QUERY_VARS == tuple(v for d in descs for v in d.query_vars)
    assert importer.SCHEDULER_PREFIXES == prefixes
    assert all(p in plan._LAUNCH_DENY_PREFIXES for p in prefixes)
    assert schedulers.job_id_vars() == ("JOBENV_JOBID",) + jobids
    assert discovery.job_id({"PBS_JOBID": "1.x", "SLURM_JOB_ID": "2"}, None) == "1.x"
    assert discovery.job_id({"JOBENV_JOBID": "3", "SLURM_JOB_ID": "2"}, None) == "3"
    wrapper = (REPO / "jobenv" / "rankwrap.sh").read_text()  # the launch hands it MASTER_PORT: it reads no job id
    assert not [v for v in schedulers.job_id_vars() if f"${{{v}" in wrapper or f" {v} " in wrapper]
    from jobenv.cli.main import save
    choices = next(p for p in save.params if p.name == "scheduler").type.choices  # type: ignore[attr-defined]
    assert tuple(choices) == tuple(d.name for d in descs)
    for shell in init.SHELLS:
        text = init.render(shell, "", "/bin/jobenv", True, "0")
        gate = "".join(("$" if shell == "fish" else "${") + v + ("" if shell == "fish" else "-}") for v in jobids)
        assert f'-n "{gate}"' in text, shell


def test_only_local_lacks_an_allocation_and_a_command_and_is_this_host():
    for d in render.descriptors():
        here = d.name == "local"
        assert (d.allocates, d.asks_command, d.this_host_only) == (not here, not here, here), d.name


def test_the_sites_ask_the_scheduler_s_facts_not_its_name(monkeypatch):
    """Flip local's facts in the rendered tables: every site follows the facts."""
    from jobenv.capture.save import ranks_per_host
    from jobenv.stage.hosts import per_host_argv
    from jobenv.store.record import from_dict

    cores = max(1, min(os.cpu_count() or 1, 4))
    assert ranks_per_host(0, None, "local", None, {})[0] == cores and ranks_per_host(0, None, "pbs", None, {})[0] == 1
    assert discovery.master_addr({}, "mpich", 4, 2, "local", ["a", "b"]) == discovery.LOOPBACK
    assert discovery.master_addr({}, "mpich", 4, 2, "slurm", ["a", "b"]) == "a"
    rec = from_dict({"schema_version": 2, "scheduler": "local", "jobid": "vm", "machine": "local", "hosts": ["vm"],
                     "gpus_per_host": 0, "ranks_per_host": 1, "launch": ["torchrun"], "env": {},
                     "created_at": 1.0, "created_on": "vm"})
    assert per_host_argv(rec, {}) == []
    monkeypatch.setattr(schedulers, "ALLOCATES", schedulers.ALLOCATES | {"local"})
    monkeypatch.setattr(schedulers, "THIS_HOST_ONLY", frozenset())
    assert ranks_per_host(0, None, "local", None, {})[0] == 1
    assert discovery.master_addr({}, "mpich", 4, 2, "local", ["a", "b"]) == "a"
    argv = per_host_argv(rec, {"XDG_CONFIG_HOME": "/nonexistent", "JOBENV_HOME": "/nonexistent/h"}, write=False)
    assert argv[0] == "torchrun"  # now through the job's launcher, one process per host


def test_each_scheduler_s_default_profile_is_shipped_for_it():
    shipped = profiles.load_all({"HOME": "/nonexistent", "JOBENV_PROFILES": ""})
    for d in render.descriptors():
        assert shipped[d.profile].scheduler == d.name


@pytest.mark.parametrize("desc", render.descriptors(), ids=lambda d: d.name)
def test_a_shell_holding_a_scheduler_s_variables_is_detected_as_it(desc, tmp_path):
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("h1\n")
    env = {v: str(nodefile) for v in desc.detect_any[:1] + desc.detect_all}
    assert schedulers.which_scheduler(env) == desc.name
    if desc.name != "local":
        assert not schedulers.holds({v: "1" for v in desc.detect_all}, desc.name)


def test_a_left_over_job_whose_nodefile_is_gone_loses_a_tie(tmp_path):
    gone = str(tmp_path / "gone")
    env = {"PBS_JOBID": "1.srv", "PBS_NODEFILE": gone, "SLURM_JOB_ID": "7"}
    assert schedulers.which_scheduler(env) == "slurm"
    open(gone, "w").close()
    assert schedulers.which_scheduler(env) == "pbs"
    os.unlink(gone)
    assert schedulers.which_scheduler({"PBS_JOBID": "1.srv", "PBS_NODEFILE": gone}) == "pbs"  # alone: still its job


def test_secrets_are_one_rule_for_capture_and_restore():
    env = {"PBS_JOBCOOKIE": "c", "SLURM_TOKEN": "t", "SLURM_api_key": "k", "SLURM_JOB_ID": "1"}
    assert parse.pick_env(env, ("PBS_", "SLURM_")) == {"SLURM_JOB_ID": "1"}
    assert [k for k in env if plan.job_var_ok(k, "slurm") or plan.job_var_ok(k, "pbs")] == ["SLURM_JOB_ID"]
