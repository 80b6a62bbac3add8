"""Site profiles: the YAML files beside this module, loaded (load.py) and checked (check.py).
"""
