"""Before and after the allocation: `jobenv submit` writes and submits a batch script
(script.py, from the machine profile's `submit` directives and the scheduler descriptor's
`Batch` facts), keeps a record of each submission (jobenv.store.submissions), and `status`, `logs`
and `cancel` take one job handle whatever the scheduler (jobstate.py, logs.py).
"""
