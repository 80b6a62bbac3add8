"""Whether a path can be trusted (jobenv.core.trust): every entry crossed to reach it, each
link and what it leads to, is the user's or root's and writable by no one else."""
import pytest

from jobenv.core import trust
from jobenv.core.errors import JobenvError


def test_ancestor_that_is_another_users_symlink_is_refused(other_user, shared_tmp):
    """A link another user owns in a sticky directory (`ln -s /tmp /tmp/x`) is theirs to
    replace at any moment, whatever it points to now: judging its target is not enough."""
    link = shared_tmp / "victim-stage"
    other_user.sh(f"ln -s '{shared_tmp}' '{link}'")
    with pytest.raises(JobenvError, match=f"{link}.*symbolic link owned by uid {other_user.uid}"):
        trust.check_ancestors(str(link / "jobenv" / "copy"), "the stage directory")


def test_a_link_of_yours_to_another_users_link_is_refused(tmp_path, other_user, shared_tmp):
    """Each link on the way is judged, then what it points to, in turn: the resolved path
    alone never names the other user's link in the middle of a chain."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    mine = shared_tmp / "mine"
    mine.symlink_to(private)  # a link of your own to a directory of your own: fine
    trust.check_ancestors(str(mine / ".jobenv" / "jobs"))
    assert str(mine) in trust.dirs_above(str(mine / ".jobenv" / "jobs"))
    theirs = shared_tmp / "theirs"
    other_user.sh(f"ln -s '{private}' '{theirs}'")
    mine.unlink()
    mine.symlink_to("theirs")  # relative: resolved from the link's own directory
    chain = trust.dirs_above(str(mine / ".jobenv" / "jobs"))
    assert str(mine) in chain and str(theirs) in chain and str(private) in chain
    with pytest.raises(JobenvError, match=f"{theirs}.*owned by uid {other_user.uid}"):
        trust.check_ancestors(str(mine / ".jobenv" / "jobs"))
