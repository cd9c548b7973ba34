"""One self-contained HTML page for a benchmark run: tables and plots, no scripts, no fetches.

```python
html = render_html(run, records)   # BenchRun + the run's per-request records
```

Three plots, drawn as inline SVG so the page opens anywhere, offline: latency
percentiles against the load of each phase, throughput against latency across a
sweep, and a timeline of every request (send to last token, first token marked).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from sleuth.tools.bench.models import BenchRun, Dist, PhaseMetrics, RequestRecord
from sleuth.tools.bench.render import load_of, warnings

W, H, PAD = 460, 260, 44
COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f")
FAILED = "#d62728"
"""Red marks failures only; no phase is drawn in it."""
MAX_TIMELINE = 2000
"""Requests drawn in the timeline; a longer run draws its first ones and says so."""

Series = tuple[str, list[tuple[float, float]]]


def _e(text: object) -> str:
    return html.escape(str(text))


def _load(p: PhaseMetrics) -> str:
    return load_of(p) + ("/s" if p.mode == "open" and p.request_rate is not None else "")


def _x_of(p: PhaseMetrics) -> float:
    value = p.concurrency_target if p.mode == "closed" else p.request_rate
    return float(value or 0.0)


def _ticks(lo: float, hi: float) -> list[float]:
    if hi <= lo:
        return [lo]
    step = (hi - lo) / 4
    return [lo + step * i for i in range(5)]


def line_chart(title: str, xlabel: str, ylabel: str, series: Sequence[Series]) -> str:
    """An SVG line chart with axes, ticks and a legend."""
    points = [pt for _, pts in series for pt in pts]
    if not points:
        return f"<p>{_e(title)}: no data</p>"
    xs, ys = [x for x, _ in points], [y for _, y in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = 0.0, max(ys) * 1.1 or 1.0
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1

    def sx(x: float) -> float:
        return PAD + (x - x0) / (x1 - x0) * (W - 2 * PAD)

    def sy(y: float) -> float:
        return H - PAD - (y - y0) / (y1 - y0) * (H - 2 * PAD)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" '
        f'aria-label="{_e(title)}"><title>{_e(title)}</title>',
        f'<text x="{W / 2}" y="16" text-anchor="middle" font-weight="bold">{_e(title)}</text>',
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#444"/>',
        f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" stroke="#444"/>',
        f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle">{_e(xlabel)}</text>',
        f'<text x="12" y="{H / 2}" transform="rotate(-90 12 {H / 2})" '
        f'text-anchor="middle">{_e(ylabel)}</text>',
    ]
    for t in _ticks(x0, x1):
        out.append(
            f'<text x="{sx(t):.1f}" y="{H - PAD + 14}" text-anchor="middle" '
            f'font-size="10">{t:.3g}</text>'
        )
    for t in _ticks(y0, y1):
        out.append(
            f'<text x="{PAD - 4}" y="{sy(t) + 3:.1f}" text-anchor="end" '
            f'font-size="10">{t:.3g}</text>'
        )
    for i, (label, pts) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in sorted(pts))
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        for x, y in pts:
            out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{colour}"/>')
        out.append(
            f'<text x="{W - PAD + 4}" y="{PAD + 14 * i}" fill="{colour}" '
            f'font-size="11">{_e(label)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def timeline(records: Sequence[RequestRecord]) -> str:
    """Each request as a bar from its send to its last token, its first token marked."""
    shown = sorted(records, key=lambda r: r.t_send)[:MAX_TIMELINE]
    if not shown:
        return "<p>timeline: no requests</p>"
    t0 = min(r.t_send for r in shown)
    t1 = max(r.t_done for r in shown)
    span = max(t1 - t0, 1e-9)
    row = max(1.0, min(6.0, 400 / len(shown)))
    height = int(row * len(shown)) + 2 * PAD
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W * 2}" height="{height}" role="img" '
        'aria-label="per-request timeline"><title>per-request timeline</title>',
        f'<text x="{W}" y="16" text-anchor="middle" font-weight="bold">per-request timeline '
        f"({span:.2f} s; bar: send to last token; mark: first token; red: failed)</text>",
    ]
    for i, r in enumerate(shown):
        x = PAD + (r.t_send - t0) / span * (W * 2 - 2 * PAD)
        end = r.t_last_token if r.ok and r.t_last_token is not None else r.t_done
        width = max(1.0, (end - r.t_send) / span * (W * 2 - 2 * PAD))
        y = PAD + i * row
        colour = COLOURS[r.phase % len(COLOURS)] if r.ok else FAILED
        out.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{max(row - 0.5, 0.5)}" '
            f'fill="{colour}"><title>request {r.index}, phase {r.phase}</title></rect>'
        )
        if r.t_first is not None:
            fx = PAD + (r.t_first - t0) / span * (W * 2 - 2 * PAD)
            out.append(
                f'<rect x="{fx:.1f}" y="{y:.1f}" width="1.5" height="{max(row - 0.5, 0.5)}" '
                'fill="#000"/>'
            )
    out.append("</svg>")
    if len(records) > len(shown):
        out.append(f"<p>the first {len(shown)} of {len(records)} requests are drawn</p>")
    return "".join(out)


def _dist_cells(d: Dist, percentiles: Sequence[float]) -> str:
    cells = [d.mean, *(d.at(q) for q in percentiles)]
    return "".join("<td>-</td>" if v is None else f"<td>{v:.1f}</td>" for v in cells)


def _phase_table(run: BenchRun) -> str:
    qs = run.report.percentiles
    heads = ["load", "ok/n", "prompt tok (mean)"]
    metrics = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl_token", "ITL"), ("e2e", "E2E"))
    for _, label in metrics:
        heads += [f"{label} mean"] + [f"{label} p{q:g}" for q in qs]
    heads += ["req/s", "out tok/s", "concurrency"]
    rows = []
    for p in run.report.phases:
        cells = [
            f"<td>{_e(_load(p))}</td>",
            f"<td>{p.completed}/{p.requests}</td>",
            "<td>-</td>"
            if p.prompt_tokens.mean is None
            else f"<td>{p.prompt_tokens.mean:.1f} ({_e(p.prompt_tokens_source)})</td>",
        ]
        cells += [_dist_cells(getattr(p, key), qs) for key, _ in metrics]
        cells += [
            f"<td>{p.request_throughput:.2f}</td>",
            f"<td>{p.output_throughput:.1f}</td>",
            f"<td>{p.concurrency:.2f}</td>",
        ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = "".join(f"<th>{_e(h)}</th>" for h in heads)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def render_html(run: BenchRun, records: Sequence[RequestRecord]) -> str:
    phases = run.report.phases
    header = run.report.header
    qs = run.report.percentiles
    sweep_label = "concurrency" if phases and phases[0].mode == "closed" else "request rate (/s)"
    plots = []
    for key, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E")):
        series: list[Series] = []
        for q in qs:
            pts = [(_x_of(p), v) for p in phases if (v := getattr(p, key).at(q)) is not None]
            series.append((f"p{q:g}", pts))
        plots.append(line_chart(f"{label} percentiles vs load", sweep_label, "ms", series))
    tput = [(p.output_throughput, p.tpot.p50) for p in phases if p.tpot.p50 is not None]
    plots.append(
        line_chart(
            "throughput vs latency across the sweep",
            "output tokens/s",
            "TPOT p50 (ms)",
            [("phases", tput)],
        )
    )
    notes = "".join(f"<li>{_e(w)}</li>" for w in warnings(run.report))
    settings = "".join(
        f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>"
        for k, v in header.items()
        if k not in ("type", "epoch_at_zero", "pid")
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>sleuth bench: {_e(header.get("model", ""))} on {_e(run.host)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }}
th, td {{ border: 1px solid #ccc; padding: 3px 6px; text-align: right; }}
th {{ background: #f3f3f3; }}
.plots svg {{ margin: 0 1em 1em 0; border: 1px solid #eee; }}
.warn {{ color: #8a5300; }}
</style></head><body>
<h1>Benchmark of {_e(header.get("model", "?"))} on {_e(run.host)}</h1>
<p>{len(phases)} phase(s), {sum(p.requests for p in phases)} requests measured; lengths in
{_e(header.get("length_unit", "words"))}; records: <code>{_e(run.jsonl)}</code></p>
<h2>Results</h2>
{_phase_table(run)}
{f'<ul class="warn">{notes}</ul>' if notes else ""}
<h2>Plots</h2>
<div class="plots">{"".join(plots)}</div>
<div class="plots">{timeline(records)}</div>
<h2>Settings</h2>
<table>{settings}</table>
</body></html>
"""
