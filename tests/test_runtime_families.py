"""The launcher-family table: recognition, the rows sizing and doctor read, and its agreement
with the launcher-variable table of jobenv.runtime.launchers."""
from __future__ import annotations

import os
import sys

import pytest

from jobenv.profiles import load as profiles
from jobenv.core.errors import BadInput
from jobenv.launch import ranks
from jobenv.runtime import families
from jobenv.runtime.families import FAMILIES, from_banner, identify, unknown
from jobenv.launch.plan.sizing import choose, render_sized
from jobenv.launch.types import Request
from jobenv.runtime.launchers import LAUNCHERS, NAME

NODES = ["node1", "node2", "node3", "node4"]


def installed(tmp_path, name, program, *siblings):
    """A launcher program in a directory of its own, with these programs beside it."""
    d = tmp_path / name
    d.mkdir()
    for s in (program, *siblings):
        (d / s).write_text("")
    return str(d / program)


def family(argv0, resolved=None):
    """The family's name as save records it (the record's `launcher_family`)."""
    return identify(argv0, resolved)[1]


def test_family_of_real_launchers(tmp_path):
    assert family("srun") == "srun" and family("torchrun") == "torchrun"
    assert family("mpirun", installed(tmp_path, "mpich", "mpirun", "hydra_pmi_proxy")) == "mpich"
    assert family("mpiexec", installed(tmp_path, "ompi", "mpiexec", "ompi_info")) == "openmpi"
    assert family("mpiexec", "/opt/cray/pals/1.2/bin/mpiexec") == "pals"
    # a Debian /usr/bin holds both MPIs' programs: Hydra's proxy speaks before ompi_info
    assert family("mpiexec", installed(tmp_path, "both", "mpiexec", "ompi_info", "hydra_pmi_proxy")) == "mpich"
    assert family("mpiexec", os.path.join(os.path.dirname(sys.executable), "mpiexec")) == "mpich"  # the wheel's
    if os.path.exists("/usr/bin/mpirun.openmpi"):  # Debian: ompi_info and MPICH's programs share /usr/bin
        assert family("mpirun", "/usr/bin/mpirun.openmpi") == "openmpi"


def test_intel_mpi_mvapich_jsrun_and_flux_are_their_own(tmp_path):
    assert family("mpiexec", installed(tmp_path, "impi", "mpiexec", "impi_info", "hydra_pmi_proxy")) == "intelmpi"
    assert family("mpiexec", installed(tmp_path, "mv2", "mpiexec", "mpirun_rsh", "hydra_pmi_proxy")) == "mvapich"
    assert family("jsrun") == "jsrun" and family("/usr/bin/flux") == "flux"


@pytest.mark.parametrize("argv0", ["aprun", "mylauncher", "python3", ""])
def test_an_unknown_launcher_is_an_error_not_mpich(argv0):
    assert identify(argv0, "/usr/bin/" + argv0 if argv0 else None) == (None, "")
    exc = unknown(argv0)  # what a launch by it says (jobenv.launch.plan.launcher.launcher_family)
    assert isinstance(exc, BadInput) and exc.exit_code == 5 and "srun" in exc.message and "jsrun" in exc.message
    with pytest.raises(BadInput):
        families.get("hydra?")


@pytest.mark.parametrize("text,name", [
    ("mpiexec version 1.8.0 revision 7ab9b61 built Oct 10 2024", "pals"),  # Cray PALS
    ("mpiexec: unrecognized option '--bind-to'\nUsage: mpiexec [global_options] [command_options] cmd1\n", "pals"),
    ("HYDRA build details:\n    Version:                                 4.1.2", "mpich"),
    ("mpiexec (OpenRTE) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/", "openmpi"),
    ("Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)", "intelmpi"),
    ("slurm 23.02.7", "srun"),
    ("commands:    \t\t0.59.0\nlibflux-core:\t\t0.59.0\nbuild-options:\t\t+hwloc==2.8.0", "flux"),
    ("usage: whatever [-h]", None),
])
def test_banner_tells_pals_from_hydra(text, name):
    row = from_banner(text)
    assert (row.name if row else None) == name


def test_lines_of_a_rank_in_the_new_families_labels():
    cases = {"flux": ["0: a", "10: b", "1: c"], "jsrun": ["0: a", "10: b", "1: c"],
             "pals": ["[0] a", "10: b", "1: c"], "intelmpi": ["[0] a", "[10] b", "[1] c"]}
    for fam, lines in cases.items():
        assert ranks.lines_of(lines + ["unlabelled"], fam, 10) == [lines[1]], fam


def test_flux_subset_names_hosts_after_run_and_jsrun_subset_is_refused():
    size = choose(NODES, 2, Request(hosts="node[2-3]"), "f1")
    argv, text = render_sized(["flux", "run", "-N", "{nhosts}", "-n", "{nranks}"], size, 0, "f1", {}, "/hf", "flux")
    assert argv == ["flux", "run", "--requires=host:node[2-3]", "-N", "2", "-n", "4"] and text is None
    with pytest.raises(BadInput, match="jsrun.*cannot be told which hosts"):
        render_sized(["jsrun", "-n", "{nranks}"], size, 0, "1", {}, "/hf", "jsrun")
    whole = choose(NODES, 2, Request(), "1")
    assert render_sized(["jsrun", "-n", "{nranks}"], whole, 0, "1", {}, "/hf", "jsrun") == (["jsrun", "-n", "8"], None)


def test_the_two_launcher_tables_agree():
    """Every family's ranks match a row of the launcher-variable table, and every row of that
    table that is a launcher program has a family (horovodrun is not one jobenv starts; pmix
    is a protocol, not a program)."""
    rows = {r[NAME] for r in LAUNCHERS}
    for f in FAMILIES:
        assert f.env_row in rows, f.name
    used = {f.env_row for f in FAMILIES}
    assert rows - used == {"horovodrun", "pmix"}
    for f in FAMILIES:  # names that appear in both tables name the same launcher
        if f.name in rows:
            assert f.env_row == f.name, f.name


def test_every_shipped_profile_sizes_with_its_familys_own_flags():
    """A profile's template spells the counts with the flags its launcher family's row names."""
    for prof in profiles.load_all({"XDG_CONFIG_HOME": "/nonexistent"}).values():
        for cand in prof.launchers:
            argv = [a for a in cand["argv"] if isinstance(a, str)]
            row = families.get(family(argv[0]))  # by the name's convention: the site's, not this host's
            for flags, placeholder in ((row.nranks, "{nranks}"), (row.ppn, "{ppn}"), (row.nhosts, "{nhosts}")):
                if placeholder in argv:
                    assert argv[argv.index(placeholder) - 1] in flags, (prof.name, placeholder, row.name)
