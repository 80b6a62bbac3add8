"""`jobenv get` without click: it runs in every new shell, and click alone costs several
times the interpreter's start-up.  Anything this parser does not know (--help, a typo)
returns None and the caller hands the command line to click, which gives the full help
or error.  tests/test_cli.py checks OPTIONS against the click definition.
"""
from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

# option -> destination; None marks a flag.  Must mirror `cli.get`.
OPTIONS: Dict[str, Optional[str]] = {
    "--job": "job", "-j": "job", "--shell": "shell_name", "--allow-stale": None, "--no-python": None,
}
SHELLS = ("bash", "zsh", "fish", "sh")  # sh: POSIX (dash, busybox ash)


def parse(args: List[str]) -> Optional[Dict[str, Any]]:
    """Parsed options, or None to defer to click."""
    out: Dict[str, Any] = {"job": None, "shell_name": None, "allow_stale": False, "no_python": False}
    i = 0
    while i < len(args):
        a = args[i]
        name, eq, val = a.partition("=") if a.startswith("--") else (a, "", "")
        if name not in OPTIONS:
            return None
        dest = OPTIONS[name]
        if dest is None:
            if eq:
                return None
            out[name[2:].replace("-", "_")] = True  # a flag's destination is its name, as in click
        else:
            if not eq:
                i += 1
                if i >= len(args):
                    return None
                val = args[i]
            out[dest] = val
        i += 1
    if out["shell_name"] is not None and out["shell_name"] not in SHELLS:
        return None
    return out


def run(args: List[str]) -> Optional[int]:
    opts = parse(args)
    if opts is None:
        return None
    from jobenv.core.errors import JobenvError, one_line, report_error
    from jobenv.restore.get import get, tell_on_terminal

    def warn(msg: str) -> None:
        sys.stderr.write(f"jobenv: warning: {one_line(msg)}\n")

    try:
        text = get(os.environ, opts["job"], opts["shell_name"], opts["allow_stale"], warn,
                   python=not opts["no_python"], tell=tell_on_terminal)
    except (JobenvError, OSError) as exc:
        return report_error(exc)
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))
    sys.stdout.buffer.flush()
    return 0
