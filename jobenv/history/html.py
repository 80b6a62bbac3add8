"""`jobenv report --html`: one self-contained page (inline CSS and SVG, no script, nothing
fetched) with each run's per-rank start-up timeline and start-up time against world size.

Up to HEAT_AT ranks a run is drawn as bars (one row per rank, one colour per phase, grouped
by host); from HEAT_AT on as a heat map (a row per host, a cell per rank, colour = the
rank's start-up time), which stays readable and small at 1,000+ ranks.  The slowest rank
is outlined in red either way.  Every string from a run (host names, commands) is hostile
and goes through `esc`, in text and in attributes alike.
"""
from __future__ import annotations

import html
import math
import time
from typing import List, Optional, Sequence, Tuple

from jobenv.core.numparse import plural
from jobenv.history.runs import STARTUP, Run
from jobenv.history.timeline import COLOURS, RESOLUTION, Timeline, per_second, timeline

HEAT_AT = 1000
TIPS_UP_TO = 20_000
ROW_H, LABEL_W, PLOT_W = 14, 220, 640

CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}
td,th{padding:2px 10px;text-align:left;border-bottom:1px solid #eee}svg{display:block;margin:.5em 0 2em}
svg text{font:11px monospace}.slow{fill:none;stroke:#d00;stroke-width:2}code{white-space:pre-wrap}
section.failed,section.interrupted{border-left:6px solid;padding-left:1em}section.failed{border-color:#d00}
section.interrupted{border-color:#e69500}.badge{font-size:70%;padding:1px 8px;border-radius:4px;color:#fff;
margin-left:.5em}.badge.failed{background:#d00}.badge.interrupted{background:#e69500}"""
# a run's outcome (runs.Run.outcome) as a colour: the badge, the section's edge, its dot in the scaling plot
OUTCOME_COLOURS = {"ok": "#3366cc", "failed": "#d00", "interrupted": "#e69500"}


def esc(s: object) -> str:
    return html.escape(str(s), quote=True)


def _axis(x0: float, y: float, seconds: float, scale: float) -> List[str]:
    """Tick marks and labels in seconds along a time axis (`seconds`: 0, or RESOLUTION and up)."""
    step = 10.0 ** math.floor(math.log10(seconds)) if seconds >= RESOLUTION else 1.0
    step *= 2 if seconds / step > 6 else 1
    out = [f'<line x1="{x0}" y1="{y}" x2="{x0 + seconds * scale:.1f}" y2="{y}" stroke="#999"/>']
    for i in range(int(seconds / step * 1.0001) + 1):  # at most 7 ticks
        t = i * step
        x = x0 + t * scale
        out.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="#999"/>'
                   f'<text x="{x:.1f}" y="{y + 15}" text-anchor="middle">{t:g} s</text>')
    return out


def legend(names: Sequence[str], y: float) -> List[str]:
    out = []
    for i, name in enumerate(names):
        x = LABEL_W + i * 130
        out.append(f'<rect x="{x}" y="{y}" width="10" height="10" fill="{COLOURS[name]}"/>'
                   f'<text x="{x + 14}" y="{y + 9}">{esc(name)}</text>')
    return out


def bars(tl: Timeline, longest: Optional[float] = None) -> str:
    """One row per rank, stacked phases; a host's name heads its ranks.  `longest`: the
    seconds the axis spans (one scale shared by several runs), else this run's longest row."""
    slow = tl.slowest
    longest = longest or max((r.total for r in tl.rows), default=0.0)
    scale = per_second(PLOT_W, longest)
    body, y = legend(tl.names, 0), 24
    for host, rows in tl.hosts().items():
        body.append(f'<g class="host"><title>{esc(host)}</title>'
                    f'<text x="0" y="{y + 10}" font-weight="bold">{esc(host)}</text>')
        y += ROW_H
        for r in rows:
            body.append(f'<text x="16" y="{y + 10}">rank {r.rank}</text>')
            x = float(LABEL_W)
            for name, s in r.phases:
                body.append(f'<rect x="{x:.2f}" y="{y + 1}" width="{s * scale:.2f}" height="{ROW_H - 2}" '
                            f'fill="{COLOURS[name]}"><title>rank {r.rank} on {esc(host)}: {esc(name)} '
                            f'{s:.3f} s</title></rect>')
                x += s * scale
            if r is slow:
                body.append(f'<rect class="slow" x="{LABEL_W - 2}" y="{y}" width="{r.total * scale + 4:.2f}" '
                            f'height="{ROW_H}"/><text x="{x + 6:.1f}" y="{y + 10}" fill="#d00">'
                            f'slowest start-up: {r.startup:.3f} s</text>')
            y += ROW_H
        body.append("</g>")
    body += _axis(LABEL_W, y + 4, longest, scale)
    return _svg(LABEL_W + PLOT_W + 200, y + 30, body, "start-up timeline per rank")  # room for the slowest label


def _heat(frac: float) -> str:
    """Light yellow (fast) to dark red (slow)."""
    f = min(1.0, max(0.0, frac))
    return f"rgb({255 - int(80 * f)},{int(240 - 200 * f)},{int(160 - 140 * f)})"


def heatmap(tl: Timeline, span: Optional[Tuple[float, float]] = None) -> str:
    """A row per host, a cell per rank on it, coloured by the rank's start-up time (from
    `span`'s low to high seconds when given: one colour scale shared by several runs)."""
    hosts = tl.hosts()
    slow = tl.slowest
    lo, hi = span or (min((r.startup for r in tl.rows), default=0.0), max((r.startup for r in tl.rows), default=0.0))
    per = max(len(rows) for rows in hosts.values())
    cell = max(2, min(14, PLOT_W // per))
    rh = max(3, min(14, 6000 // max(1, len(hosts))))
    tips = len(tl.rows) <= TIPS_UP_TO  # a tooltip per cell; beyond, per host only (the page stays small)
    body, y = [], 24
    body.append(f'<text x="0" y="12">start-up time per rank: {lo:.3f} s</text>'
                f'<rect x="230" y="3" width="60" height="10" fill="{_heat(0)}"/>'
                f'<rect x="290" y="3" width="60" height="10" fill="{_heat(1)}"/><text x="356" y="12">{hi:.3f} s</text>')
    for host, rows in hosts.items():
        body.append(f'<g class="host"><title>{esc(host)}</title>')
        if rh >= 10:
            body.append(f'<text x="0" y="{y + rh - 3}">{esc(host)}</text>')
        for i, r in enumerate(rows):
            frac = (r.startup - lo) / (hi - lo) if hi - lo >= RESOLUTION else 0.0
            tip = f"<title>rank {r.rank}: {r.startup:.3f} s</title>" if tips else ""
            body.append(f'<rect x="{LABEL_W + i * cell}" y="{y}" width="{cell}" height="{rh}" '
                        f'fill="{_heat(frac)}">{tip}</rect>')
            if r is slow:
                body.append(f'<rect class="slow" x="{LABEL_W + i * cell - 1}" y="{y - 1}" width="{cell + 2}" '
                            f'height="{rh + 2}"/>')
        body.append("</g>")
        y += rh
    return _svg(LABEL_W + per * cell + 20, y + 10, body, "start-up heat map: a row per host, a cell per rank")


def _svg(w: float, h: float, body: List[str], label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" role="img" '
            f'aria-label="{esc(label)}">' + "".join(body) + "</svg>")


def scaling(points: List[Tuple[int, float, str, str]]) -> str:
    """Start-up time (slowest rank) against world size, log-scaled ranks; one dot per run,
    coloured by its outcome."""
    W, H, X0, Y0 = 640, 300, 60, 260
    top = max(max(p[1] for p in points), RESOLUTION)
    big = max(p[0] for p in points)
    xmax = math.log2(max(2, big)) + 0.5

    def px(n: int) -> float:
        return X0 + math.log2(max(1, n)) / xmax * (W - X0 - 20)

    body = [f'<line x1="{X0}" y1="{Y0}" x2="{W - 10}" y2="{Y0}" stroke="#999"/>'
            f'<line x1="{X0}" y1="20" x2="{X0}" y2="{Y0}" stroke="#999"/>'
            f'<text x="{W / 2}" y="{Y0 + 34}" text-anchor="middle">world size (ranks, log scale)</text>'
            f'<text x="4" y="14">start-up of the slowest rank (s)</text>']
    for frac in (0.0, 0.5, 1.0):
        y = Y0 - frac * (Y0 - 30)
        body.append(f'<line x1="{X0 - 4}" y1="{y:.1f}" x2="{X0}" y2="{y:.1f}" stroke="#999"/>'
                    f'<text x="{X0 - 6}" y="{y + 4:.1f}" text-anchor="end">{top * frac:.2f}</text>')
    n = 1
    while n <= big:
        body.append(f'<text x="{px(n):.1f}" y="{Y0 + 16}" text-anchor="middle">{n}</text>')
        n *= 2 if big <= 64 else 8
    for world, secs, ident, outcome in points:
        body.append(f'<circle cx="{px(world):.1f}" cy="{Y0 - secs / top * (Y0 - 30):.1f}" r="5" '
                    f'fill="{OUTCOME_COLOURS[outcome]}"><title>{esc(ident)}: {plural(world, "rank")}, {secs:.3f} s'
                    f'{"" if outcome == "ok" else ", " + outcome}</title></circle>')
    return _svg(W, H, body, "start-up time against world size")


class Scale:
    """One time scale for every run on the page (`report --same-scale`): the longest row's
    seconds (bars) and the start-up span (heat maps) over all their timelines."""

    def __init__(self, tls: Sequence[Timeline]) -> None:
        rows = [r for t in tls for r in t.rows]
        self.longest = max((r.total for r in rows), default=0.0) or 1.0
        self.span = (min((r.startup for r in rows), default=0.0), max((r.startup for r in rows), default=0.0))


def section(run: Run, tl: Timeline, scale: Optional[Scale] = None) -> str:
    from jobenv.restore.shell import join

    rows = [("job", run.job), ("command", join(run.command)), ("started", time.strftime("%Y-%m-%d %H:%M:%S",
            time.localtime(run.started))), ("hosts", f"{run.nhosts}: {run.hosts}"), ("ranks", run.nranks),
            ("attempt", run.attempt), ("outcome", run.state),
            ("took", "" if run.duration is None else f"{run.duration:.1f} s"),
            ("first failure", run.first_failure or "none"), ("phases from", tl.source)]
    table = "".join(f"<tr><th>{esc(k)}</th><td><code>{esc(v)}</code></td></tr>" for k, v in rows)
    slow = tl.slowest
    if slow is None:
        chart = "<p>No rank left a record.</p>"
    else:
        chart = (f"<p>Slowest start-up: rank {slow.rank} on {esc(slow.host)}, {slow.startup:.3f} s.</p>"
                 + (heatmap(tl, scale.span if scale else None) if len(tl.rows) >= HEAT_AT
                    else bars(tl, scale.longest if scale else None)))
    out = run.outcome
    badge = "" if out == "ok" else f'<span class="badge {out}">{esc(run.state)}</span>'
    return (f'<section class="{out}"><h2>{esc(run.ident)}{badge}</h2><table>{table}</table>{chart}</section>')


def page(runs: Sequence[Run], tls: Optional[Sequence[Timeline]] = None, same_scale: bool = False) -> str:
    """The whole page for `runs` (their timelines are read unless given); `same_scale`: one
    time scale for every run's chart, so that runs compare by eye."""
    tls = list(tls) if tls is not None else [timeline(r) for r in runs]
    reported = any(t.names == STARTUP and t.rows for t in tls)  # then runs with only rank records would mislead
    points = [(max(r.nranks, len(t.rows)), t.slowest.startup, r.ident, r.outcome) for r, t in zip(runs, tls)
              if t.slowest is not None and (t.names == STARTUP or not reported)]
    plot = ("<section><h2>Start-up time against world size</h2>" + scaling(points) + "</section>"
            if len(points) >= 2 else "")
    shared = Scale(tls) if same_scale else None
    body = "".join(section(r, t, shared) for r, t in zip(runs, tls))
    bad = [f"{n} {o}" for o in ("failed", "interrupted") if (n := sum(r.outcome == o for r in runs))]
    title = plural(len(runs), "run") + (f" ({', '.join(bad)})" if bad else "") + (", one time scale" if shared else "")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>jobenv report</title>'
            f'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'">'
            f"<style>{CSS}</style></head><body><h1>jobenv report: {esc(title)}</h1>{plot}{body}</body></html>\n")
