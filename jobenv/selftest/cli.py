"""The selftest's command line and its one-rank flow: detect, check in, run, report."""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable, List, Optional, TypeVar

from jobenv.core.errors import BadInput
from jobenv.core.numparse import parse_seconds, parse_uint
from jobenv.history.write import write_phases
from ..runtime import DetectError, detect
from ..runtime.checkin import CheckinError
from .codes import EXIT_FAILED, EXIT_OK, EXIT_SETUP, EXIT_TIMEOUT, T_INTERP
from .barrier import Link, process_start_time
from .checks import run_rank
from .report import add_fabric, print_report, summarize

T = TypeVar("T")


def _number(parse: Callable[..., T], **kw: Any) -> Callable[[str], T]:
    """An argparse type from jobenv.core.numparse's parsers (their rules, argparse's error message)."""
    def convert(text: str) -> T:
        try:
            return parse(text, "the value", **kw)
        except BadInput as exc:
            raise argparse.ArgumentTypeError(exc.message) from None
    return convert


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m jobenv.selftest", description=(
        "`launch python3 -m jobenv.selftest`: prove the allocation works before spending it."))
    p.add_argument("--framework", choices=["torch", "tensorflow", "mpi"],
                   help="default: torch when installed, else mpi (mpi4py)")
    p.add_argument("--backend", choices=["ddp", "horovod", "deepspeed", "nccl", "xccl", "gloo", "multiworker"],
                   help="torch: ddp (process group from the device: nccl/xccl/gloo), nccl, xccl, gloo, horovod, "
                        "deepspeed; tensorflow: multiworker or horovod")
    p.add_argument("--steps", type=_number(parse_uint, minimum=1, maximum=1_000_000), default=5, help="training steps (default 5)")
    p.add_argument("--timeout", type=_number(parse_seconds, above=True), default=300.0,
                   help="seconds from process start until the run is ended as hung (default 300)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of tables (rank 0)")
    p.add_argument("--json-file", metavar="FILE", help="also write the report as JSON to FILE (rank 0)")
    p.add_argument("--bandwidth", action="store_true",
                   help="also measure all-reduce bus bandwidth within and between hosts, name the transport each "
                        "backend chose, and judge it against the machine profile's fabric: section")
    p.add_argument("--profile", metavar="NAME", help="the machine profile to judge the fabric by (default: the "
                                                      "job record's machine)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only failures and the summary line")
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    t_start = process_start_time()
    deadline = (t_start or T_INTERP) + args.timeout
    from jobenv.core.hostlist import this_host

    host = this_host()
    try:
        info = detect()
        if info.master_addr is None:
            from ..runtime.info import NO_ADDR

            raise DetectError(NO_ADDR)
    except DetectError as exc:
        sys.stderr.write(f"jobenv.selftest: error: {exc}\n")
        return EXIT_SETUP
    t = time.time()
    try:
        link = Link(info, host, deadline)
    except CheckinError as exc:
        sys.stderr.write(f"jobenv.selftest: TIMEOUT: {exc}\n")
        return EXIT_TIMEOUT
    t_checkin = time.time() - t
    try:
        result = run_rank(args, info, host, t_start, deadline, link, t_checkin)
    except (DetectError, ImportError, CheckinError) as exc:
        sys.stderr.write(f"jobenv.selftest: error on rank {info.rank} ({host}): {exc}\n")
        return EXIT_SETUP
    except Exception as exc:  # a collective failed (a peer died, a backend error): say where
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        sys.stderr.write(f"jobenv.selftest: FAILED on rank {info.rank} ({host}): {type(exc).__name__}: {msg}\n")
        return EXIT_FAILED
    own_ok = all(result["checks"].values())
    if link.client:
        link.client.send_result(result)
        link.client.close()
        return EXIT_OK if own_ok else EXIT_FAILED
    results = {0: result}
    if link.server:
        link.server.add_result(result)
        results = link.server.wait_results(min(deadline, time.time() + 30))
        link.server.close()
    rep = summarize(results, info)
    if args.bandwidth:
        add_fabric(rep, args.profile)
    write_phases(rep["ranks"])  # under `jobenv launch`: every rank's phases for `jobenv runs`/`report`
    unwritten = ""
    if args.json_file:  # the user's file: replaced whole, or a FIFO or device written in place
        from jobenv.core.atomic import write_output

        try:
            write_output(args.json_file, (json.dumps(rep, indent=2) + "\n").encode())
        except (OSError, BadInput) as exc:
            unwritten = f"jobenv.selftest: error: cannot write --json-file {args.json_file}: {exc}\n"
    if args.json:
        print(json.dumps(rep, indent=2), flush=True)
    else:
        print_report(rep, args.quiet)
    if unwritten:
        sys.stderr.write(unwritten)
        return EXIT_SETUP
    return EXIT_OK if rep["ok"] else EXIT_FAILED


