"""The requirements of an installed distribution, one per line for `pip install`, less those
named: `python .ci/requirements.py DIST [NAME | NAME[EXTRA,...] ...]` leaves out NAME, or only
NAME's EXTRAs.  For a package installed with `--no-deps` whose requirements are wanted all but
a few (.ci/install-torch.sh: torch's GPU-only parts; .ci/install-frameworks.sh: DeepSpeed's
torch, which would otherwise bring those parts back).  Requirements for extras, and those whose
markers do not hold here, are left out too."""
import re
import sys
from importlib.metadata import requires

from pip._vendor.packaging.requirements import Requirement


def key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main(dist: str, *drops: str) -> None:
    whole, extras = set(), {}
    for drop in drops:
        req = Requirement(drop)
        if req.extras:
            extras[key(req.name)] = set(req.extras)
        else:
            whole.add(key(req.name))
    for text in requires(dist) or []:
        req = Requirement(text)
        name = key(req.name)
        if name in whole or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        kept = sorted(req.extras - extras.get(name, set()))
        print(f"{req.name}{'[' + ','.join(kept) + ']' if kept else ''}{req.specifier}")


if __name__ == "__main__":
    main(*sys.argv[1:])
