"""Watching an attempt while it runs: the supervisor (supervise) with its clocks, output and
tee, the live naming of a first failure (live), the reaper and watchdog, and what acts on a
running launch from another shell (current, requests, stacks, kill)."""
