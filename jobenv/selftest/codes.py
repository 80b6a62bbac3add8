"""What every part of the selftest shares: T_INTERP, the moment the interpreter was ready, its exit
codes and the phases it times.

The package's modules import these from here, never from `jobenv/selftest/__init__.py` (which
imports nothing, so no module of the package is half-loaded when another asks it for a name).
T_INTERP is taken when this module is first imported: `__main__.py` imports it before anything
else of the selftest (its own imports are timed as the "imports" phase).
"""
import time

T_INTERP = time.time()  # the first thing this module does: "interpreter ready"

EXIT_OK, EXIT_FAILED, EXIT_TIMEOUT, EXIT_SETUP = 0, 1, 3, 4
PHASES = ("launch", "interpreter", "imports", "rendezvous", "first_collective", "first_step", "teardown")
