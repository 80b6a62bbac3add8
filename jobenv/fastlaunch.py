"""The name that `launch` programs written by an older `jobenv save` import first
(`from jobenv.fastlaunch import run`): kept so that they go on taking the fast path until the
next save rewrites them (tests/test_launchflow.py runs one).  The code is jobenv.launchflow.
"""
from jobenv.launchflow import run

__all__ = ["run"]
