"""When a process started (field 22 of /proc/PID/stat): with its pid, it names one process, so
a pid reused since is never taken for the one a ledger line or a lock recorded.

Shared by the rank keeper (its `start` line, the agent's lock) and the host agent (before it
signals a pid), and below both: neither imports the other to read it.  The keeper runs as a
script in an isolated Python (`python -I -S keeper.py`), so this module is standard library
only and does nothing at import, like the two of them.
"""


def started(pid: int, running: bool = False) -> str:
    """When `pid` started, in clock ticks after boot (field 22 of /proc/PID/stat); '' when gone
    (with `running`, also when it is a zombie: the host agent's test of a process it may signal)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2:].split()
        return "" if running and fields[0] in (b"Z", b"X") else fields[19].decode("ascii")
    except (OSError, ValueError, IndexError):
        return ""
