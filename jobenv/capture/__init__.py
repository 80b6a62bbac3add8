"""`jobenv save`: what is captured into a record (software, devices, scheduler facts).
"""
