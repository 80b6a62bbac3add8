"""`jobenv get` and `jobenv init`: a record turned back into a shell, fast, in every new shell.
"""
