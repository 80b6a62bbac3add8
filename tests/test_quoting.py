"""jobenv.core.quoting is the one home of the shell quoting rules; the shells' own reading of
them is tested through the renderers (tests/test_shell.py) and `jobenv init` (test_init.py)."""
from __future__ import annotations

import os
import re
import subprocess

from jobenv.core import quoting

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jobenv")
# Writing a single quote as '\'' (or '"'"') and fish's \' are the marks of a quoter.
QUOTER = re.compile(r"""replace\("'", *"'|replace\("\\\\", "\\\\\\\\"\)\.replace\("'\"""")


def test_no_module_but_quoting_quotes():
    """Every writer of shell text quotes through jobenv.core.quoting: a second copy of a rule
    drifts (init's fish quoter once wrote non-ASCII bytes raw where the renderer escapes them)."""
    found = []
    for d, _, files in os.walk(PKG):
        for name in files:
            path = os.path.join(d, name)
            if name.endswith(".py") and path != quoting.__file__:
                with open(path, encoding="utf-8") as f:
                    found += [f"{os.path.relpath(path, PKG)}: {line.strip()}" for line in f if QUOTER.search(line)]
    assert found == []


def test_join_argv_reads_back_in_sh():
    args = ["a", "", "it's", "x y", "$HOME", "~", "a=b", "é\n"]
    out = subprocess.run(["sh", "-c", 'eval "set -- $LINE"; printf "%s\\0" "$@"'],
                         env={"LINE": quoting.join_argv(args), "PATH": os.environ["PATH"]},
                         capture_output=True, text=True, check=True).stdout
    assert out.split("\0")[:-1] == args
