"""`python -m jobenv.selftest`."""
from . import codes  # noqa: F401  first: its T_INTERP is the moment the interpreter was ready
import os
import sys

from .cli import main

if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    if "torch" in sys.modules:
        # torch's store and gloo threads can abort the process during C++ static
        # destruction ("terminate called without an active exception") after a clean
        # teardown, so skip it.  Not for MPI: MPICH's Hydra kills the other ranks when
        # one leaves without its exit-time clean-up.
        os._exit(code)
    sys.exit(code)
