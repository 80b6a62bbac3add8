"""`jobenv doctor`: why a launch will not work, told before an allocation is spent on it.

Most hangs reported in this field are an mpi4py built against another MPI than the
launcher, a torch without the expected backend, a GPU count that does not match the
record, or an unreachable rendezvous address.  Each check is data, Check(name, status,
detail, fix), computed by a function of its inputs; probes that run programs (launcher
--version, imports of torch, mpi4py, ...) run in bounded subprocesses, all at once
(jobenv.doctor.probes), and their text is judged by pure functions (jobenv.doctor.judges:
`mpi_flavor`, `judge_mpi4py`, ...).  Rendering as text or JSON comes last.  Exit 1 if any
check fails.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from jobenv.doctor import probes
from jobenv.core.numparse import plural
from jobenv.doctor.judges import Check, judge_gpus, judge_imports, judge_launcher, launcher_family
from jobenv.store.record import JobRecord


def check_deep(jobid: str, env: Mapping[str, str], timeout: float) -> List[Check]:
    """A two-rank all-reduce through `jobenv launch`: the whole path, for real; and the
    selftest's fabric verdict (its `fabric STATUS: ...` and `  fix: ...` lines)."""
    rc, tail, lines = probes.run_deep(probes.deep_argv(jobid), env, timeout)
    fabric = [fabric_check(ln, lines[i + 1] if i + 1 < len(lines) else "") for i, ln in enumerate(lines)
              if ln.startswith("fabric ")][:1]
    if rc == 0:
        return [Check("selftest", "ok", "two-rank all-reduce through `jobenv launch` passed"), *fabric]
    return [Check("selftest", "fail", f"two-rank selftest {'timed out' if rc is None else f'exited {rc}'}: {tail}",
                  "run `jobenv launch -- python3 -m jobenv.selftest` and read the first error"), *fabric]


def fabric_check(line: str, after: str) -> Check:
    """`fabric FAIL: says` (and `  fix: ...` after it) as a Check."""
    status, _, says = line[len("fabric "):].partition(": ")
    fix = after.strip()[len("fix: "):] if after.strip().startswith("fix: ") else ""
    return Check("fabric", {"OK": "ok", "FAIL": "fail"}.get(status, "warn"), says, fix)


def check_launcher_fit(rec: JobRecord, env: Mapping[str, str], exe: str, row: Any) -> Optional[Check]:
    """A fail when the launcher found is not the family the profile's flags are written for
    (jobenv.launcher_fit, the rule `save` warns by); None when it fits or cannot be told."""
    from jobenv import launcher_fit
    from jobenv.profiles import load as profiles

    prof = profiles.load_all(env).get(rec.machine)
    if prof is None or not rec.launch:
        return None
    bad = launcher_fit.mismatch(prof.name, launcher_fit.declared(prof.launchers, rec.launch[0]), row, exe)
    return Check("launcher", "fail", bad[0], bad[1]) if bad else None


def own_launcher(env: Mapping[str, str]) -> Optional[Tuple[str, str]]:
    """(path, flavor) of the mpiexec installed beside this Python (a venv's MPICH wheel), if any."""
    exe = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.access(exe, os.X_OK):
        return None
    row = launcher_family(exe, "")
    return (exe, row.flavor) if row is not None else None


def check_store(env: Mapping[str, str]) -> List[Check]:
    from jobenv.store import files as store
    from jobenv.core.errors import BadRecord

    d = store.jobs_dir(dict(env))
    if not os.path.isdir(d):
        return [Check("store", "warn", f"{d} does not exist yet", "run `jobenv save` inside your allocation")]
    try:
        store.open_store(dict(env))
        for name in sorted(os.listdir(d)):
            if name.endswith((".json", ".env", ".hosts")):
                store.check_safe(os.path.join(d, name), is_dir=False)
    except BadRecord as exc:
        msg = exc.message
        return [Check("store", "fail", msg.split("; ")[0], msg.split("; ", 1)[1] if "; " in msg else "")]
    return [Check("store", "ok", f"{d}: yours, not writable by group or others")]


def check_shell(env: Mapping[str, str]) -> Check:
    """Would a brand-new shell (ssh, tmux, an IDE terminal: no venv active) find jobenv?
    Asked of the user's own shell, started with an empty environment twice, as interactive
    and as a login shell (`bash -l -c`, a batch script's shell), which read different files:
    each must bring getjobenv and jobenv on its own."""
    import shutil
    import subprocess

    from jobenv.doctor.judges import judge_shell
    from jobenv.restore.init import exe_path
    from jobenv.restore.init_install import login_file, rc_file

    sh = os.path.basename(env.get("SHELL", "")) or "bash"
    sh = sh if sh in ("bash", "zsh", "fish") else "bash"
    home = env.get("HOME") or os.path.expanduser("~")
    prog = shutil.which(sh, path=env.get("PATH", "") + ":/usr/bin:/bin")
    if prog is None:
        return Check("shell", "warn", f"{sh} is not installed here; cannot check a new shell")
    probe = ("functions -q getjobenv; and printf 'J:%s\\n' $JOBENV_EXE" if sh == "fish" else
             "command -v getjobenv >/dev/null 2>&1 && printf 'J:%s\\n' \"${JOBENV_EXE:-$(command -v jobenv)}\"")
    fresh = {"HOME": home, "PATH": "/usr/bin:/bin", "TERM": "dumb", "LANG": env.get("LANG", "C.UTF-8")}
    if sh == "zsh" and env.get("ZDOTDIR"):
        fresh["ZDOTDIR"] = env["ZDOTDIR"]
    exe = exe_path(sys.argv[0], sys.executable)
    checks, paths = [], []
    for how, flag, path in (("", "-i", rc_file(sh, {**env, "HOME": home})),
                            ("login ", "-l", login_file(sh, {**env, "HOME": home}))):
        if path is None:  # fish: one file for every shell
            continue
        paths.append(path.replace(home, "~", 1))
        try:
            out = subprocess.run([prog, flag, "-c", probe], env=fresh, capture_output=True, text=True, timeout=20,
                                 stdin=subprocess.DEVNULL, cwd=home if os.path.isdir(home) else "/").stdout
        except (OSError, subprocess.SubprocessError) as exc:
            return Check("shell", "warn", f"a new {how}{sh} could not be started: {exc}")
        checks.append(judge_shell(how + sh, out, paths[-1], exe, _has_line(path), sh))
    order = {"ok": 0, "warn": 1, "fail": 2}
    worst = max(checks, key=lambda c: order.get(c.status, 2))
    if worst.status == "ok" and len(checks) > 1:
        return Check("shell", "ok", f"{checks[0].detail}; a login {sh} too, from {paths[1]}")
    return worst


def _has_line(path: str) -> bool:
    """Whether the rc file holds `jobenv init --install`'s marked line (unreadable: no)."""
    from jobenv.restore.init_install import MARK
    from jobenv.core.readfile import read_bytes

    try:
        return MARK.encode() in read_bytes(path, 16 << 20)
    except (OSError, ValueError):
        return False


def check_pythonpath(env: Mapping[str, str]) -> List[Check]:
    """Only when PYTHONPATH is set: its empty or relative entries are the cwd (jobenv.core.interpreter)."""
    from jobenv.core.interpreter import cwd_entries

    if not env.get("PYTHONPATH"):
        return []
    bad = ", ".join(map(repr, cwd_entries(env["PYTHONPATH"])))
    return [Check("pythonpath", "warn", f"PYTHONPATH entry {bad} is the current directory (or under it): python "
                  "imports from wherever you run it", "drop empty and relative entries") if bad
            else Check("pythonpath", "ok", "PYTHONPATH holds absolute directories only")]


def check_rendezvous(rec: JobRecord, env: Mapping[str, str], host: str, resolve: Callable[[str], Optional[str]]) -> List[Check]:
    """MASTER_ADDR (else the record's first host) resolves; MASTER_PORT, if set, is free there."""
    addr = env.get("MASTER_ADDR") or ("127.0.0.1" if rec.nhosts == 1 else rec.hosts[0])
    err = resolve(addr)
    if err:
        return [Check("rendezvous", "fail", f"cannot resolve {addr}: {err}",
                      "set MASTER_ADDR to an address of the first host that every host can reach")]
    return [Check("rendezvous", "ok", f"{addr} resolves"), check_master_port(env.get("MASTER_PORT", ""), addr, host)]


def check_master_port(text: str, addr: str, host: str) -> Check:
    """MASTER_PORT by the runtime's own rule (runtime.info.port_number); on this host, it and the
    check-in's port beside it are free."""
    from jobenv.core.hostlist import host_index
    from jobenv.runtime.checkin import port_beside
    from jobenv.runtime.info import DetectError, port_number

    if not text:
        return Check("port", "ok", "derived per launch from the job id (MASTER_PORT unset)")
    try:
        port = port_number(text)
    except DetectError as exc:
        return Check("port", "fail", exc.message, "unset MASTER_PORT, or set it to a free port")
    if addr not in ("127.0.0.1", "localhost") and host_index([addr], host) is None:
        return Check("port", "ok", f"MASTER_PORT={port} (checked only on {addr})")
    busy = [p for p in (port, port_beside(port)) if probes.port_busy(addr, p)]
    if busy:
        return Check("port", "fail", f"port {busy[0]} on {addr} is in use", "set MASTER_PORT to a free port")
    return Check("port", "ok", f"{port} and {port_beside(port)} are free on {addr}")


def check_staged(rec: JobRecord, host: str) -> Check:
    """Whether this host's staged copy (`jobenv stage`) still matches the environment."""
    from jobenv.stage import check

    status, detail = check(rec, host)
    if status in ("ok", "none"):
        return Check("staged", "ok", detail)
    return Check("staged", "warn", detail, "run `jobenv stage` (launch uses the shared environment meanwhile)"
                 if status in ("missing", "unsafe") else "run `jobenv stage` to copy the changed environment")


def _recorded_launcher(rec: JobRecord, env: Mapping[str, str]) -> Optional[str]:
    """The launcher `jobenv launch` would run: the recorded absolute path, else PATH's."""
    from jobenv.launch.plan.launcher import launcher_path

    if not rec.launch:
        return None
    prog, _ = launcher_path(rec, rec.launch[0])
    return prog if os.path.isabs(prog) and os.access(prog, os.X_OK) else probes.which(rec.launch[0], env.get("PATH", ""))


def _torch_backends(rec: JobRecord, env: Mapping[str, str]) -> Tuple[str, ...]:
    """The torch backends the job's profile configures (its `fabric:`): doctor asks for torch there only."""
    from jobenv.profiles import load as profiles

    prof = profiles.load_all(env).get(rec.machine)
    return tuple(sorted(prof.fabric)) if prof is not None else ()


def collect(env: Mapping[str, str], job: Optional[str], deep: bool, timeout: float,
            container: Optional[Tuple[str, Optional[str]]] = None) -> List[Check]:
    """Every check, in a fixed order; slow probes run concurrently.  `container`: (IMAGE, runtime
    or None) of `doctor --container` (jobenv.doctor.container)."""
    from jobenv import schedulers
    from jobenv.core.errors import JobenvError
    from jobenv.store.lookup import which_job
    from jobenv.store.liveness import job_state
    from jobenv.core.hostlist import host_index, this_host

    checks: List[Check] = []
    live = schedulers.env_jobid(env)
    checks.append(Check("scheduler", "ok", f"{live[0]} job {live[1]} in this shell" if live
                        else "no scheduler variables in this shell (a saved or local job is used)"))
    checks += check_store(env)
    pyenv = dict(env)
    started = probes.start_imports(pyenv, timeout, heavy=deep)  # torch, mpi4py, ... import while the rest runs
    try:
        path, rec = which_job(env, job, lambda msg: None)
    except JobenvError as exc:
        checks.append(Check("record", "fail", exc.message.split("; ")[0], "run `jobenv save` inside your allocation"))
        rec = None
    if rec is not None:
        state, why = job_state(rec, env)
        checks.append(Check("record", {"live": "ok", "unknown": "warn"}.get(state, "fail"),
                            f"job {rec.jobid} ({rec.scheduler}, {plural(rec.nhosts, 'host')}) is {state}: {why}",
                            "" if state == "live" else "`jobenv save` in a live allocation, or `jobenv watch` there "
                            "so that liveness is known"))
        host = this_host(env)
        inside = host_index(rec.hosts, host) is not None
        checks.append(Check("host", "ok" if inside else "fail",
                            f"{host} is {'' if inside else 'not '}a host of job {rec.jobid}",
                            "" if inside else f"ssh to one of {', '.join(rec.hosts[:3])}..., or pass --job"))
        checks.append(check_staged(rec, host))
        flavor, row = None, None
        exe = _recorded_launcher(rec, env)
        if exe is None:
            checks.append(Check("launcher", "fail", f"{rec.launch[0] if rec.launch else '(none)'} is not on PATH",
                                "load the MPI module or activate the environment that provides it"))
        else:
            banner = probes.launcher_banner(exe, env)
            row = launcher_family(exe, banner)
            checks.append(check_launcher_fit(rec, env, exe, row) or judge_launcher(exe, banner))
            flavor = row.flavor if row is not None else None
        from jobenv.launch.plan.mpibuilds import current_builds

        built = current_builds(sys.executable, env) if flavor else {}  # launch's probe, remembered
        checks += judge_imports(probes.finish_imports(started), flavor, rec.gpus_per_host, own_launcher(env),
                                _torch_backends(rec, env), built)
        seen, where = probes.gpus_here(env)
        checks.append(judge_gpus(rec.gpus_per_host, seen, where))
        checks += check_rendezvous(rec, env, host, probes.resolve)
        if container:
            checks += _container(container, env, rec, row)
        if deep:
            from jobenv.core.output import progress

            with progress(f"--deep: a two-rank all-reduce through `jobenv launch` (up to {timeout * 4:g} s)"):
                checks += check_deep(rec.jobid, env, timeout * 4)
    else:
        checks += judge_imports(probes.finish_imports(started), None, 0)
        if container:
            checks += _container(container, env, None, None)
    checks += check_pythonpath(env)
    checks.append(check_shell(env))
    return checks


def _container(container: Tuple[str, Optional[str]], env: Mapping[str, str], rec: Optional[JobRecord],
               row: Any) -> List[Check]:
    """`--container`'s checks, with the profile's runtimes and GPU vendor and the launcher's MPI."""
    from jobenv.doctor import container as box
    from jobenv.profiles import load as profiles

    prof = profiles.load_all(env).get(rec.machine) if rec is not None else None
    site = getattr(prof, "container", None) or {}
    return box.check(container[0], container[1], env, site.get("runtimes", ()), site.get("gpu", ""),
                     getattr(row, "mpi", None), getattr(row, "flavor", "") or "none found")


def render_text(checks: List[Check]) -> str:
    """One line per check; details quote banners and library strings (Open MPI's ends in a NUL),
    so every field is written through errors.one_line: no control byte reaches the terminal."""
    from jobenv.core.errors import one_line

    width = max(len(c.name) for c in checks)
    lines = [f"{c.status:<4}  {one_line(c.name):<{width}}  {one_line(c.detail)}"
             + (f" -> fix: {one_line(c.fix)}" if c.fix and c.status != "ok" else "") for c in checks]
    fails = sum(c.status == "fail" for c in checks)
    warns = sum(c.status == "warn" for c in checks)
    lines.append(f"{plural(len(checks), 'check')}: {fails} failed, {plural(warns, 'warning')}")
    return "\n".join(lines) + "\n"


def render_json(checks: List[Check]) -> str:
    data: Dict[str, object] = {"ok": not any(c.status == "fail" for c in checks),
                               "checks": [c._asdict() for c in checks]}
    return json.dumps(data, indent=2) + "\n"
