"""The second-user fixture really is another account: its files are not ours."""
from pathlib import Path


def test_other_user_plants_files_we_do_not_own(other_user, shared_tmp: Path) -> None:
    other_user.sh(f"mkdir {shared_tmp}/planted && touch {shared_tmp}/planted/f")
    st = (shared_tmp / "planted" / "f").stat()
    assert st.st_uid == other_user.uid != 0
    denied = other_user.sh("touch /root/owned 2>/dev/null", check=False)
    assert denied.returncode != 0
