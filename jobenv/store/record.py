"""The job record: the single source of truth every shell snippet is rendered from.

JSON on disk, `schema_version` 3 (times are UTC epoch seconds; version 1 stored local-time
strings and is migrated on read).  Version 3 carries save's launch decision: the profile's
launcher template it chose (`launch_template`: argv and the profile's vars, with the attach
flags of a record captured from outside the job) and the launcher's family
(`launcher_family`), so a launch re-finds neither; an older record has neither (None here:
jobenv.launch.plan.launcher derives the family once for it, and its template is found in its profile).  Reading validates every field the code uses (type,
range, finite numbers, strings that encode back to the bytes they came from) so that a
corrupt, truncated, foreign or future record is reported by name instead of half-used,
and never raises anything but BadRecord.

Other modules own optional top-level fields (`software`, `staged`, each checked here on
load); unknown fields round-trip untouched.  `provenance` (optional, absent in records saved
inside the job, so older records and older readers need no new schema version) says a
record was captured from outside the job: by which scheduler command, on which host, and
where each field came from (jobenv.capture.outside).
"""
from __future__ import annotations

from jobenv.core.errors import BadRecord
from jobenv.core.jsonread import loads
from jobenv.core.hostlist import is_valid_host
from jobenv.core.numparse import MAX_HOSTS, MAX_PER_HOST, is_finite
from jobenv.schedulers import NAMES as SCHEDULERS

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

SCHEMA_VERSION = 3
STATES = ("live", "ended", "unknown")
MAX_EPOCH = 1e11  # year 5138: anything later is corruption
_KNOWN = ("schema_version", "scheduler", "jobid", "jobname", "machine", "hosts", "nhosts",
          "gpus_per_host", "ngpus", "ranks_per_host", "nranks", "hostfile", "env_file", "launch",
          "launch_env", "env", "created_at", "created_on", "user", "warnings", "status", "staged", "software", "provenance",
          "launch_template", "launcher_family")
_REQUIRED_TEXT = ("scheduler", "jobid", "machine", "created_on")
_OPTIONAL_TEXT = ("hostfile", "jobname", "user")
_STATUS_TEXT = ("reason", "gpus_from", "nodefile")


class JobRecord:
    """Everything a fresh shell or a rank needs to know about one job.

    A plain class rather than a dataclass: this is read on the `jobenv get` path, which
    runs in every new shell, and `import dataclasses` alone costs half its budget.
    `created_at` is when the record was saved (UTC epoch seconds); `extra` holds optional
    fields added by other modules, written back as they were read.
    """

    __slots__ = ("scheduler", "jobid", "machine", "hosts", "gpus_per_host", "ranks_per_host",
                 "hostfile", "launch", "env", "created_at", "created_on", "jobname", "user",
                 "launch_env", "warnings", "status", "schema_version", "env_file", "extra", "staged",
                 "software", "provenance", "launch_template", "launcher_family")

    def __init__(self, scheduler: str, jobid: str, machine: str, hosts: List[str], gpus_per_host: int,
                 ranks_per_host: int, hostfile: Optional[str], launch: List[str], env: Dict[str, str],
                 created_at: float, created_on: str, jobname: Optional[str] = None, user: Optional[str] = None,
                 launch_env: Optional[Dict[str, str]] = None, warnings: Optional[List[str]] = None,
                 status: Optional[Dict[str, Any]] = None, schema_version: int = SCHEMA_VERSION,
                 env_file: Optional[str] = None, extra: Optional[Dict[str, Any]] = None,
                 staged: Optional[Dict[str, Dict[str, Any]]] = None,
                 software: Optional[Dict[str, Any]] = None,
                 provenance: Optional[Dict[str, Any]] = None,
                 launch_template: Optional[Dict[str, Any]] = None, launcher_family: Optional[str] = None) -> None:
        self.scheduler, self.jobid, self.machine, self.hosts = scheduler, jobid, machine, hosts
        self.gpus_per_host, self.ranks_per_host, self.hostfile = gpus_per_host, ranks_per_host, hostfile
        self.launch, self.env, self.created_at, self.created_on = launch, env, created_at, created_on
        self.jobname, self.user = jobname, user
        self.launch_env = launch_env if launch_env is not None else {}
        self.warnings = warnings if warnings is not None else []
        self.status = status if status is not None else {}
        self.schema_version = schema_version
        self.env_file = env_file  # file name (no directory) of the env file this save wrote
        self.extra = extra if extra is not None else {}
        self.staged = staged if staged is not None else {}  # optional: `jobenv stage` copies per host
        self.software = software  # optional: jobenv.store.software_field (Python env, launcher path, modules)
        self.provenance = provenance  # optional: captured from outside the job (jobenv.capture.outside)
        # save's launch decision ({argv, vars}: the profile's template it rendered `launch` from);
        # None in a record older than version 3
        self.launch_template = launch_template
        # the launcher's family (jobenv.runtime.families), "" when it is none jobenv knows;
        # None in a record older than version 3 (jobenv.launch.plan.launcher.launcher_family derives it)
        self.launcher_family = launcher_family

    @property
    def nhosts(self) -> int:
        return len(self.hosts)

    @property
    def ngpus(self) -> int:
        return self.gpus_per_host * len(self.hosts)

    @property
    def nranks(self) -> int:
        return self.ranks_per_host * len(self.hosts)

    def to_dict(self) -> Dict[str, Any]:
        """The JSON contract, in a stable key order (optional fields last)."""
        out = {
            "schema_version": SCHEMA_VERSION, "scheduler": self.scheduler, "jobid": self.jobid,
            "jobname": self.jobname, "machine": self.machine, "hosts": list(self.hosts),
            "nhosts": self.nhosts, "gpus_per_host": self.gpus_per_host, "ngpus": self.ngpus,
            "ranks_per_host": self.ranks_per_host, "nranks": self.nranks, "hostfile": self.hostfile,
            "env_file": self.env_file, "launch": list(self.launch), "launch_env": dict(self.launch_env),
            "env": dict(self.env), "created_at": self.created_at, "created_on": self.created_on,
            "user": self.user, "warnings": list(self.warnings), "status": dict(self.status),
            "launch_template": self.launch_template, "launcher_family": self.launcher_family,
        }
        if self.staged:
            out["staged"] = {h: dict(e) for h, e in self.staged.items()}
        if self.software is not None:
            out["software"] = self.software
        if self.provenance is not None:
            out["provenance"] = self.provenance
        out.update((k, v) for k, v in self.extra.items() if k not in out)
        return out

    def to_json(self) -> str:
        import json

        # allow_nan=False: a record must stay valid JSON for every other reader (jq, Python).
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"


def _migrate(data: Dict[str, Any], where: str) -> Dict[str, Any]:
    """Bring an older record up to SCHEMA_VERSION.

    1 -> 2: `created_at` was a local-time string with its UTC offset
    ("2026-01-01T10:00:00-0600"); it becomes UTC epoch seconds.  Version 1 wrote its env
    file as `<key>.env` (env_file None says so).
    2 -> 3: no field changes; `launch_template` and `launcher_family` are absent (None).
    """
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadRecord(f"{where}: not a jobenv record (schema_version {version!r})", kind="corrupt")
    if version > SCHEMA_VERSION:
        raise BadRecord(
            f"{where}: schema_version {version} is newer than this jobenv understands "
            f"({SCHEMA_VERSION}); upgrade jobenv to read it", kind="future")
    if version == 1:
        data = dict(data)
        created = data.get("created_at")
        from datetime import datetime  # only version-1 records pay for this import

        try:
            data["created_at"] = datetime.strptime(str(created), "%Y-%m-%dT%H:%M:%S%z").timestamp()
        except ValueError:
            data["created_at"] = 0.0  # a time version 1 did not write: saved time unknown, sorts oldest
        data["env_file"] = None
    if version < SCHEMA_VERSION:
        data = dict(data)
        for name in ("launch_template", "launcher_family"):  # not an older version's to name
            data.pop(name, None)
        data["schema_version"] = SCHEMA_VERSION
    return data


def _bad(where: str, what: str) -> BadRecord:
    return BadRecord(f"{where}: corrupt record: {what}", kind="corrupt")


def _text(s: Any) -> bool:
    """A string that encodes back to bytes: lone surrogates other than the U+DC80-DCFF
    that stand for undecodable bytes would make every later print raise."""
    if not isinstance(s, str):
        return False
    if s.isascii():
        return "\x00" not in s
    try:
        s.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return "\x00" not in s


def _all_text(items: Any) -> bool:
    """_text for every item, in one pass over one joined string (records carry hundreds)."""
    try:
        return _text("\x01".join(items))
    except TypeError:
        return False


def _count(val: Any, lo: int, hi: int) -> bool:
    return isinstance(val, int) and not isinstance(val, bool) and lo <= val <= hi


def _epoch(val: Any) -> bool:
    return is_finite(val) and 0 <= val <= MAX_EPOCH


def _check_status(st: Any, where: str) -> Dict[str, Any]:
    """Fields of `status` that jobenv reads are checked; other keys are kept as they are."""
    if not isinstance(st, dict):
        raise _bad(where, "status is not an object")
    if "state" in st and st["state"] not in STATES:
        raise _bad(where, f"status.state {st['state']!r} is not one of {', '.join(STATES)}")
    for key in ("heartbeat", "ended_at", "checked_at"):
        if key in st and not _epoch(st[key]):
            raise _bad(where, f"status.{key} is not a time")
    if "interval" in st and not (is_finite(st["interval"]) and 0 < st["interval"] <= 86400):
        raise _bad(where, "status.interval is not a number of seconds")
    texts = [st.get(k) for k in _STATUS_TEXT]
    if not _all_text(v for v in texts if v is not None):
        bad = next(k for k, v in zip(_STATUS_TEXT, texts) if v is not None and not _text(v))
        raise _bad(where, f"status.{bad} is not a string")
    w = st.get("watcher")
    if w is not None and not (isinstance(w, dict) and _text(w.get("host"))
                              and _count(w.get("pid"), 1, 2**31)):
        raise _bad(where, "status.watcher is not {host, pid}")
    return dict(st)


def from_dict(data: Any, where: str = "record") -> JobRecord:
    """Validate and build a JobRecord; raise BadRecord naming `where` on any defect."""
    if not isinstance(data, dict):
        raise BadRecord(f"{where}: not a jobenv record (not a JSON object)", kind="corrupt")
    data = _migrate(data, where)
    required = [data.get(k) for k in _REQUIRED_TEXT]
    if not (all(isinstance(v, str) and v for v in required) and _all_text(required)):
        for key in _REQUIRED_TEXT:  # the slow path, only to name the field
            if not _text(data.get(key)) or not data[key]:
                raise _bad(where, f"field {key!r} missing or not a string")
    if data["scheduler"] not in SCHEDULERS:
        raise _bad(where, f"unknown scheduler {data['scheduler']!r}")
    if len(data["jobid"]) > 1024:
        raise _bad(where, "job id longer than 1024 characters")
    hosts = data.get("hosts")
    if (not isinstance(hosts, list) or not 0 < len(hosts) <= MAX_HOSTS
            or not all(isinstance(h, str) and is_valid_host(h) for h in hosts)):
        raise _bad(where, "bad host list")
    launch = data.get("launch")
    if not isinstance(launch, list) or not launch or not _all_text(launch):
        raise _bad(where, "bad launch command")
    for key in ("env", "launch_env"):
        val = data.get(key, {})
        if not isinstance(val, dict) or not (_all_text(val) and _all_text(val.values())):
            raise _bad(where, f"{key} must map strings to strings")
    optional = [data.get(k) for k in _OPTIONAL_TEXT]
    if not _all_text(v for v in optional if v is not None):
        bad = next(k for k, v in zip(_OPTIONAL_TEXT, optional) if v is not None and not _text(v))
        raise _bad(where, f"bad {bad}")
    env_file = data.get("env_file")
    if env_file is not None and not (_text(env_file) and env_file.endswith(".env")
                                     and "/" not in env_file and not env_file.startswith(".")):
        raise _bad(where, "bad env_file")
    if not _count(data.get("gpus_per_host"), 0, MAX_PER_HOST) or not _count(data.get("ranks_per_host"), 1, MAX_PER_HOST):
        raise _bad(where, "bad GPU or rank count")
    if not _epoch(data.get("created_at")):
        raise _bad(where, "created_at is not a time")
    warnings = data.get("warnings", [])
    if not isinstance(warnings, list) or not _all_text(warnings):
        raise _bad(where, "warnings must be a list of strings")
    status = _check_status(data.get("status", {}), where)
    extra = {k: v for k, v in data.items() if k not in _KNOWN}
    return JobRecord(
        scheduler=data["scheduler"], jobid=data["jobid"], machine=data["machine"],
        hosts=list(hosts), gpus_per_host=data["gpus_per_host"],
        ranks_per_host=data["ranks_per_host"], hostfile=data.get("hostfile"), launch=list(launch),
        env=dict(data.get("env") or {}), created_at=data["created_at"], created_on=data["created_on"],
        jobname=data.get("jobname"), user=data.get("user"),
        launch_env=dict(data.get("launch_env", {})), warnings=list(warnings), status=status,
        env_file=env_file, extra=extra, staged=_staged(data.get("staged"), where),
        software=_software(data.get("software")), provenance=_provenance(data.get("provenance"), where),
        launch_template=_template(data.get("launch_template"), where), launcher_family=_family(data, where),
    )


def _template(value: Any, where: str) -> Optional[Dict[str, Any]]:
    """Optional `launch_template`: {argv: [word | {when: name, args: [word]}], vars: {name: text}}
    (a profile's launcher, as jobenv.profiles.load checked it when save chose it)."""
    if value is None:
        return None
    argv: Any = value.get("argv") if isinstance(value, dict) else None
    variables: Any = value.get("vars") if isinstance(value, dict) else None
    ok = (isinstance(argv, list) and argv and isinstance(argv[0], str) and isinstance(variables, dict)
          and _all_text(variables) and _all_text(variables.values())
          and all(_text(w) or (isinstance(w, dict) and set(w) == {"when", "args"} and _text(w["when"])
                               and isinstance(w["args"], list) and _all_text(w["args"])) for w in argv))
    if not ok:
        raise _bad(where, "bad launch_template field")
    return {"argv": [w if isinstance(w, str) else {"when": w["when"], "args": list(w["args"])} for w in argv],
            "vars": dict(variables)}


def _family(data: Dict[str, Any], where: str) -> Optional[str]:
    """Optional `launcher_family`: a word ("" for a launcher jobenv knows none of)."""
    value = data.get("launcher_family")
    if value is not None and not (isinstance(value, str) and (value == "" or value.isidentifier())):
        raise _bad(where, "bad launcher_family field")
    return value


def _software(value: Any) -> Optional[Dict[str, Any]]:
    """Optional `software` field, validated by its owner module (dropped, not fatal, when malformed)."""
    from jobenv.store.software_field import validate

    return validate(value)


def _provenance(value: Any, where: str) -> Optional[Dict[str, Any]]:
    """Optional `provenance`: {how: "outside", command: str, on: str, fields: {str: str}}."""
    if value is None:
        return None
    fields = value.get("fields") if isinstance(value, dict) else None
    ok = (isinstance(value, dict) and value.get("how") == "outside" and _text(value.get("command"))
          and _text(value.get("on")) and isinstance(fields, dict) and _all_text(fields)
          and _all_text(fields.values()))
    if not ok:
        raise _bad(where, "bad provenance field")
    return {"how": "outside", "command": value["command"], "on": value["on"], "fields": dict(value["fields"])}


def _staged(value: Any, where: str) -> Dict[str, Dict[str, Any]]:
    """Optional `staged` field: {host: {prefix: str, manifest: str, verified_at: number}}."""
    if value is None:
        return {}
    ok = isinstance(value, dict) and all(
        isinstance(h, str) and is_valid_host(h) and isinstance(e, dict)
        and _text(e.get("prefix")) and e["prefix"].startswith("/")
        and _text(e.get("manifest")) and _epoch(e.get("verified_at"))
        for h, e in value.items())
    if not ok:
        raise _bad(where, "bad staged field")
    return {h: {"prefix": e["prefix"], "manifest": e["manifest"], "verified_at": e["verified_at"]}
            for h, e in value.items()}


def from_json(text: str, where: str = "record") -> JobRecord:
    """Parse JSON text into a JobRecord (BadRecord on truncation or garbage)."""
    try:
        data = loads(text)
    except (ValueError, RecursionError) as exc:
        raise BadRecord(f"{where}: corrupt record (invalid JSON: {exc})", kind="corrupt") from None
    return from_dict(data, where)
