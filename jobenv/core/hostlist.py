"""Slurm hostlist expansion/compression and host-name validation, as pure functions.

Why our own parser: `scontrol show hostnames` exits 0 on malformed input and prints junk,
and it is absent on login nodes of other schedulers.  Syntax handled (Slurm >= 23.02.5):
comma lists, several bracket groups per token (cartesian product, left group outermost),
ranges and singletons inside brackets, zero padding kept as written, prefixes ending in
`-`, and text after a bracket.
"""
from __future__ import annotations

import os

from jobenv.core.errors import BadInput
from jobenv.core.numparse import MAX_HOSTS

TYPE_CHECKING = False  # `import typing` costs ~5 ms; records are validated on the `get` path
if TYPE_CHECKING:
    from typing import Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

# RFC 1123 labels; underscores are tolerated because some sites use them.
_LABEL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_RANGE = r"([0-9]+)(?:-([0-9]+))?"  # patterns are compiled on first use: `re` is not on the `get` path


class HostlistError(BadInput):
    """A malformed hostlist or host name."""


def is_valid_host(name: str) -> bool:
    """True when `name` is a plausible host name (no shell metacharacters, no spaces).

    Dot-separated labels of 1-63 letters, digits, `_` and `-`, not starting or ending
    with `-`; one trailing dot allowed.  (String operations, not a regex: this runs on
    the `get` path for every host of every record.)
    """
    if not name or len(name) > 253:
        return False
    labels = (name[:-1] if name.endswith(".") else name).split(".")
    for label in labels:
        if not 0 < len(label) <= 63 or label[0] == "-" or label[-1] == "-":
            return False
        if not _LABEL_CHARS.issuperset(label):
            return False
    return True


def this_host(env: Optional[Mapping[str, str]] = None) -> str:
    """This host's name as the scheduler lists it: JOBENV_HOSTNAME, else `hostname`."""
    env = os.environ if env is None else env
    return env.get("JOBENV_HOSTNAME") or os.uname().nodename


def host_index(hosts: Sequence[str], hostname: str) -> Optional[int]:
    """Where `hostname` is in `hosts`, matching short and fully qualified names alike
    (PBS nodefiles list FQDNs, `hostname` prints the short name); None if absent."""
    short = hostname.split(".")[0]
    for i, h in enumerate(hosts):
        if h == hostname or h.split(".")[0] == short:
            return i
    return None


def hostfile_text(hosts: Iterable[str]) -> str:
    """Hosts as a hostfile: one per line, each line ended.  The one writer of that text, for
    the store's `.hosts` (its name is this text's hash), a launch's sub-hostfile (PALS, Hydra
    and Open MPI all read it) and a stage relay's host list."""
    return "".join(h + "\n" for h in hosts)


def check_host(name: str, where: str = "host name") -> str:
    """Return `name` or raise HostlistError naming the offending value (its first 200
    characters: a nodefile may hold one line of megabytes)."""
    if not is_valid_host(name):
        raise HostlistError(f"invalid {where} {_short(name)!r}: not a valid host name")
    return name


def _split_top(text: str) -> List[str]:
    """Split on commas outside brackets, checking bracket balance."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            if depth:
                raise HostlistError(f"malformed hostlist {text!r}: nested '[' at {i}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise HostlistError(f"malformed hostlist {text!r}: unmatched ']' at {i}")
            depth = 0
        elif ch == "," and not depth:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise HostlistError(f"malformed hostlist {text!r}: unterminated '['")
    parts.append(text[start:])
    return parts


def _group_size(body: str, text: str) -> int:
    """How many names a bracket group stands for, without expanding it."""
    import re

    n = 0
    for item in body.split(","):
        m = re.fullmatch(_RANGE, item)
        if not m or len(item) > 40:
            raise HostlistError(f"malformed hostlist {_short(text)!r}: bad range {item[:40]!r}")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise HostlistError(f"malformed hostlist {_short(text)!r}: reversed range {item!r}")
        n += hi - lo + 1
    return n


def _short(text: str) -> str:
    return text if len(text) <= 200 else text[:200] + "..."


def _expand_group(body: str, text: str) -> List[str]:
    """Expand the inside of one bracket group: `01-03,7` -> ['01','02','03','7']."""
    import re

    out: List[str] = []
    for item in body.split(","):
        m = re.fullmatch(_RANGE, item)
        if not m:
            raise HostlistError(f"malformed hostlist {text!r}: bad range {item!r}")
        lo_s, hi_s = m.group(1), m.group(2)
        if hi_s is None:
            out.append(lo_s)
            continue
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise HostlistError(f"malformed hostlist {text!r}: reversed range {item!r}")
        width = len(lo_s)
        out.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return out


def _token_size(token: str, text: str) -> int:
    """Names a token stands for (the product of its groups' sizes), capped above MAX_HOSTS."""
    n, pos = 1, 0
    while True:
        lb = token.find("[", pos)
        if lb < 0:
            return n
        rb = token.index("]", lb)
        n = min(n * _group_size(token[lb + 1 : rb], text), MAX_HOSTS + 1)
        pos = rb + 1


def _expand_token(token: str, text: str) -> Iterator[str]:
    pieces: List[List[str]] = []
    pos = 0
    while pos < len(token):
        lb = token.find("[", pos)
        if lb < 0:
            pieces.append([token[pos:]])
            break
        if lb > pos:
            pieces.append([token[pos:lb]])
        rb = token.index("]", lb)  # balance already checked
        pieces.append(_expand_group(token[lb + 1 : rb], text))
        pos = rb + 1
    # cartesian product, left group outermost
    names = [""]
    for choices in pieces:
        names = [n + c for n in names for c in choices]
    return iter(names)


def expand(text: str) -> List[str]:
    """Expand a Slurm hostlist into host names, in order, validating each one."""
    text = text.strip()
    if not text:
        raise HostlistError("empty hostlist")
    tokens = _split_top(text)
    total = 0
    for token in tokens:  # count first: a hostile list must fail before it is expanded
        if not token:
            raise HostlistError(f"malformed hostlist {_short(text)!r}: empty element")
        total += _token_size(token, text)
        if total > MAX_HOSTS:
            raise HostlistError(f"hostlist {_short(text)!r} names more than jobenv's limit of {MAX_HOSTS:,} hosts")
    hosts: List[str] = []
    for token in tokens:
        for name in _expand_token(token, text):
            if not is_valid_host(name):
                raise HostlistError(f"malformed hostlist {text!r}: bad host name {name!r}")
            hosts.append(name)
    return hosts


_NUM_TAIL = r"^(.*?)([0-9]+)([^0-9]*)$"


def compress(hosts: Sequence[str]) -> str:
    """Compress host names into a Slurm hostlist, keeping their order.

    Consecutive hosts sharing prefix, suffix and digit width merge into one bracket
    group; the result always expands back to exactly `hosts`.
    """
    # each group: (prefix, suffix, width, ranges); width -1 marks a name without digits
    groups: List[Tuple[str, str, int, List[List[int]]]] = []
    import re

    num_tail = re.compile(_NUM_TAIL)
    for h in hosts:
        m = num_tail.match(h)
        if not m:
            groups.append((h, "", -1, []))
            continue
        pre, digits, suf = m.groups()
        n, w = int(digits), len(digits)
        last = groups[-1] if groups else None
        if last and last[2] == w and last[0] == pre and last[1] == suf:
            if last[3][-1][1] + 1 == n:
                last[3][-1][1] = n
            else:
                last[3].append([n, n])
        else:
            groups.append((pre, suf, w, [[n, n]]))
    parts: List[str] = []
    for pre, suf, w, ranges in groups:
        if w < 0:
            parts.append(pre)
        elif len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            parts.append(f"{pre}{str(ranges[0][0]).zfill(w)}{suf}")
        else:
            body = ",".join(
                str(a).zfill(w) if a == b else f"{str(a).zfill(w)}-{str(b).zfill(w)}"
                for a, b in ranges
            )
            parts.append(f"{pre}[{body}]{suf}")
    return ",".join(parts)


def parse_counts(text: str) -> List[int]:
    """Expand Slurm's per-node counts: `4(x2),2` -> [4, 4, 2]."""
    import re

    from jobenv.core.numparse import MAX_PER_HOST

    pairs = []
    total = 0
    for item in text.split(","):
        m = re.fullmatch(r"\s*([0-9]{1,30})(?:\(x([0-9]{1,30})\))?\s*", item)
        if not m:
            raise HostlistError(f"malformed per-node count list {_short(text)!r}")
        count, times = int(m.group(1)), int(m.group(2) or 1)
        total += times
        if total > MAX_HOSTS or count > MAX_PER_HOST:
            raise HostlistError(f"per-node count list {_short(text)!r} exceeds jobenv's limits "
                                f"({MAX_HOSTS:,} hosts, {MAX_PER_HOST:,} per host)")
        pairs.append((count, times))
    return [c for c, t in pairs for _ in range(t)]


def unique(hosts: Iterable[str]) -> List[str]:
    """Unique hosts in first-seen order (never sorted: order is the scheduler's)."""
    return list(dict.fromkeys(hosts))
