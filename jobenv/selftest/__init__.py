"""`launch python3 -m jobenv.selftest`: prove the allocation works before spending it.

Every rank finds its place (jobenv.runtime), checks in with rank 0 (ranks that never
arrive are named), initializes the backend, runs collectives whose results are known in
advance, trains a tiny data-parallel model, and reports phase timings.  Rank 0 prints
the report.  Exit 0 only when every check passed on every rank; 3 on a timeout or a
missing rank; 4 on a setup error (framework missing, bad environment).

The package imports nothing here: its modules take their shared names from `codes.py` and
`python -m jobenv.selftest` runs `__main__.py`.
"""
