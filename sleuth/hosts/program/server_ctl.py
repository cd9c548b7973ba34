"""Sleuth's server control program, sent to a host and run as `python3 -c RUNNER COMMAND`.

Its JSON argument and then its source arrive on stdin (sleuth.hosts.program.SECRET_RUNNER),
never on the command line, so a launch's environment (HF_TOKEN, ...) is not visible in `ps`
on the host. It starts an inference server detached in its own process group, watches its
log and health endpoint, and stops it. It prints one JSON object on stdout. It takes no
code and runs no shell strings: the only shell text is the fixed WRAPPER below, to which the
server's argv arrives as positional parameters. Standard library only, Python 3.8+.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

SERVER_ID = re.compile(r"^srv-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$")
# Runs the server and keeps its exit status: "$0" is the status file, "$@" the argv.
WRAPPER = '"$@"; echo $? >"$0"'
SCAN_CHUNK = 4 << 20
TAIL_BYTES = 16 << 10
BODY_CAP = 256 << 10
CMD_BYTES = 4096
# The ended servers `list` shows, newest first; every live one is shown too.
LIST_LIMIT = 50
# Where Sleuth kept records once: a shared folder anyone could plant one in. Never read.
OLD_STATE_DIR = "/tmp/sleuth-servers"
UNSAFE = "unsafe_record"


class Refused(Exception):
    """A request this program declines; `kind` is a launch-failure kind when it is one, or
    UNSAFE for a record folder or record that someone else could have written."""

    def __init__(self, message: str, kind: str = "other") -> None:
        super().__init__(message)
        self.kind = kind


def state_dir() -> str:
    """The login user's own folder of server records, beside Sleuth's ledger:
    $XDG_STATE_HOME/sleuth/servers, else ~/.local/state/sleuth/servers. A state folder, not
    the runtime one: a record must outlive the login that launched a detached server (the
    runtime folder goes when the user's last session ends) and keep its log for a person."""
    base = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "sleuth", "servers")


def untrusted(st: os.stat_result, own: bool) -> str | None:
    """Why a folder or file someone else could change is not to be trusted, or None.
    `own`: it must be the login user's (a record folder, a record); otherwise (a folder above
    them) root's will do, and root's sticky folders (/tmp) too, where no one else can rename
    what is ours: the rule sshd's StrictModes applies to ~/.ssh."""
    uid = os.geteuid()
    if st.st_uid != uid and (own or st.st_uid != 0):
        return f"owned by uid {st.st_uid}, not by the login user (uid {uid})"
    sticky = st.st_uid == 0 and not own and st.st_mode & stat.S_ISVTX
    if st.st_mode & 0o022 and not sticky:
        return f"writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _above(folder: str) -> list[str]:
    """Every folder a lookup of `folder` passes through: its parents as written and as
    resolved (a link in the path is changed by whoever can write the folder holding it)."""
    found: list[str] = []
    for path in (os.path.abspath(folder), os.path.realpath(folder)):
        parent = os.path.dirname(path)
        while parent not in found:
            found.append(parent)
            parent = os.path.dirname(parent)
    return found


def checked_state_dir(create: bool = False) -> str | None:
    """The state folder once it and every folder above it are checked; None when it does not
    exist and `create` is false. Refused (UNSAFE) when someone else could write any of them."""
    folder = state_dir()
    if create:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return None
    why = untrusted(st, own=True) if stat.S_ISDIR(st.st_mode) else "not a folder (a link?)"
    fix = f"remove it, so Sleuth makes it anew, or make it yours alone (chmod 700 {folder})"
    if why is None:
        for parent in _above(folder):
            why = untrusted(os.stat(parent), own=False)
            if why is not None:
                why = f"below {parent}, which is {why}"
                fix = f"chmod go-w {parent}"
                break
    if why is not None:
        raise Refused(
            f"the server record folder {folder} is {why}: someone else could plant records "
            f"there, so Sleuth reads none of it. Fix: {fix}",
            UNSAFE,
        )
    return folder


def server_dir(server_id: str, create: bool = False) -> str:
    if not isinstance(server_id, str) or not SERVER_ID.match(server_id):
        raise Refused(f"server id {server_id!r} is not of the form srv-YYYYMMDD-HHMMSS-xxxxxx")
    folder = checked_state_dir(create)
    if folder is None:
        gone = f"no server {server_id} on this host (no folder {state_dir()})"
        raise Refused(gone + _old(server_id))
    return os.path.join(folder, server_id)


def _old(server_id: str) -> str:
    if not os.path.lexists(os.path.join(OLD_STATE_DIR, server_id)):
        return ""
    return (
        f"; {OLD_STATE_DIR}/{server_id}, where Sleuth once kept records, is not read: anyone "
        "can write that folder. If that server is yours, end it by its pid"
    )


def read_record(server_id: str) -> dict[str, Any]:
    """The record, once its folder and file are the login user's alone. The paths it names
    are its own folder's, whatever it says: a record is never a way to another file."""
    folder = server_dir(server_id)
    path = os.path.join(folder, "record.json")
    try:
        st = os.lstat(folder)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise Refused(f"no server {server_id} on this host (no {path}){_old(server_id)}") from None
    except OSError as exc:  # ELOOP: record.json is a link
        said = f"the record {path} cannot be opened safely ({exc}); it is ignored"
        raise Refused(said, UNSAFE) from None
    with os.fdopen(fd) as fh:
        here = os.fstat(fh.fileno())
        why = untrusted(st, own=True) if stat.S_ISDIR(st.st_mode) else "not a folder"
        where = folder
        if why is None:
            why = untrusted(here, own=True) if stat.S_ISREG(here.st_mode) else "not a file"
            where = path
        if why is not None:
            said = f"{where} is {why}: someone else could have written it, so it is ignored"
            raise Refused(said, UNSAFE)
        try:
            record = json.load(fh)
        except ValueError as exc:
            raise Refused(f"the record {path} is not JSON ({exc}); it is ignored", UNSAFE) from None
    ids = [record.get(k) if isinstance(record, dict) else None for k in ("pid", "pgid")]
    if not all(isinstance(n, int) and n > 1 for n in ids):
        said = f"the record {path} names no server process (pid, pgid); it is ignored"
        raise Refused(said, UNSAFE)
    record.update(
        id=server_id,
        dir=folder,
        log=os.path.join(folder, "server.log"),
        exit_file=os.path.join(folder, "exit_code"),
    )
    return dict(record)


def write_record(record: dict[str, Any]) -> None:
    path = os.path.join(server_dir(record["id"]), "record.json")
    _write_private(path, json.dumps(record))


def _write_private(path: str, text: str) -> None:
    """`text` into `path` by a rename, as a file only the login user can read (0600)."""
    tmp = path + ".tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def proc_state(pid: int) -> str | None:
    """'R', 'S', 'Z'... from /proc, None when gone, '?' without /proc."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return None
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return "?"


def start_ticks(pid: int) -> int | None:
    """When the process started, in clock ticks after boot (/proc/PID/stat field 22); None
    when it is gone or there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def pid_reused(record: dict[str, Any], table: dict[int, dict[str, Any]] | None = None) -> bool:
    """The server's first pid now names another process (its start as `table` has it, or as
    /proc says now). Linux frees a pid number only when no process has it as pid, group or
    session, so the server's group and session were gone before the number came back:
    nothing with that group or session, and nothing below that process, is the server's."""
    pid = record["pid"]
    start = start_ticks(pid) if table is None else table.get(pid, {}).get("start")
    if start is None:
        return False
    if "start_ticks" in record:
        return bool(start != record["start_ticks"])
    # A record written before start_ticks: the process started after the server did.
    with open("/proc/stat") as fh:
        boot = next(int(line.split()[1]) for line in fh if line.startswith("btime "))
    return bool(boot + start / os.sysconf("SC_CLK_TCK") > record["started_at"] + 5)


def process_table() -> dict[int, dict[str, Any]]:
    """Every live (non-zombie) process: ppid, pgid, session, start time and command."""
    table: dict[int, dict[str, Any]] = {}
    for name in os.listdir("/proc") if os.path.isdir("/proc/self") else []:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                head, _, rest = fh.read().rpartition(")")
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                cmd = command_line(fh.read(CMD_BYTES + 1))
        except OSError:
            continue
        fields = rest.split()
        if len(fields) < 20 or fields[0] == "Z":
            continue
        table[int(name)] = {
            "pid": int(name),
            "ppid": int(fields[1]),
            "pgid": int(fields[2]),
            "sid": int(fields[3]),
            "start": int(fields[19]),
            "cmd": cmd or head.partition("(")[2],
        }
    return table


def command_line(raw: bytes) -> str:
    """A process's command line as text; past CMD_BYTES, cut before the word the cut went
    through, so no part of a secret in it (a URL's password) is left to show."""
    text = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
    if len(raw) <= CMD_BYTES:
        return text
    return text[:CMD_BYTES].rpartition(" ")[0] + " [cut]"


def server_processes(record: dict[str, Any], table: dict[int, dict[str, Any]]) -> list[int]:
    """The server's live processes: its process group, its session, every descendant of its
    first process (a worker may have left the group with setsid), and those seen before
    (a descendant whose parent died is reparented; its start time tells it from a reused
    pid). Once the first pid names another process, only those seen before."""
    if not os.path.isdir("/proc/self"):
        try:
            os.killpg(record["pgid"], 0)
        except ProcessLookupError:
            return []
        return [record["pgid"]]
    if pid_reused(record, table):
        found: set[int] = set()
        stack: list[int] = []
    else:
        found = {
            pid
            for pid, p in table.items()
            if p["pgid"] == record["pgid"] or p["sid"] == record["pid"]
        }
        stack = [record["pid"], *found]
    children: dict[int, list[int]] = {}
    for pid, p in table.items():
        children.setdefault(p["ppid"], []).append(pid)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    for pid, start in remembered(record).items():
        if table.get(pid, {}).get("start") == start:
            found.add(pid)
    found.discard(os.getpid())
    return sorted(found)


def remembered(record: dict[str, Any]) -> dict[int, int]:
    try:
        with open(os.path.join(record["dir"], "processes.json")) as fh:
            return {int(pid): int(start) for pid, start in json.load(fh).items()}
    except (OSError, ValueError, KeyError):
        return {}


def remember(record: dict[str, Any], pids: list[int], table: dict[int, dict[str, Any]]) -> None:
    """Keep the server's processes seen so far, so a later stop still finds an orphan."""
    known = remembered(record)
    known.update({pid: table[pid]["start"] for pid in pids if pid in table})
    path = os.path.join(record["dir"], "processes.json")
    with contextlib.suppress(OSError):
        _write_private(path, json.dumps({str(k): v for k, v in known.items()}))


def live_processes(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The server's live processes as pid, parent and command; remembered for the stop."""
    table = process_table()
    pids = server_processes(record, table)
    remember(record, pids, table)
    return [
        {k: table[p][k] for k in ("pid", "ppid", "cmd")} if p in table else {"pid": p} for p in pids
    ]


def exit_code(record: dict[str, Any]) -> int | None:
    try:
        with open(record["exit_file"]) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def http_get(
    url: str, timeout: float = 2.0, cap: int = 0, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    # No proxies: the server is on this host's loopback, whatever http_proxy says.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(
            urllib.request.Request(url, headers=headers or {}), timeout=timeout
        ) as resp:
            return {"status": resp.status, "body": resp.read(cap).decode("utf-8", "replace")}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "body": exc.read(cap).decode("utf-8", "replace")}
    except Exception as exc:
        return {"status": None, "error": f"{type(exc).__name__}: {exc}"}


def log_tail(path: str, lines: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            data = fh.read()
    except OSError:
        return ""
    text = data.decode("utf-8", "replace").replace("\r\n", "\n")
    # A progress bar redraws with a lone \r: keep what the terminal would show last. A \r
    # that only ends a line (vLLM's engine process writes \r\n) is gone already.
    shown = [line.rpartition("\r")[2] for line in text.split("\n")]
    if size > TAIL_BYTES:
        shown = shown[1:]
    return "\n".join(shown[-lines:]).rstrip("\n")


def scan_log(
    path: str, start: int, final: bool, patterns: dict[str, list[str]]
) -> tuple[int, list[dict[str, str]]]:
    """Lines after byte `start` holding any watched phrase; whole lines only unless final."""
    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read(SCAN_CHUNK)
    except OSError:
        return start, []
    end = len(data) if final else data.rfind(b"\n") + 1
    hits = []
    for line in re.split(r"[\r\n]", data[:end].decode("utf-8", "replace")):
        for key, phrases in patterns.items():
            for phrase in phrases:
                if phrase in line:
                    hits.append({"key": key, "phrase": phrase, "line": line.strip()[:1000]})
    return start + end, hits


def cmd_start(arg: dict[str, Any]) -> dict[str, Any]:
    port = int(arg["port"])
    if port_open(port):
        raise Refused(
            f"port {port} on this host already accepts connections: another server is using "
            "it. Pick a free port, or stop that server first",
            kind="port_in_use",
        )
    folder = server_dir(arg["id"], create=True)
    os.mkdir(folder, 0o700)
    log = os.path.join(folder, "server.log")
    exit_file = os.path.join(folder, "exit_code")
    env = dict(os.environ)
    env.update(arg["env"])
    with open(log, "ab") as fh:
        proc = subprocess.Popen(
            ["sh", "-c", WRAPPER, exit_file, *arg["argv"]],
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=folder,
            env=env,
            start_new_session=True,
        )
    record = {
        "id": arg["id"],
        "engine": arg["engine"],
        "pid": proc.pid,
        "pgid": os.getpgid(proc.pid),
        "start_ticks": start_ticks(proc.pid),
        "port": port,
        "argv": arg["argv"],
        "env_names": sorted(arg["env"]),
        "ready": arg["ready"],
        "started_at": time.time(),
        "log": log,
        "exit_file": exit_file,
        "dir": folder,
    }
    write_record(record)
    return {"record": record}


def ended_at(record: dict[str, Any]) -> float | None:
    """When the server's process ended: its exit-status file is written as it ends."""
    try:
        return os.stat(record["exit_file"]).st_mtime
    except OSError:
        return None


def is_alive(record: dict[str, Any]) -> bool:
    return proc_state(record["pid"]) not in (None, "Z") and not pid_reused(record)


def alive_and_code(record: dict[str, Any]) -> tuple[bool, int | None]:
    alive = is_alive(record)
    return alive, (None if alive else exit_code(record))


def cmd_probe(arg: dict[str, Any]) -> dict[str, Any]:
    record = read_record(arg["id"])
    alive, code = alive_and_code(record)
    scan_from = int(arg.get("scan_from", 0))
    scan_to, hits = scan_log(record["log"], scan_from, not alive, arg["patterns"])
    out = {
        "alive": alive,
        "exit_code": code,
        "now": time.time(),
        "started_at": record["started_at"],
        "scan_to": scan_to,
        "hits": hits,
        "tail": log_tail(record["log"], int(arg.get("tail_lines", 40))),
    }
    url = arg.get("url")
    if url and alive:
        # The launch's trace context (Sleuth exports telemetry): a tracing engine joins it.
        traceparent = arg.get("traceparent")
        out["http"] = http_get(url, headers={"traceparent": traceparent} if traceparent else None)
    live_processes(record)
    return out


def cmd_status(arg: dict[str, Any]) -> dict[str, Any]:
    record = read_record(arg["id"])
    alive, code = alive_and_code(record)
    paths = list(arg.get("paths_by_engine", {}).get(record["engine"], ["/v1/models"]))
    ready_url = record["ready"].get("url")
    if ready_url:
        ready_path = urllib.parse.urlsplit(ready_url).path or "/"
        if ready_path not in paths:
            paths.append(ready_path)
    fetched = {}
    if alive:
        for path in paths:
            fetched[path] = http_get(
                f"http://127.0.0.1:{record['port']}{path}", timeout=5.0, cap=BODY_CAP
            )
    return {
        "record": record,
        "alive": alive,
        "exit_code": code,
        "processes": live_processes(record),
        "now": time.time(),
        "ended_at": None if alive else ended_at(record),
        "fetched": fetched,
        "tail": log_tail(record["log"], int(arg.get("tail_lines", 20))),
    }


def wait_gone(record: dict[str, Any], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while True:
        members = server_processes(record, process_table())
        if not members or time.monotonic() >= deadline:
            return members
        time.sleep(0.05)


def cmd_stop(arg: dict[str, Any]) -> dict[str, Any]:
    """SIGTERM to the process group and to every other process of the server (workers
    that left the group, orphans seen before), SIGKILL to what is left after grace_s."""
    record = read_record(arg["id"])
    table = process_table()
    before = server_processes(record, table)
    remember(record, before, table)
    signals = []
    remaining = before
    t0 = time.monotonic()
    group = not pid_reused(record, table)
    if before:
        signals.append("SIGTERM")
        _signal_all(record, before, signal.SIGTERM, group)
        remaining = wait_gone(record, float(arg.get("grace_s", 30.0)))
        if remaining:
            signals.append("SIGKILL")
            _signal_all(record, remaining, signal.SIGKILL, group)
            remaining = wait_gone(record, 10.0)
    record["stopped_at"] = time.time()
    record["stop"] = {"signals": signals, "remaining": remaining, "was_running": before}
    write_record(record)
    return {
        "record": record,
        "was_running": before,
        "signals": signals,
        "remaining": remaining,
        "waited_s": time.monotonic() - t0,
    }


def _signal_all(record: dict[str, Any], pids: list[int], sig: int, group: bool) -> None:
    """`sig` to each of `pids`, and to the server's process group unless its number now
    belongs to another process's group."""
    if group:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(record["pgid"], sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def cmd_list(arg: dict[str, Any]) -> dict[str, Any]:
    """Every live server and the newest `limit` ended ones, oldest first; `older` counts the
    ended records left out. Records are kept (their logs are for a person to read), so a busy
    host has thousands: one left out costs a record read and a /proc read, nothing more."""
    limit = max(0, int(arg.get("limit", LIST_LIMIT)))
    folder = checked_state_dir()
    names = [n for n in os.listdir(folder) if SERVER_ID.match(n)] if folder else []
    servers: list[dict[str, Any]] = []
    ignored: list[dict[str, str]] = []
    ended = older = 0
    for name in sorted(names, reverse=True):  # an id begins with its start time: newest first
        try:
            record = read_record(name)
            alive = is_alive(record)
        except Refused as exc:
            ignored.append({"id": name, "why": str(exc)})
            continue
        except (ValueError, KeyError, TypeError) as exc:
            ignored.append({"id": name, "why": f"unreadable record ({type(exc).__name__})"})
            continue
        if not alive:
            if ended >= limit:
                older += 1
                continue
            ended += 1
        servers.append(
            {
                "record": record,
                "alive": alive,
                "exit_code": None if alive else exit_code(record),
                "ended_at": None if alive else ended_at(record),
            }
        )
    servers.reverse()
    return {
        "servers": servers,
        "older": older,
        "now": time.time(),
        "folder": state_dir(),
        "ignored": ignored,
    }


def cmd_log(arg: dict[str, Any]) -> dict[str, Any]:
    """The last `bytes` of the log, for a diagnosis of a failed launch."""
    record = read_record(arg["id"])
    size, data = 0, b""
    with contextlib.suppress(OSError), open(record["log"], "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - int(arg.get("bytes", 64 << 10))))
        data = fh.read()
    return {"text": data.decode("utf-8", "replace"), "cut": size > len(data)}


COMMANDS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "start": cmd_start,
    "probe": cmd_probe,
    "status": cmd_status,
    "stop": cmd_stop,
    "list": cmd_list,
    "log": cmd_log,
}


def main() -> None:
    # The argument came on stdin before the source; the runner hands it over as SECRETS.
    try:
        out = COMMANDS[sys.argv[1]](dict(globals().get("SECRETS") or {}))
    except Refused as exc:
        out = {"error": str(exc), "kind": exc.kind}
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
