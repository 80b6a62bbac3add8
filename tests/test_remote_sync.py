"""What `submit --sync` copies (jobenv.remote.sync.files): what git would commit or could,
.gitignore honoured; never .git nor a virtual environment; every file outside a git tree."""
from __future__ import annotations

import subprocess

from jobenv.remote.sync import files


def _tree(root):
    for rel, text in {"train.py": "x", "pkg/mod.py": "y", "data/big.bin": "z", "notes.txt": "n",
                      ".venv/pyvenv.cfg": "home = /usr/bin", ".venv/lib/site.py": "s",
                      "env2/pyvenv.cfg": "home = /usr/bin", ".gitignore": "data/\n*.txt\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_a_git_tree_sends_what_git_would(tmp_path):
    _tree(tmp_path)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert files(str(tmp_path)) == [".gitignore", "pkg/mod.py", "train.py"]


def test_elsewhere_every_file_but_venvs(tmp_path):
    _tree(tmp_path)
    (tmp_path / ".git").mkdir()  # not a repository git knows: still never sent
    (tmp_path / ".git" / "HEAD").write_text("x")
    assert files(str(tmp_path)) == [".gitignore", "data/big.bin", "notes.txt", "pkg/mod.py", "train.py"]
