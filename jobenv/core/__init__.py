"""Leaves every other package uses: errors and exit codes, numbers, quoting, safe file reads
and writes, host lists, the interpreter's sys.path, a small JSON reader, table output.

Nothing here imports any other part of jobenv (import-linter checks it).
"""
