"""The job record: the single source of truth every shell snippet is rendered from.

JSON on disk, `schema_version` 1.  Reading validates shape and types so that a corrupt,
truncated, foreign or future record is reported by name instead of half-used.
"""
from __future__ import annotations

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below

from .errors import BadRecord

if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional
from .hostlist import is_valid_host

SCHEMA_VERSION = 1
SCHEDULERS = ("pbs", "slurm", "cobalt", "local")


class JobRecord:
    """Everything a fresh shell or a rank needs to know about one job.

    A plain class rather than a dataclass: this is read on the `jobenv get` path, which
    runs in every new shell, and `import dataclasses` alone costs half its budget.
    """

    __slots__ = ("scheduler", "jobid", "machine", "hosts", "gpus_per_host", "ranks_per_host",
                 "hostfile", "launch", "env", "created_at", "created_on", "jobname", "user",
                 "launch_env", "warnings", "status", "schema_version", "staged", "software")

    def __init__(self, scheduler: str, jobid: str, machine: str, hosts: List[str], gpus_per_host: int,
                 ranks_per_host: int, hostfile: Optional[str], launch: List[str], env: Dict[str, str],
                 created_at: str, created_on: str, jobname: Optional[str] = None, user: Optional[str] = None,
                 launch_env: Optional[Dict[str, str]] = None, warnings: Optional[List[str]] = None,
                 status: Optional[Dict[str, Any]] = None, schema_version: int = SCHEMA_VERSION,
                 staged: Optional[Dict[str, Dict[str, Any]]] = None,
                 software: Optional[Dict[str, Any]] = None) -> None:
        self.scheduler, self.jobid, self.machine, self.hosts = scheduler, jobid, machine, hosts
        self.gpus_per_host, self.ranks_per_host, self.hostfile = gpus_per_host, ranks_per_host, hostfile
        self.launch, self.env, self.created_at, self.created_on = launch, env, created_at, created_on
        self.jobname, self.user = jobname, user
        self.launch_env = launch_env if launch_env is not None else {}
        self.warnings = warnings if warnings is not None else []
        self.status = status if status is not None else {}
        self.schema_version = schema_version
        self.staged = staged if staged is not None else {}  # optional: `jobenv stage` copies per host
        self.software = software  # optional: jobenv.software (Python env, launcher path, modules)

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
        """The JSON contract, in a stable key order."""
        return {
            "schema_version": self.schema_version, "scheduler": self.scheduler, "jobid": self.jobid,
            "jobname": self.jobname, "machine": self.machine, "hosts": list(self.hosts),
            "nhosts": self.nhosts, "gpus_per_host": self.gpus_per_host, "ngpus": self.ngpus,
            "ranks_per_host": self.ranks_per_host, "nranks": self.nranks, "hostfile": self.hostfile,
            "launch": list(self.launch), "launch_env": dict(self.launch_env), "env": dict(self.env),
            "created_at": self.created_at, "created_on": self.created_on, "user": self.user,
            "warnings": list(self.warnings), "status": dict(self.status),
        }

    def to_json_dict(self) -> Dict[str, Any]:
        """to_dict plus the optional fields that are set."""
        out = self.to_dict()
        if self.staged:
            out["staged"] = {h: dict(e) for h, e in self.staged.items()}
        if self.software is not None:
            out["software"] = self.software
        return out

    def to_json(self) -> str:
        import json

        return json.dumps(self.to_json_dict(), indent=2) + "\n"


_FIELDS = {
    "scheduler": str, "jobid": str, "machine": str, "hosts": list, "gpus_per_host": int,
    "ranks_per_host": int, "launch": list, "env": dict, "created_at": str, "created_on": str,
}


def _migrate(data: Dict[str, Any], where: str) -> Dict[str, Any]:
    """Bring an older record up to SCHEMA_VERSION (none exist yet: version 1 is the first)."""
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadRecord(f"{where}: not a jobenv record (schema_version {version!r})")
    if version > SCHEMA_VERSION:
        raise BadRecord(
            f"{where}: schema_version {version} is newer than this jobenv understands "
            f"({SCHEMA_VERSION}); upgrade jobenv to read it"
        )
    return data


def from_dict(data: Any, where: str = "record") -> JobRecord:
    """Validate and build a JobRecord; raise BadRecord naming `where` on any defect."""
    if not isinstance(data, dict):
        raise BadRecord(f"{where}: not a jobenv record (not a JSON object)")
    data = _migrate(data, where)
    for key, typ in _FIELDS.items():
        val = data.get(key)
        if not isinstance(val, typ) or isinstance(val, bool):
            raise BadRecord(f"{where}: corrupt record: field {key!r} missing or not {typ.__name__}")
    if data["scheduler"] not in SCHEDULERS:
        raise BadRecord(f"{where}: corrupt record: unknown scheduler {data['scheduler']!r}")
    if not data["hosts"] or not all(isinstance(h, str) and is_valid_host(h) for h in data["hosts"]):
        raise BadRecord(f"{where}: corrupt record: bad host list")
    if not all(isinstance(a, str) for a in data["launch"]) or not data["launch"]:
        raise BadRecord(f"{where}: corrupt record: bad launch command")
    for key in ("env", "launch_env"):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in data.get(key, {}).items()):
            raise BadRecord(f"{where}: corrupt record: {key} must map strings to strings")
    hostfile = data.get("hostfile")
    if hostfile is not None and not isinstance(hostfile, str):
        raise BadRecord(f"{where}: corrupt record: bad hostfile")
    if data["gpus_per_host"] < 0 or data["ranks_per_host"] < 1:
        raise BadRecord(f"{where}: corrupt record: bad GPU or rank count")
    return JobRecord(
        staged=_staged(data.get("staged"), where),
        scheduler=data["scheduler"], jobid=data["jobid"], machine=data["machine"],
        hosts=list(data["hosts"]), gpus_per_host=data["gpus_per_host"],
        ranks_per_host=data["ranks_per_host"], hostfile=hostfile, launch=list(data["launch"]),
        env=dict(data["env"]), created_at=data["created_at"], created_on=data["created_on"],
        jobname=data.get("jobname") if isinstance(data.get("jobname"), str) else None,
        user=data.get("user") if isinstance(data.get("user"), str) else None,
        launch_env=dict(data.get("launch_env") or {}),
        warnings=[w for w in data.get("warnings") or [] if isinstance(w, str)],
        status=data["status"] if isinstance(data.get("status"), dict) else {},
        software=_software(data.get("software")),
    )


def _software(value: Any) -> Optional[Dict[str, Any]]:
    """Optional `software` field, validated by its owner module (dropped, not fatal, when malformed)."""
    from .software import validate

    return validate(value)


def _staged(value: Any, where: str) -> Dict[str, Dict[str, Any]]:
    """Optional `staged` field: {host: {prefix: str, manifest: str, verified_at: number}}."""
    if value is None:
        return {}
    ok = isinstance(value, dict) and all(
        isinstance(h, str) and is_valid_host(h) and isinstance(e, dict)
        and isinstance(e.get("prefix"), str) and e["prefix"].startswith("/")
        and isinstance(e.get("manifest"), str)
        and isinstance(e.get("verified_at"), (int, float)) and not isinstance(e.get("verified_at"), bool)
        for h, e in value.items())
    if not ok:
        raise BadRecord(f"{where}: corrupt record: bad staged field")
    return {h: {"prefix": e["prefix"], "manifest": e["manifest"], "verified_at": e["verified_at"]}
            for h, e in value.items()}


class _ScanContext:
    """What CPython's C JSON scanner reads from json.JSONDecoder."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__


def loads(text: str):
    """json.loads, without importing json.decoder when CPython's C scanner is there.

    json.decoder imports `re` (with enum, ~6 ms): a third of what `jobenv get` may add to
    the interpreter's start-up in every new shell.  The C scanner parses exactly as
    json.loads does; only its error messages are plainer.
    """
    try:
        from _json import make_scanner
    except ImportError:  # not CPython
        import json

        return json.loads(text)
    text = text.strip(" \t\n\r")
    try:
        value, end = make_scanner(_ScanContext())(text, 0)
    except (StopIteration, SystemError):
        # Invalid JSON.  Some errors the C scanner reports through json.decoder, which is
        # not loaded here (SystemError): let json.loads find and describe the defect.
        import json

        return json.loads(text)
    if end != len(text):
        raise ValueError(f"extra data at character {end}")
    return value


def from_json(text: str, where: str = "record") -> JobRecord:
    """Parse JSON text into a JobRecord (BadRecord on truncation or garbage)."""
    try:
        data = loads(text)
    except (ValueError, RecursionError) as exc:
        raise BadRecord(f"{where}: corrupt record (invalid JSON: {exc})") from None
    return from_dict(data, where)
