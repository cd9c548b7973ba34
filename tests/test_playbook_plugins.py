"""Question families from other packages: registered through the `sleuth.playbooks` entry-point
group of an installed distribution (a real dist-info on sys.path), routed like the built-ins,
and a broken one named without breaking the rest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sleuth.transcripts.events import ModelTurn
from sleuth.transcripts.store import load

PLUGIN = """
from sleuth.agent.playbook.plan import Call, Family, Plan, Question, Report, summary_text


def plan(q: Question) -> Plan:
    (result,) = yield [Call("read_lines", {"host": q.host, "path": "forecast.txt"})]
    report = Report("The forecast says rain.", "yes", 0.9, [(result, result.line("rain"))])
    yield [report]
    return summary_text([report])


FAMILY = Family(name="weather", help="weather: what forecast.txt says", plan=plan,
                words=("forecast",))
TAKEN = Family(name="mtp", help="a second mtp family", plan=plan, words=("forecast",), rank=1)
"""


def install(site: Path, name: str, entry_points: str) -> None:
    """A distribution as pip leaves it: its metadata and entry points in a dist-info folder."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[sleuth.playbooks]\n{entry_points}")


def ask(cwd: Path, site: Path, question: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("API_KEY", "BASE_URL"))}
    done = subprocess.run(
        [sys.executable, "-m", "sleuth.cli", "ask", question, "--json"],
        cwd=cwd,
        env={**env, "HOME": str(cwd), "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 3), done.stderr  # 3: a question no family takes
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def deployment(tmp_path: Path) -> tuple[Path, Path]:
    site, work = tmp_path / "site", tmp_path / "work"
    site.mkdir()
    work.mkdir()
    (site / "sleuth_weather.py").write_text(PLUGIN)
    (work / "forecast.txt").write_text("Monday: sun, 18 C\nTuesday: rain, 12 C\n")
    return site, work


def test_a_family_from_an_entry_point_answers_its_questions(tmp_path: Path) -> None:
    site, work = deployment(tmp_path)
    install(site, "sleuth_weather", "weather = sleuth_weather:FAMILY\n")
    out = ask(work, site, "What does the forecast say for Tuesday?")
    assert out["brain"] == "playbook" and out["status"] == "answered"
    (finding,) = out["findings"]
    assert finding["claim"] == "The forecast says rain." and finding["grounded"]
    assert [e["quote"] for e in finding["evidence"]] == ["2\tTuesday: rain, 12 C"]
    # The built-in families still route as before, and the list of families names the plugin.
    listed = ask(work, site, "Is the moon made of cheese?")["answer"]
    assert "- MTP heads:" in listed and listed.rstrip().endswith(
        "for an OpenAI-compatible endpoint."
    )
    assert "- weather: what forecast.txt says" in listed


def test_a_broken_plugin_is_named_and_the_other_families_still_work(tmp_path: Path) -> None:
    site, work = deployment(tmp_path)
    install(
        site,
        "sleuth_broken",
        "missing = no_such_module:FAMILY\n"
        "not_a_family = sleuth_weather:plan\n"
        "taken = sleuth_weather:TAKEN\n"
        "weather = sleuth_weather:FAMILY\n",
    )
    out = ask(work, site, "What does the forecast say for Tuesday?")
    assert out["status"] == "answered" and out["findings"][0]["grounded"]
    turns = [e for e in load(work / out["transcript"]).events if isinstance(e, ModelTurn)]
    said = [b.text or "" for b in turns[0].response.content if b.type == "text"]
    assert any("'missing'" in s and "ModuleNotFoundError" in s for s in said), said
    assert any("'not_a_family'" in s and "not a playbook Family" in s for s in said), said
    assert any("'taken'" in s and "'mtp' already exists" in s for s in said), said
    listed = ask(work, site, "Is the moon made of cheese?")["answer"]
    assert "- weather: what forecast.txt says" in listed and "'missing'" in listed
    assert "a second mtp family" not in listed
