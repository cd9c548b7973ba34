"""A fleet command's start (issue 44): `sleuth tool read_json --hosts GROUP`, a fresh process,
opens its hosts at once and starts one process on each, Sleuth's program.

Every process started over SSH runs the login shell's start-up files first (root's ~/.bashrc
here runs `pyenv init`: about half a second of CPU), so the processes a host starts while it
opens are what a fleet's start costs, host by host. Here the remote login shell's ~/.bashrc
(bash reads it for every command sshd runs) writes a line per session (when it began, its
client port: one connection per host, and the command) and holds the session's start for
HOLD_S, as a slow ~/.bashrc does; then another line when it goes on. The count and the times
are the shells' own.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sshd import SSHServer, missing_reason

HOSTS = 8
HOLD_S = 3.0
LOGGER = """\
if [ "$SHLVL" = 1 ]; then
  port=${{SSH_CONNECTION#* }}; port=${{port%% *}}
  printf 'start %s %s %s\\n' "$EPOCHREALTIME" "$port" "$BASH_EXECUTION_STRING" >> {log}
  sleep {hold}
  printf 'end %s %s\\n' "$EPOCHREALTIME" "$port" >> {log}
fi
"""


@pytest.fixture
def logged_sshd(tmp_path: Path) -> Iterator[tuple[SSHServer, Path]]:
    if reason := missing_reason():
        pytest.skip(reason)
    if not pwd.getpwuid(os.getuid()).pw_shell.endswith("/bash"):
        pytest.skip("the login shell is not bash: its ~/.bashrc cannot log the sessions")
    log = tmp_path / "shells.log"
    server = SSHServer.create(tmp_path / "sshd")  # the remote HOME is the server's own
    (server.home / ".bashrc").write_text(LOGGER.format(log=log, hold=HOLD_S))
    yield server, log
    server.stop()


def _fleet(work: Path, server: SSHServer) -> Path:
    """HOSTS aliases of the one sshd in ~/.ssh/config and a group over them in sleuth.toml."""
    ssh = work / "home" / ".ssh"
    ssh.mkdir(parents=True, mode=0o700)
    (ssh / "known_hosts").write_text(server.known_hosts_path.read_text())
    names = " ".join(f"h{i}" for i in range(1, HOSTS + 1))
    (ssh / "config").write_text(
        f"Host {names}\n    HostName {server.host}\n    Port {server.port}\n"
        f"    User {server.user}\n    IdentityFile {server.client_key_path}\n"
        "    IdentitiesOnly yes\n"
    )
    root = work / "root"
    (root / "models").mkdir(parents=True)
    (root / "models" / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}\n')
    (work / "sleuth.toml").write_text(
        f'known_hosts = "{work}/known_hosts"\n\n[groups.bench]\nhosts = ["h*"]\n'
        f'roots = ["{root}"]\n'
    )
    return root


def test_a_fleet_command_opens_its_hosts_at_once_with_one_process_each(
    logged_sshd: tuple[SSHServer, Path], tmp_path: Path
) -> None:
    server, log = logged_sshd
    work = tmp_path / "work"
    root = _fleet(work, server)
    command = [sys.executable, "-m", "sleuth.cli", "tool", "read_json", "--hosts", "bench"]
    ran = subprocess.run(
        [*command, "path=models/config.json", "--json", "--transcripts", str(work / "t")],
        cwd=work,
        env={**os.environ, "HOME": str(work / "home")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert f"{HOSTS} answered in 1 kind of output" in result["output"]

    started: dict[str, list[str]] = defaultdict(list)
    times: dict[str, list[float]] = defaultdict(list)
    for line in log.read_text().splitlines():
        what, at, port, *rest = line.split(" ", 3)
        times[port].append(float(at))
        if what == "start":
            started[port].append(rest[0] if rest else "")
    # One connection per host, and on each one process only: Sleuth's program, which the
    # read_json call then used. A `true` timed and an SFTP session opened at the start would
    # each have been one more login shell on every host.
    assert len(started) == HOSTS
    for commands in started.values():
        assert len(commands) == 1, commands
        assert " -I -S -c " in commands[0] and commands[0].endswith(" serve")
    # At once: every host's shell had begun before the first one was done starting (each is
    # held HOLD_S), so no host waited for another to open.
    assert max(t[0] for t in times.values()) < min(t[1] for t in times.values())

    (transcript,) = (work / "t").rglob("*.jsonl")
    header = json.loads(transcript.read_text().splitlines()[0])
    assert len(header["hosts"]) == HOSTS + 1  # and `local`
    for host in header["hosts"]:
        if host["name"] != "local":  # the roots as the program resolved them
            assert host["call_mode"] == "resident" and host["real_roots"] == [str(root)]
