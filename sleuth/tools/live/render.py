"""engine_status as text: one block per engine, every figure with the series it came from."""

from __future__ import annotations

from sleuth.tools.live.models import EngineReport, EngineStatus, Figure


def figure_line(f: Figure) -> str:
    value = "n/a" if f.value is None else f"{f.value:.4g}"
    return f"{f.name}: {value} {f.unit} [{', '.join(f.series)}] {f.how}".replace("  ", " ")


def _head(r: EngineReport) -> str:
    what = r.engine or "unrecognised server"
    version = f" {r.version}" if r.version else ""
    pid = f" (pid {r.pid})" if r.pid else ""
    health = ""
    if r.healthy is not None:
        health = f": {'healthy' if r.healthy else 'NOT healthy'} ({r.health})"
    return f"{what}{version} on {r.host}:{r.port}{pid}{health}"


def _block(r: EngineReport) -> list[str]:
    lines = [_head(r)]
    lines += [f"  problem: {p}" for p in r.problems]
    for model in r.models:
        length = r.max_model_len.get(model)
        lines.append(f"  model: {model}" + (f" (max_model_len {length})" if length else ""))
    if r.argv:
        lines.append("  command: " + " ".join(r.argv))
    for s in r.settings:
        shown = ", ".join(f"{k}={v}" for k, v in s.values.items())
        lines.append(f"  settings from {s.source}: {shown}")
    if r.metrics_note:
        lines.append(f"  {r.metrics_note}")
    if r.now:
        lines.append("  /metrics now (counters are totals since launch):")
        lines += [f"    {figure_line(f)}" for f in r.now]
    if r.window_s is not None:
        lines.append(f"  over the last {r.window_s:.2f} s:")
        lines += [f"    {figure_line(f)}" for f in r.window] or ["    (no known series)"]
    return lines


def render(status: EngineStatus) -> str:
    if not status.engines:
        ports = ", ".join(map(str, status.listening_ports)) or "none"
        return (
            f"No inference engine found on {status.host}: no engine process owns a listening "
            f"port, and ports 8000 and 30000 are not listening. Listening TCP ports: {ports}. "
            "Give port= to read one.\n"
        )
    out: list[str] = []
    for r in status.engines:
        out += _block(r)
    return "\n".join(out) + "\n"
