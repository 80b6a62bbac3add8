"""The records: where they live, which one a command means, whether its job is alive, and the
caches that let `jobenv get` find one fast (cache.py); and the records `jobenv submit` keeps of
its submissions (submissions.py), which status, logs, cancel and a resubmission read.
"""
