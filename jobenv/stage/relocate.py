"""Make a copy work at its new path, as conda-pack does: rewrite the old prefix where
files and symlinks name it.

Text files (scripts' shebangs, `activate`, `pyvenv.cfg`, conda's text files) get the new
prefix; a shebang that grows past what the kernel reads (127 bytes on older kernels)
becomes pip's sh trampoline.  Binary files get the conda treatment: the prefix inside a
NUL-terminated string is replaced and the string padded with NULs, which only works when
the new prefix is not longer than the old one; otherwise the copy is refused (conda) or
the file is left naming the shared path (venv: only ELF files are patched, and one that
does not fit, typically an interpreter's RUNPATH, still works from the shared path).
Which files to touch was decided once, while packing (see pack.py).
"""
from __future__ import annotations

import os
import re
from functools import partial
from typing import Callable, Dict, List, Tuple

Pairs = List[Tuple[bytes, bytes]]
SHEBANG_MAX = 127


class RelocError(Exception):
    pass


def mapping(roots: Dict[str, List[str]], copy: str, base_dir: str) -> Pairs:
    """(old, new) pairs, longest old first so /a/b/env wins over /a/b."""
    new = {"env": copy, "base": os.path.join(copy, base_dir)}
    pairs = [(o.encode("utf-8", "surrogateescape"), new[tree].encode("utf-8", "surrogateescape"))
             for tree, olds in roots.items() for o in olds]
    return sorted(pairs, key=lambda p: len(p[0]), reverse=True)


def _sub(data: bytes, pairs: Pairs) -> bytes:
    table = dict(pairs)
    pattern = re.compile(b"|".join(re.escape(o) for o, _ in pairs))
    return pattern.sub(lambda m: table[m.group(0)], data)


def fix_shebang(data: bytes) -> bytes:
    """A `#!/long/path/python` line the kernel cannot read becomes an sh trampoline."""
    if not data.startswith(b"#!"):
        return data
    line, nl, rest = data.partition(b"\n")
    if len(line) <= SHEBANG_MAX or b"python" not in line:
        return data
    interp = line[2:].strip()
    return b"#!/bin/sh\n'''exec' \"" + interp + b"\" \"$0\" \"$@\"\n' '''\n" + rest if nl else data


def _padder(new: bytes) -> Callable[[re.Match[bytes]], bytes]:
    def pad(m: "re.Match[bytes]") -> bytes:
        return (new + m.group(1)).ljust(len(m.group(0)) - 1, b"\0") + b"\0"
    return pad


def _pad_binary(data: bytes, pairs: Pairs, name: str) -> bytes:
    for old, new in pairs:
        if old not in data:
            continue
        if len(new) > len(old):
            raise RelocError(f"{name} holds the old prefix in binary form and the new prefix is "
                             f"{len(new) - len(old)} bytes longer; choose a shorter --to")
        data = re.sub(re.escape(old) + b"([^\0]*)\0", _padder(new), data)
    return data


def _elf_fits(path: str, pairs: Pairs) -> bool:
    with open(path, "rb") as f:
        if f.read(4) != b"\x7fELF":
            return False
        data = f.read()
    return all(len(new) <= len(old) for old, new in pairs if old in data)


def _rewrite(path: str, fn: Callable[[bytes], bytes]) -> bool:
    st = os.lstat(path)
    with open(path, "rb") as f:
        data = f.read()
    out = fn(data)
    if out == data:
        return False
    writable = st.st_mode | 0o200
    if writable != st.st_mode:
        os.chmod(path, writable)
    tmp = path + ".jobenv-reloc"
    with open(tmp, "wb") as f:
        f.write(out)
    os.chmod(tmp, st.st_mode & 0o7777)
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)
    return True


def relocate(items: List[Tuple[str, str]], root_of: Callable[[str], str], pairs: Pairs, kind: str) -> Dict[str, int]:
    """Rewrite every listed member.  `root_of(member)` gives its path in the copy.

    Returns counts: text, binary, link rewritten; left (binary files kept as they are).
    """
    counts = {"text": 0, "binary": 0, "link": 0, "left": 0}
    for member, how in items:
        path = root_of(member)
        if how == "link":
            target = os.readlink(path).encode("utf-8", "surrogateescape")
            new = _sub(target, pairs)
            if new != target:
                os.unlink(path)
                os.symlink(new, path)
                counts["link"] += 1
        elif how == "text":
            counts["text"] += _rewrite(path, lambda d: fix_shebang(_sub(d, pairs)))
        elif kind == "conda":
            counts["binary"] += _rewrite(path, partial(_pad_binary, pairs=pairs, name=member))
        elif _elf_fits(path, pairs):  # venv: an ELF file's strings (RUNPATH), when the new path fits
            counts["binary"] += _rewrite(path, partial(_pad_binary, pairs=pairs, name=member))
        else:
            counts["left"] += 1
    return counts
