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


def floors() -> list:
    (layers,) = [c for c in config()["contracts"] if c["type"] == "layers"]
    return [[m.strip() for m in floor.replace(":", "|").split("|")] for floor in layers["layers"]]


def test_every_package_and_top_module_has_a_floor():
    placed = {m for floor in floors() for m in floor}
    pkg = REPO / "jobenv"
    found = {f"jobenv.{p.name}" for p in pkg.iterdir() if (p / "__init__.py").is_file()}
    found |= {f"jobenv.{p.stem}" for p in pkg.glob("*.py") if p.name != "__init__.py"}
    assert sorted(found - placed) == [] and sorted(placed - found) == []


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
