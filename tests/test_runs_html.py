"""`jobenv report --html` rendered by a real headless browser (Debian's chromium): the SVG
names every host, hostile strings stay text, a 1,000-rank run is a heat map made quickly."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Dict

import pytest

from conftest import need
from test_runs import HOSTILE, history, jobenv, launched_job, runs_json  # noqa: F401  (the module fixture)

pytestmark = pytest.mark.e2e
EVIL_HOST = '<img src=x onerror="document.title=1">'


def chromium(*args: str) -> subprocess.CompletedProcess:
    exe = need("chromium")
    return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", *args],
                          capture_output=True, text=True, timeout=120)


def dom(page: Path) -> str:
    """The document as chromium built it (scripts, had any run, would have changed it)."""
    p = chromium("--dump-dom", page.as_uri())
    assert p.returncode == 0 and "<svg" in p.stdout, p.stderr[-2000:]
    return p.stdout


def svgs(html: str) -> str:
    return "".join(part.split("</svg>")[0] for part in html.split("<svg")[1:])


def synthetic(env: Dict[str, str], hosts: int, per_host: int, host_name=lambda h: f"nid{h:05d}") -> str:
    """A real launch's run directory given the phases of a bigger job (as the selftest writes them)."""
    assert jobenv(env, "launch", "--", "true").returncode == 0
    run = runs_json(env)[0]
    rows = [{"rank": h * per_host + i, "host": host_name(h),
             "phases": {"launch": 0.1, "interpreter": 0.05, "imports": 1.0 + (h * per_host + i) % 97 / 100,
                        "rendezvous": 0.5, "first_collective": 0.01, "first_step": 0.02}}
            for h in range(hosts) for i in range(per_host)]
    rows[-3]["phases"]["rendezvous"] = 9.0  # the one slow rank
    Path(run["path"], "phases.json").write_text(json.dumps({"version": 1, "ranks": rows}))
    return run["run"]


def test_report_of_real_runs_in_chromium(history, tmp_path):  # noqa: F811
    """Every run of the real history: the selftests' bars name the host; the hostile
    command is text, no element; start-up against world size is drawn."""
    out = tmp_path / "report.html"
    p = jobenv(history, "report", "all", "--html", str(out))
    assert p.returncode == 0 and p.stdout == f"wrote {out} (4 runs)\n", p.stderr
    built = dom(out)
    host = runs_json(history)[0]["hosts"]
    pics = svgs(built)
    assert f">{host}</text>" in pics and "slowest start-up" in pics
    # the two selftest runs (1 and 2 ranks): the others reported no phases
    assert "Start-up time against world size" in built and built.count("<circle") == 2
    assert ": 1 rank, " in pics and ": 2 ranks, " in pics and " 1 ranks" not in pics
    assert "<script" not in built and "&lt;script&gt;alert(1)&lt;/script&gt;" in built
    for phase in ("imports", "rendezvous", "first_collective", "first_step"):
        assert f">{phase}</text>" in pics
    shot = tmp_path / "shot.png"
    chromium(f"--screenshot={shot}", "--window-size=1000,900", out.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_every_host_is_named_and_hostile_hosts_stay_text(tmp_path):
    env = launched_job(tmp_path)
    run = synthetic(env, 6, 4, lambda h: EVIL_HOST if h == 5 else f"gpu{h}")
    out = tmp_path / "r.html"
    assert jobenv(env, "report", run, "--html", str(out)).returncode == 0
    built = dom(out)
    pics = svgs(built)
    for h in [f"gpu{i}" for i in range(5)]:
        assert f">{h}</text>" in pics
    assert "&lt;img src=x onerror=\"document.title=1\"&gt;</text>" in pics and "<img" not in built
    assert "<title>jobenv report</title>" in built  # the onerror never ran
    assert 'class="slow"' in pics and "rank 21 on " in built  # rows[-3]: the slowest, outlined


def test_a_thousand_ranks_are_a_heat_map_made_quickly(tmp_path, monkeypatch):
    from jobenv.history import runs
    from jobenv.history import html as runs_html

    env = launched_job(tmp_path)
    run = synthetic(env, 125, 8)
    monkeypatch.setenv("JOBENV_HOME", env["JOBENV_HOME"])
    t = time.perf_counter()
    html = runs_html.page([runs.find(run)])
    took = time.perf_counter() - t
    assert took < 1.0, took
    assert "heat map" in html and html.count("<rect") >= 1000 and len(html) < 400_000
    out = tmp_path / "big.html"
    out.write_text(html)
    built = dom(out)
    pics = svgs(built)
    assert all(f"<title>nid{h:05d}</title>" in pics for h in range(125))
    assert "Slowest start-up: rank 997 on nid00124" in built


def test_failed_and_interrupted_runs_are_marked_and_can_share_one_time_scale(tmp_path):
    """Real launches: one that passes, one whose ranks fail, one --timeout stops: the page marks
    the two (badge, coloured edge, title count); --same-scale gives every timeline one axis."""
    import re

    env = launched_job(tmp_path)
    assert jobenv(env, "launch", "--", "true").returncode == 0
    assert jobenv(env, "launch", "--", "sh", "-c", "sleep 0.5; exit 3").returncode == 3
    assert jobenv(env, "launch", "--timeout", "2", "--", "sleep", "30").returncode == 124
    out = tmp_path / "r.html"
    p = jobenv(env, "report", "all", "--html", str(out))
    assert p.returncode == 0 and p.stdout == f"wrote {out} (3 runs)\n", p.stdout + p.stderr
    built = dom(out)
    assert "jobenv report: 3 runs (1 failed, 1 interrupted)</h1>" in built, built[:2000]
    sections = re.findall(r'<section class="(\w+)"><h2>[^<]*(?:<span class="badge \w+">([^<]*)</span>)?</h2>', built)
    assert sorted(sections) == [("failed", "failed: exit 3"), ("interrupted", "interrupted: timeout"), ("ok", "")], \
        sections

    def axes(html: str) -> list:  # each timeline's last tick label (its axis' end)
        return [re.findall(r">([0-9.e+-]+) s</text>", pic)[-1] for pic in html.split("<svg")[1:]
                if "start-up timeline per rank" in pic.split(">")[0]]

    assert len(set(axes(built))) > 1  # each run its own scale by default
    p = jobenv(env, "report", "all", "--same-scale", "--html", str(out))
    assert p.returncode == 0, p.stderr
    shared = dom(out)
    assert len(axes(shared)) == 3 and len(set(axes(shared))) == 1, axes(shared)
    assert "one time scale" in shared
