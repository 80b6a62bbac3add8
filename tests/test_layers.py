"""The package map (pyproject.toml's [tool.importlinter]) as a contract: every package sits on a
floor, nothing imports upward, no circle; .ci/run runs `lint-imports`, this runs the same check
from the suite and keeps the map complete (a new package must be given its floor)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = pytest.importorskip("tomli")


def config() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]


def floors(container: str = "") -> list:
    """The floors of the package map (no container), or of the rooms inside `container`."""
    (layers,) = [c for c in config()["contracts"] if c["type"] == "layers" and
                 c.get("containers", [""]) == [container]]
    return [[m.strip() for m in floor.replace(":", "|").split("|")] for floor in layers["layers"]]


def test_every_package_and_top_module_has_a_floor():
    placed = {m for floor in floors() for m in floor}
    pkg = REPO / "jobenv"
    found = {f"jobenv.{p.name}" for p in pkg.iterdir() if (p / "__init__.py").is_file()}
    found |= {f"jobenv.{p.stem}" for p in pkg.glob("*.py") if p.name != "__init__.py"}
    assert sorted(found - placed) == [] and sorted(placed - found) == []


def test_every_module_of_launch_is_in_a_room():
    """launch/'s rooms (plan, watch, verdict, requeue) are a contract: a module added beside them
    must be given its place in the flow."""
    placed = {m for floor in floors("jobenv.launch") for m in floor}
    pkg = REPO / "jobenv" / "launch"
    found = {p.name for p in pkg.iterdir() if (p / "__init__.py").is_file()}
    found |= {p.stem for p in pkg.glob("*.py") if p.name != "__init__.py"}
    assert sorted(found - placed) == [] and sorted(placed - found) == []
    assert floors("jobenv.launch")[0] == ["command"] and "plan" in floors("jobenv.launch")[-2]


def test_core_is_the_bottom_floor_and_the_commands_the_top():
    assert floors()[-1] == ["jobenv.core"]
    assert ["jobenv.cli"] in floors()[:2]


def test_type_only_imports_are_not_excluded():
    assert not config().get("exclude_type_checking_imports", False)


def lint(cwd: Path) -> subprocess.CompletedProcess:
    exe = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    if not os.path.exists(exe):
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([exe, "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True)


def test_the_contracts_hold():
    p = lint(REPO)
    assert p.returncode == 0, p.stdout + p.stderr


def test_an_upward_import_breaks_them(tmp_path):
    """The control: the same contracts on a copy of the package whose core imports the CLI."""
    import shutil

    shutil.copytree(REPO / "jobenv", tmp_path / "jobenv", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "jobenv" / "core" / "quoting.py", "a") as f:
        f.write("\nif False:\n    from jobenv.cli import common  # noqa: F401\n")
    p = lint(tmp_path)
    assert p.returncode != 0 and "jobenv.core.quoting -> jobenv.cli.common" in p.stdout, p.stdout + p.stderr


# --- what the contracts above cannot see: names taken from a package's own __init__, private names
import ast  # noqa: E402


def _modules(root: Path):
    """(dotted name, is a package's __init__, file) of every module under root/jobenv."""
    for f in sorted((root / "jobenv").rglob("*.py")):
        parts = list(f.relative_to(root).with_suffix("").parts)
        init = parts[-1] == "__init__"
        yield ".".join(parts[:-1] if init else parts), init, f


def _is_module(root: Path, dotted: str) -> bool:
    p = root.joinpath(*dotted.split("."))
    return (p / "__init__.py").is_file() or p.with_suffix(".py").is_file()


def _target(name: str, init: bool, node: ast.ImportFrom) -> str:
    """The module a `from X import ...` in module `name` reads."""
    if not node.level:
        return node.module or ""
    base = name.split(".") if init else name.split(".")[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def names_from_own_init(root: Path) -> list:
    """`from P import x` in a module of package P (or of a package inside P), where x is no
    module but a name P's __init__.py defines: P's __init__ imports its modules, so one of them
    asking P for a name is a circle through the __init__ (half-loaded when imported from the
    other end), which import-linter does not count.  The root's __init__ is left out: it imports
    nothing at load (test_the_root_init_imports_nothing), so no circle can pass through it."""
    found = []
    for name, init, f in _modules(root):
        pkg = name if init else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if not isinstance(node, ast.ImportFrom):
                continue
            t = _target(name, init, node)
            if t == "jobenv" or not (pkg == t or pkg.startswith(t + ".")):
                continue
            for a in node.names:
                if not _is_module(root, f"{t}.{a.name}"):
                    found.append(f"{f.relative_to(root)}:{node.lineno}: {a.name} from {t}'s __init__")
    return found


def private_names_across_modules(root: Path, files) -> list:
    """`from M import _x` and `M._x` (M a jobenv module bound by an import) in any file but M's
    own: a private name is its module's to change; one that another module needs is public."""
    found = []
    for f in files:
        in_pkg = root / "jobenv" in f.parents
        name = ".".join(f.relative_to(root).with_suffix("").parts) if in_pkg else f.stem
        init = f.name == "__init__.py"
        name = name.removesuffix(".__init__")
        tree = ast.parse(f.read_text(), str(f))
        bound = {}  # local name -> the jobenv module it is
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                t = _target(name, init, node) if in_pkg or node.level == 0 else ""
                if not t.startswith("jobenv"):
                    continue
                for a in node.names:
                    if _is_module(root, f"{t}.{a.name}"):
                        bound[a.asname or a.name] = f"{t}.{a.name}"
                    elif a.name.startswith("_") and not a.name.endswith("__") and t != name:
                        found.append(f"{f.relative_to(root)}:{node.lineno}: from {t} import {a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "jobenv":
                        bound[a.asname or "jobenv"] = a.name if a.asname else "jobenv"
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.endswith("__")):
                continue
            chain, v = [], node.value
            while isinstance(v, ast.Attribute):
                chain.append(v.attr)
                v = v.value
            if isinstance(v, ast.Name) and v.id in bound:
                mod = ".".join([bound[v.id], *reversed(chain)])
                if _is_module(root, mod) and mod != name:
                    found.append(f"{f.relative_to(root)}:{node.lineno}: {mod}.{node.attr}")
    return found


def _py(root: Path, top: str) -> list:
    return sorted(p for p in (root / top).rglob("*.py") if "__pycache__" not in p.parts)


def test_no_module_takes_a_name_from_its_own_packages_init():
    assert names_from_own_init(REPO) == []


def test_the_root_init_imports_nothing():
    """`import jobenv` runs in every rank, and nothing can circle through a module that imports
    nothing at load: the root's lazy names are imported on first use, inside __getattr__."""
    tree = ast.parse((REPO / "jobenv" / "__init__.py").read_text())
    assert [n.lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))] == []


def test_no_private_name_crosses_a_module():
    assert private_names_across_modules(REPO, _py(REPO, "jobenv")) == []


def test_the_tests_private_names_are_counted():
    """Tests may reach a private name (a parser's input check, say); they are counted here so
    that the number only goes down.  jobenv/ itself has none (the test above)."""
    found = private_names_across_modules(REPO, _py(REPO, "tests") + _py(REPO, "benchmarks"))
    assert len(found) <= 13, "\n".join(found)


def test_the_checks_find_what_they_look_for(tmp_path):
    """The control: a copy of the package with one module taking a name from its package's
    __init__ and another a private name of a sibling."""
    import shutil

    shutil.copytree(REPO / "jobenv", tmp_path / "jobenv", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "jobenv" / "selftest" / "adapters" / "mpi.py", "a") as f:
        f.write("\nfrom .. import __doc__ as doc  # noqa\n")
    with open(tmp_path / "jobenv" / "core" / "quoting.py", "a") as f:
        f.write("\nfrom . import atomic  # noqa\natomic._secret  # noqa\nfrom .errors import _hidden  # noqa\n")
    assert names_from_own_init(tmp_path) == [
        "jobenv/selftest/adapters/mpi.py:" + str(len((tmp_path / "jobenv/selftest/adapters/mpi.py").read_text()
                                                     .splitlines())) + ": __doc__ from jobenv.selftest's __init__"]
    found = private_names_across_modules(tmp_path, _py(tmp_path, "jobenv"))
    assert sorted(m.split(": ", 1)[1] for m in found) == ["from jobenv.core.errors import _hidden",
                                                          "jobenv.core.atomic._secret"]
