"""Every click command of `jobenv`: parsing, help and how results are printed.

Feature packages never import this one (an import-linter layers contract in pyproject.toml).
"""
