"""The records: where they live, which one a command means, whether its job is alive, and the
caches that let `jobenv get` find one fast (cache.py).
"""
