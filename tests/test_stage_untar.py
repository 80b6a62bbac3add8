"""Unpacking the stage's archive without trusting it (jobenv.stage.untar): members only inside
`env`/`base`, read-only directories filled before their modes, removal that never follows a link."""
from __future__ import annotations

import io
import os
import tarfile

import pytest

from jobenv.stage import untar


def _tar(path, members):
    with tarfile.open(path, "w") as tar:
        for name, data, mode in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, mode
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), mode
                tar.addfile(info, io.BytesIO(data))


def test_an_archive_unpacks_into_env_and_base_with_modes_last(tmp_path):
    _tar(tmp_path / "a.tar", [("env", None, 0o755), ("env/bin", None, 0o555), ("env/bin/py", b"x" * 10, 0o755),
                              ("base", None, 0o755), ("base/lib.so", b"y" * 5, 0o644)])
    told: list = []
    out = tmp_path / "copy"
    assert untar.unpack(str(tmp_path / "a.tar"), str(out), told.append) == 15
    assert (out / "bin" / "py").read_bytes() == b"x" * 10 and (out / untar.BASE_DIR / "lib.so").exists()
    assert os.stat(out / "bin").st_mode & 0o777 == 0o555  # filled first, then made read-only
    untar.rmtree(str(out))
    assert not out.exists()


@pytest.mark.parametrize("name", ["env/../../escape", "/etc/passwd", "other/x"])
def test_a_member_outside_the_environment_refuses_the_archive(tmp_path, name):
    _tar(tmp_path / "a.tar", [("env", None, 0o755), (name, b"bad", 0o644)])
    with pytest.raises(untar.Failure, match="outside the environment"):
        untar.unpack(str(tmp_path / "a.tar"), str(tmp_path / "copy"), lambda n: None)
    assert not (tmp_path / "escape").exists()


def test_removal_never_follows_a_link(tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "f").write_text("mine\n")
    os.chmod(keep, 0o500)
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "link").symlink_to(keep)
    untar.rmtree(str(tree))
    assert not tree.exists() and (keep / "f").read_text() == "mine\n" and os.stat(keep).st_mode & 0o777 == 0o500
