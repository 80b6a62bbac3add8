"""JSON reading for the hot paths, without `json.decoder`.

`json.decoder` imports `re` (with enum, ~6 ms): a third of what `jobenv get` may add to
the interpreter's start-up in every new shell.  Records and the get cache are read here.
"""
from __future__ import annotations

TYPE_CHECKING = False  # read on the `jobenv get` path: no typing import
if TYPE_CHECKING:
    from typing import Any


class _ScanContext:
    """What CPython's C JSON scanner reads from json.JSONDecoder."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__


def loads(text: str) -> Any:
    """json.loads, without importing json.decoder when CPython's C scanner is there (see
    the module docstring).  The C scanner parses exactly as json.loads does; only its error
    messages are plainer.
    """
    try:
        from _json import make_scanner
    except ImportError:  # not CPython
        import json

        return json.loads(text)
    text = text.strip(" \t\n\r")
    try:
        # the C scanner reads a JSONDecoder's attributes only: _ScanContext has them all
        value, end = make_scanner(_ScanContext())(text, 0)  # type: ignore[arg-type]
    except (StopIteration, SystemError):
        # Invalid JSON.  Some errors the C scanner reports through json.decoder, which is
        # not loaded here (SystemError): let json.loads find and describe the defect.
        import json

        return json.loads(text)
    if end != len(text):
        raise ValueError(f"extra data at character {end}")
    return value
