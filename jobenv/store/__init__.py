"""The records: where they live, which one a command means, whether its job is alive.
"""
