"""Real keys, a real ssh-agent and signed runs of `sleuth ask`, for the audit-trail tests.

key = make_key(tmp_path, "ed25519")                  # ssh-keygen, no passphrase
allowed = allow(tmp_path, [("alice@example.com", key)])
with agent_holding(tmp_path, key) as sock: ...       # ssh-agent -D -a SOCK, ssh-add
path = signed_run(project, key)                      # the playbook on the demo deployment
rechain(path, edit)                                  # rewrite, every hash recomputed
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sleuth.cli import app
from sleuth.demo_deployment import build_demo
from sleuth.transcripts.store import event_hash

QUESTION = "Does DeepSeek-V3-demo-FP8 still carry its MTP heads?"
runner = CliRunner()


def need(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        pytest.skip(f"{tool} is not installed (apt-get install openssh-client)")
    return found


@dataclass(frozen=True)
class Key:
    private: Path

    @property
    def public(self) -> Path:
        return self.private.with_name(self.private.name + ".pub")

    def public_line(self) -> str:
        """`ssh-ed25519 AAAA...` without the comment."""
        return " ".join(self.public.read_text().split()[:2])

    def fingerprint(self) -> str:
        out = subprocess.run(
            [need("ssh-keygen"), "-l", "-E", "sha256", "-f", str(self.public)],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.split()[1]


def make_key(folder: Path, kind: str, name: str = "") -> Key:
    path = folder / (name or f"id_{kind}")
    bits = ["-b", "3072"] if kind == "rsa" else []
    subprocess.run(
        [need("ssh-keygen"), "-q", "-t", kind, *bits, "-N", "", "-C", name or kind, "-f", path],
        check=True,
    )
    return Key(path)


def allow(folder: Path, signers: list[tuple[str, Key]], options: str = "") -> Path:
    path = folder / "allowed_signers"
    lines = [f"{who} {options} {key.public_line()}".replace("  ", " ") for who, key in signers]
    path.write_text("\n".join(lines) + "\n")
    return path


@contextmanager
def agent_holding(folder: Path, *keys: Key) -> Iterator[str]:
    """A real ssh-agent on its own socket, holding `keys`; SSH_AUTH_SOCK points at it."""
    sock = folder / "agent.sock"
    proc = subprocess.Popen(
        [need("ssh-agent"), "-D", "-a", str(sock)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        for key in keys:
            subprocess.run([need("ssh-add"), "-q", str(key.private)], env=env, check=True)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SSH_AUTH_SOCK", str(sock))
            yield str(sock)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def demo_project(
    folder: Path, key: Key | None = None, extra: str = "", allowed: Path | None = None
) -> Path:
    """A folder with the demo deployment and a sleuth.toml whose [sign] key is `key` (and
    allowed_signers `allowed`, when given)."""
    folder.mkdir(parents=True, exist_ok=True)
    build_demo(folder / "demo")
    sign = f'key = "{key.private}"\n' if key else ""
    sign += f'allowed_signers = "{allowed}"\n' if allowed else ""
    sign = f"[sign]\n{sign}" if sign else ""
    (folder / "sleuth.toml").write_text(
        f'[hosts.local]\nroots = ["{folder / "demo"}"]\n{sign}{extra}'
    )
    return folder


def sleuth(project: Path, *args: str) -> Result:
    return runner.invoke(app, [*args, "--config", str(project / "sleuth.toml")])


def ask(project: Path, *flags: str) -> tuple[Result, Path]:
    """`sleuth ask` with the offline playbook; the result and the transcript it wrote."""
    out = project / "transcripts"
    before = set(out.glob("*.jsonl"))
    result = sleuth(project, "ask", QUESTION, "--transcripts", str(out), *flags)
    assert result.exit_code == 0, result.output
    (path,) = set(out.glob("*.jsonl")) - before
    return result, path


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def write_events(path: Path, raws: list[dict[str, Any]], rechain: bool = True) -> None:
    """Write `raws` back as a transcript; with `rechain`, every seq, prev and hash is
    recomputed as a forger would, so the chain itself holds."""
    prev = ""
    lines = []
    for seq, raw in enumerate(raws):
        if rechain:
            raw = {**raw, "seq": seq, "prev": prev}
            raw["hash"] = event_hash(raw)
            prev = raw["hash"]
        lines.append(json.dumps(raw, separators=(",", ":"), ensure_ascii=False) + "\n")
    path.write_text("".join(lines), encoding="utf-8")


def rewrite(path: Path, edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    write_events(path, edit(events(path)))
