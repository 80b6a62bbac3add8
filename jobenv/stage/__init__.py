"""`jobenv stage`: the job's Python environment on every node's local disk.

The public hooks other parts call are light (they run on the `jobenv get` path):
`restore_items(record, environ, host)`, `rank_prefix(record)`, `check(record, host)`.
"""
from __future__ import annotations

from .restore import check, rank_prefix, restore_items

__all__ = ["check", "rank_prefix", "restore_items"]
