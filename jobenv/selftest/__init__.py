"""`launch python3 -m jobenv.selftest`: prove the allocation works before spending it.

Every rank finds its place (jobenv.runtime), checks in with rank 0 (ranks that never
arrive are named), initializes the backend, runs collectives whose results are known in
advance, trains a tiny data-parallel model, and reports phase timings.  Rank 0 prints
the report.  Exit 0 only when every check passed on every rank; 3 on a timeout or a
missing rank; 4 on a setup error (framework missing, bad environment).
"""
import time

T_INTERP = time.time()  # before any other import: "interpreter ready"

EXIT_OK, EXIT_FAILED, EXIT_TIMEOUT, EXIT_SETUP = 0, 1, 3, 4
PHASES = ("launch", "interpreter", "imports", "rendezvous", "first_collective", "first_step", "teardown")

from .cli import main  # noqa: E402

__all__ = ["main", "EXIT_OK", "EXIT_FAILED", "EXIT_TIMEOUT", "EXIT_SETUP", "PHASES"]
