"""A profile's `submit` and `queues` keys checked: the directives `jobenv submit` writes into a
batch script (one printable line each, known placeholders only) and each queue's limits.
Split from check.py (the other keys) along that line: this is what submit trusts a profile with."""
from __future__ import annotations

import re
from typing import Any, Dict, Set

from jobenv.profiles.check import PLACEHOLDER, Fail, first_unknown, shown


# `submit` placeholders: what `jobenv submit` knows (jobenv.batch.script.values), plus the profile's vars
SUBMIT_KEYS = ("nodes", "walltime", "minutes", "queue", "account", "ranks_per_host", "gpus_per_host", "jobname")
SUBMIT_WORD = re.compile(r"[A-Za-z0-9_.:@%+=,/-]{1,128}")  # a queue, account or default: one plain word
MAX_DIRECTIVES = 64


def _directive(text: Any, known: Set[str], fail: Fail) -> str:
    """One directive: a single printable line (a newline would end the comment and start a
    shell command in the batch script) whose placeholders are all known."""
    if not isinstance(text, str) or not 0 < len(text) <= 200 or not text.isprintable() or not text.isascii():
        raise fail("submit", f"a directive is one line of at most 200 printable ASCII characters, not {shown(text)}")
    for ph in PLACEHOLDER.findall(text):
        if ph not in known:
            raise fail("submit", f"unknown placeholder {{{ph[:40]}}} (known: {', '.join(sorted(known))})")
    return text


def submit(spec: Any, variables: Dict[str, Any], fail: Fail) -> Dict[str, Any]:
    """`submit`: {directives: [text | {when: name, args: [text...]}], defaults: {name: word}}.
    Each directive becomes a line `<scheduler prefix> <text>` of the batch script, with
    {placeholders} filled by jobenv submit; an entry with `when` only when that value is
    set.  Defaults are plain words (they land in those lines too).  {} when absent."""
    if spec is None:
        return {}
    if not isinstance(spec, dict) or first_unknown(spec, ("directives", "defaults", "queues")):
        raise fail("submit", "must be a mapping with directives (a list), defaults and queues (mappings)")
    known = set(SUBMIT_KEYS) | set(variables)
    directives = spec.get("directives") or []
    if not isinstance(directives, list) or len(directives) > MAX_DIRECTIVES:
        raise fail("submit", f"directives must be a list of at most {MAX_DIRECTIVES} entries")
    for item in directives:
        if isinstance(item, dict):
            parts = item.get("args")
            if set(item) != {"when", "args"} or item["when"] not in known or not isinstance(parts, list):
                raise fail("submit", "a conditional directive is {when: <a placeholder name>, args: [text...]}")
            for part in parts:
                _directive(part, known, fail)
        else:
            _directive(item, known, fail)
    defaults = spec.get("defaults") or {}
    if not isinstance(defaults, dict) or not all(k in SUBMIT_KEYS and isinstance(v, (str, int)) and
                                                 not isinstance(v, bool) and SUBMIT_WORD.fullmatch(str(v))
                                                 for k, v in defaults.items()):
        raise fail("submit", f"defaults map {', '.join(SUBMIT_KEYS)} to plain words ({SUBMIT_WORD.pattern})")
    return {"directives": directives, "defaults": {k: str(v) for k, v in defaults.items()},
            "queues": queues(spec.get("queues"), fail)}


QUEUE_LIMITS = ("min_nodes", "max_nodes", "max_minutes")
MAX_QUEUES = 64


def queues(spec: Any, fail: Fail) -> Dict[str, Dict[str, int]]:
    """`submit: queues: {NAME: {min_nodes: N, max_nodes: N, max_minutes: M}}`: each queue's
    limits as the site documents them (jobenv.batch.queues chooses by them), in the order
    `submit` may choose them.  {} when absent."""
    if spec is None:
        return {}
    if not isinstance(spec, dict) or len(spec) > MAX_QUEUES:
        raise fail("submit", f"queues must map at most {MAX_QUEUES} queue names to their limits")
    out: Dict[str, Dict[str, int]] = {}
    for name, limits in spec.items():
        if not isinstance(name, str) or not SUBMIT_WORD.fullmatch(name):
            raise fail("submit", f"a queue name is one plain word ({SUBMIT_WORD.pattern}), not {shown(name)}")
        if not isinstance(limits, dict) or first_unknown(limits, QUEUE_LIMITS) or not all(
                isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 10_000_000 for v in limits.values()):
            raise fail("submit", f"queue {name}: limits map {', '.join(QUEUE_LIMITS)} to whole numbers from 1")
        if limits.get("min_nodes", 1) > limits.get("max_nodes", 10_000_000):
            raise fail("submit", f"queue {name}: min_nodes is more than max_nodes")
        out[name] = dict(limits)
    return out


# `fabric`: per backend, what `selftest --bandwidth` expects; NCCL's networks as the selftest names them
