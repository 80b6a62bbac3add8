"""Launching: sizing, the launcher's line, supervision of the ranks, failover, requeue.

The renderer of launch commands is `template.py` (its names are also this package's:
`jobenv.launch.render`); the package's own modules import every name from the module that
defines it, never from this file.
"""
from .template import context, pick_launcher, render

__all__ = ["context", "pick_launcher", "render"]
