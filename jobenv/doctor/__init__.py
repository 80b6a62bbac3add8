"""`jobenv doctor`: probes that look at this job, judges that turn what they saw into checks.
"""
