"""jobenv: capture an HPC job's environment once, restore it and launch in any shell.

`import jobenv` runs in every rank, so this module imports nothing heavy: the runtime
helpers below are loaded on first use.
"""
__version__ = "0.1.0"

_LAZY = {
    "detect": "runtime", "setup_torch": "runtime", "setup_horovod": "runtime",
    "setup_tensorflow": "runtime", "tensorflow_strategy": "runtime", "setup_deepspeed": "runtime", "cleanup": "runtime",
    "export_env": "runtime", "DistInfo": "runtime",
}


def __getattr__(name: str) -> object:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'jobenv' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"jobenv.{mod}"), name)


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))
