"""What a new user sees: the demo's suggested commands work exactly as printed, and output
that is not a terminal is never wrapped or cut, ends the live view with a newline, prints
each finding once and counts in the right plural.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.scripted_api import ScriptedAPI, finding, message, text, tool_use

BIN = str(Path(sys.executable).parent)


def run_shell(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


def user_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    # `sleuth` on PATH as after an install; temporary folders under the test's own.
    return {**env, "PATH": f"{BIN}:{env.get('PATH', '')}", "TMPDIR": str(tmp)}


def test_the_demo_suggests_commands_that_work_as_printed_and_says_how_to_remove_it(
    tmp_path: Path,
) -> None:
    # A long working directory: a printed command wrapped at 80 columns would break.
    home = tmp_path / ("a-rather-long-folder-name-for-the-user-" * 3)
    temp = tmp_path / "tmp"
    home.mkdir()
    temp.mkdir()
    # As the README's Run command leaves it: a virtualenv that is not activated.
    path = [d for d in os.environ.get("PATH", "/usr/bin:/bin").split(":") if d != BIN]
    env = {**user_env(temp), "PATH": ":".join(path)}
    demo = run_shell(f"{BIN}/sleuth demo", home, env)
    assert demo.returncode == 0, demo.stderr
    out = demo.stdout
    assert "ok  replay --live" in out and "FAILED" not in out
    commands = re.search(r"Try:\n((?:  .*\n)+)", out)
    assert commands, out
    lines = [line.strip() for line in commands.group(1).splitlines()]
    cd = lines[0]
    assert cd.startswith("cd ")
    folder = Path(shlex.split(cd)[1])
    assert folder.parent == temp and folder.is_dir()
    assert sorted(p.name for p in folder.iterdir()) == ["deployment", "sleuth.toml", "transcripts"]
    assert any("replay" in line and "--live" in line for line in lines)

    # Every suggestion, typed in the user's folder after the printed cd, succeeds.
    for line in lines[1:]:
        done = run_shell(f"{cd}\n{line}", home, env)
        # The demo's transcripts are unsigned (no key here): verify says integrity only, exit 3.
        unsigned = " verify " in line and "INTEGRITY ONLY: not signed" in done.stdout
        assert done.returncode == (3 if unsigned else 0), f"{line}\n{done.stdout}\n{done.stderr}"
        assert line.startswith(f"{BIN}/sleuth ")
        if " replay " in line:
            assert "SAME" in done.stdout, done.stdout
    assert (folder / "demo.html").is_file()

    # Replaying live right away says SAME: nothing the demo recorded is in what it read.
    removal = re.search(r"^Remove the demo with: (rm -rf .+)$", out, re.M)
    assert removal, out
    assert run_shell(removal.group(1), home, env).returncode == 0
    assert not folder.exists() and list(home.iterdir()) == []


def test_piped_ask_is_not_wrapped_prints_each_finding_once_and_counts_right(
    tmp_path: Path,
) -> None:
    deep = tmp_path / ("deep-folder-" * 8) / "with" / ("another-long-part-" * 4)
    deep.mkdir(parents=True)
    (deep / "config.json").write_text('{"num_nextn_predict_layers": 1}\n')
    (tmp_path / "sleuth.toml").write_text(f'[hosts.local]\nroots = ["{tmp_path}"]\n')
    relative = str(deep.relative_to(tmp_path) / "config.json")
    claim = (
        f"The config at {deep}/config.json declares one MTP layer: num_nextn_predict_layers "
        "is 1, so the checkpoint should carry one set of MTP heads."
    )
    script = [
        message(tool_use("toolu_1", "read_json", path=relative)),
        message(finding("toolu_2", claim, [("toolu_1", '"num_nextn_predict_layers": 1')])),
        message(text("One MTP layer is declared.")),
    ]
    env = user_env(tmp_path)
    with ScriptedAPI(script) as api:
        env |= {"ANTHROPIC_API_KEY": "sk-ant-test-0123456789abcdefghij"}
        env |= {"ANTHROPIC_BASE_URL": api.url}
        done = run_shell("sleuth ask 'How many MTP layers?'", tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(claim) == 1  # whole, on one line, once
    assert f"{deep}/config.json" in done.stdout
    assert re.search(r"answered by anthropic: 3 turns, 1 tool call, ", done.stdout), done.stdout
    transcript = re.search(r"Transcript: (\S+\.jsonl)$", done.stdout, re.M)
    assert transcript and (tmp_path / transcript.group(1)).is_file()
    # The live view, drawn once on a stderr that is not a terminal, ends its last line.
    assert done.stderr.endswith("\n")
    assert re.search(r"turn 3 .*retries 0\n", done.stderr), done.stderr


def test_piped_tables_keep_long_paths_whole(tmp_path: Path) -> None:
    root = tmp_path / ("models-on-a-very-long-mount-path-" * 5)
    root.mkdir()
    (tmp_path / "sleuth.toml").write_text(f'[hosts.local]\nroots = ["{root}"]\n')
    done = run_shell("sleuth hosts | cat", tmp_path, user_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert str(root) in done.stdout


def test_piped_show_keeps_each_command_on_one_line(tmp_path: Path) -> None:
    reference = Path(__file__).resolve().parent.parent / "transcripts" / "mtp-heads.jsonl"
    done = run_shell(
        f"sleuth show {shlex.quote(str(reference))} | cat", tmp_path, user_env(tmp_path)
    )
    assert done.returncode == 0, done.stderr
    ran = re.search(r"^grep -r -n .* -e NextN -- \S+/deploy/src\"?$", done.stdout, re.M)
    assert ran, done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) < 1000  # nothing padded wide


def test_help_reads_as_paragraphs_on_an_80_column_terminal(tmp_path: Path) -> None:
    # The source breaks this sentence after "trace at"; rich kept that break, and an 80-column
    # terminal then wrapped "trace at" onto a line of its own.
    env = {**user_env(tmp_path), "COLUMNS": "80"}
    done = run_shell("sleuth bench run --help", tmp_path, env)
    assert done.returncode == 0, done.stderr
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert "trace at" not in lines
    assert any("trace at its own times" in line for line in lines), done.stdout
    # Each example keeps a line of its own.
    done = run_shell("sleuth diagnose --help", tmp_path, env)
    assert "Example: journalctl -u vllm --no-pager -o cat | sleuth diagnose -" in lines_of(done)


def lines_of(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line.strip() for line in done.stdout.splitlines()]
