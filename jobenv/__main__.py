"""Entry point of the `jobenv` command and `python -m jobenv`.

`jobenv get` and `jobenv init` take click-free fast paths (they run in every new shell); every other
command, and any `get` command line the fast path does not understand, goes to click.
"""
from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] == "get":
        from jobenv.restore.fastget import run

        rc = run(args[1:])
        if rc is not None:
            return rc
    elif args and args[0] == "init":  # runs in every login shell: no click either
        from jobenv.restore.init import run as run_init

        rc = run_init(args[1:])
        if rc is not None:
            return rc
    from jobenv.cli.main import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
