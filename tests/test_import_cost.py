"""The hot paths load nothing heavy: this test names every module they must not load.

`jobenv get` runs in every new shell and `import jobenv` / `jobenv.runtime.detect()` in
every rank, so they stay near the interpreter's own start-up (benchmarks/bench.py has the
figures).  Modules off these paths write plain idiomatic Python (typing, pathlib,
dataclasses are fine there); only the modules these paths import keep the lean habits.
"""
from __future__ import annotations

import subprocess
import sys

import machines
from conftest import base_env, jobenv, record

# Each costs milliseconds per start (re + enum ~6 ms, typing ~5 ms, click/rich tens of ms).
HEAVY_EVERYWHERE = ("click", "rich", "yaml", "filelock", "typing", "re", "json.decoder", "pathlib",
                    "dataclasses", "subprocess", "shutil", "argparse", "importlib.metadata", "socket",
                    "torch", "numpy", "mpi4py", "tensorflow", "horovod", "deepspeed")

PROBE = """
import sys
before = set(sys.modules)
{code}
loaded = set(sys.modules) - before
print(",".join(sorted(m for m in {heavy!r} if m in loaded)))
"""


def loaded_heavy(code: str, env) -> str:
    p = subprocess.run([sys.executable, "-c", PROBE.format(code=code, heavy=HEAVY_EVERYWHERE)],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_import_jobenv_is_light(home):
    assert loaded_heavy("import jobenv", base_env(home)) == ""


def test_runtime_detect_is_light(tmp_path, home):
    env = base_env(home, machines.local(tmp_path))
    jobenv(["save", "--quiet"], env, check=True)
    rec = jobenv(["show", "--json"], env, check=True)
    assert rec.returncode == 0
    code = "import jobenv, jobenv.runtime; jobenv.runtime.detect()"
    assert loaded_heavy(code, {**env, "PMI_RANK": "0", "PMI_SIZE": "1"}) == ""


def test_get_path_is_light(tmp_path, home):
    env = base_env(home, machines.local(tmp_path))
    jobenv(["save", "--quiet"], env, check=True)
    code = ("import io, os; sys.argv = ['jobenv', 'get']\n"
            "from jobenv.__main__ import main\n"
            "out = sys.stdout; sys.stdout = open(os.devnull, 'w'); rc = main(); sys.stdout = out\n"
            "assert rc == 0, rc")
    assert loaded_heavy(code, env) == ""


def test_init_path_is_light(home):
    """`eval "$(jobenv init bash)"` runs in every new shell's rc file."""
    code = ("import io, os; sys.argv = ['jobenv', 'init', 'bash']\n"
            "from jobenv.__main__ import main\n"
            "out = sys.stdout; sys.stdout = open(os.devnull, 'w'); rc = main(); sys.stdout = out\n"
            "assert rc == 0, rc")
    assert loaded_heavy(code, base_env(home)) == ""


def test_get_in_a_shell_in_no_job_imports_no_scheduler_module(tmp_path, home):
    """The restore plan needs only the schedulers' tables; their modules (parsers, queries)
    load when a shell is in a job or a verdict must be asked: ~1.5 ms of every new shell."""
    env = base_env(home, machines.polaris(tmp_path))
    jobenv(["save", "--quiet"], env, check=True)
    env = base_env(home, {"JOBENV_HOSTNAME": record(env)["hosts"][0]})  # a fresh shell on the job's host
    jobenv(["get"], env, check=True)  # the first shell asks about the job (no qstat here): verdict cached
    code = ("import io, os; sys.argv = ['jobenv', 'get']\n"
            "from jobenv.__main__ import main\n"
            "out = sys.stdout; sys.stdout = open(os.devnull, 'w'); rc = main(); sys.stdout = out\n"
            "assert rc == 0, rc\n"
            "print(','.join(sorted(m for m in sys.modules if m.startswith('jobenv.schedulers.')\n"
            "                      and m != 'jobenv.schedulers.tables')))")  # the tables are the facts it needs
    p = subprocess.run([sys.executable, "-c", "import sys\n" + code], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "", p.stdout + p.stderr


def test_every_declared_dependency_is_imported():
    """A dependency in pyproject.toml that no module imports is weight without a use (the
    README's Dependencies paragraph says which module needs each)."""
    import os
    import re
    import tomllib

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        declared = tomllib.load(f)["project"]["dependencies"]
    module_of = {"pyyaml": "yaml"}
    source = ""
    for d, _, files in os.walk(os.path.join(root, "jobenv")):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(d, name), encoding="utf-8") as f:
                    source += f.read()
    unused = []
    for spec in declared:
        dist = re.match(r"[A-Za-z0-9_.-]+", spec).group(0).lower()
        mod = module_of.get(dist, dist.replace("-", "_"))
        if not re.search(rf"^\s*(import|from) {re.escape(mod)}\b", source, re.M):
            unused.append(dist)
    assert unused == []


def _imports(path: str) -> set:
    """The jobenv modules a file imports (at the top or inside a function), absolute names."""
    import ast
    import os

    pkg = "jobenv." + os.path.relpath(os.path.dirname(path), os.path.dirname(jobenv_pkg())).replace(os.sep, ".")
    pkg = pkg.replace("jobenv.jobenv", "jobenv")
    out = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.ImportFrom):
            base = pkg.rsplit(".", node.level - 1)[0] if node.level else ""
            mod = ".".join(p for p in (base, node.module or "") if p)
            out |= {mod} | {f"{mod}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


def jobenv_pkg() -> str:
    import os

    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jobenv")


def test_launch_and_get_call_nothing_above_them():
    """The flows (which job, then the plan, then the launch, with the staged copy) are
    composed above the parts (jobenv.launchflow, the CLI): launch never imports get, lookup
    or stage, and get never imports launch, so no part calls back up into another."""
    import glob
    import os

    above_launch = ("jobenv.restore.get", "jobenv.store.lookup", "jobenv.stage", "jobenv.launchflow",
                    "jobenv.fastlaunch", "jobenv.cli")
    bad = [f"{os.path.basename(p)}: {m}" for p in glob.glob(os.path.join(jobenv_pkg(), "launch", "*.py"))
           for m in _imports(p) if m.startswith(above_launch)]
    bad += [f"get.py: {m}" for m in _imports(os.path.join(jobenv_pkg(), "restore", "get.py")) if m.startswith("jobenv.launch")]
    assert bad == []
