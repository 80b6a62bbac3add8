"""Launching, in rooms that follow an attempt's way (pyproject's launch contract keeps the order):
`command` runs the attempts' loop; `plan/` decides an attempt before anything runs; `watch/`
supervises it while it runs; the verdict (jobenv.rank.verdict) is decided once when it ends and
`verdict/` says what it means; `requeue/` brings a pre-empted job back.  `types` and `ranks`
(the run and log directories) are the floor every room reads.  No module imports a name from
this file.
"""
