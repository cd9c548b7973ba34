"""Sleuth's read-only look at the inference engines answering on this host. Runs as
`python3 -c SECRET_RUNNER` with its request on stdin (the global SECRETS).

Request: {"targets": [{"host": H, "port": P}] or null (the ports that the processes "pids"
listen on, and those of "ports" that are listening),
"paths": [...], "window_s": W, "sample_every_s": S, "gauge_prefixes": [...],
"cap_bytes": N, "timeout_s": T}. Prints one JSON document: the TCP listeners it saw, and per
target each page's status and body (a JSON body as data, with secret keys redacted), then,
with a window, /metrics sampled from its start to its end.

It only ever connects to an address this host is listening on (its loopback, or an address
bound by a listening socket in /proc/net/tcp*), never follows a redirect, and reads at most
cap_bytes of a body within timeout_s: a model-supplied URL cannot reach another machine.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import re
import socket
import time
from typing import Any

LISTEN = "0A"
# A secret-named flag's value in a string (an argv kept in a document): `--api-key V`.
SECRET_FLAG = re.compile(r"(?<![\w-])(--[A-Za-z0-9_-]+)([= ])(\S+)")
# A label inside `{...}`: the lookbehind keeps the scan linear on a long run of letters.
LABEL = re.compile(r'(?<=[{,])([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


class KeyRules:
    """Which keys mark a secret: Sleuth's by-key rules (sleuth.transcripts.secret_keys),
    sent with the request as data so both sides decide alike."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.words = re.compile(doc["words"])
        self.rules = [(label, re.compile(rule)) for label, rule in doc["rules"]]
        self.squashed = re.compile(doc["squashed"])
        self.stems = tuple(doc["stems"])
        self.soft = frozenset(doc["soft"])

    def label(self, key: str) -> str | None:
        lowered = key.lower()
        if not any(stem in lowered for stem in self.stems):
            return None
        words = "_" + "_".join(w.lower() for w in self.words.findall(key)) + "_"
        found = next((lb for lb, rule in self.rules if rule.search(words)), None)
        squashed = self.squashed.search(re.sub("[^a-z0-9]+", "", lowered))
        return found or (squashed.lastgroup if squashed else None)

    def hides(self, key: str, value: Any) -> str | None:
        """The mark that replaces `value` under `key`, or None when it stays: a value under a
        secret-named key goes, except nothing (null, "") and numbers under soft words."""
        label = self.label(key)
        if label is None or value in (None, "", False):
            return None
        if label in self.soft and isinstance(value, (int, float)):
            return None
        return f"[REDACTED:by-key {label}]"

    def redact(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self.hides(str(k), v) or self.redact(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.redact(v) for v in value]
        if isinstance(value, str) and "--" in value:
            return SECRET_FLAG.sub(self._flag, value)
        return value

    def _flag(self, m: re.Match[str]) -> str:
        return (
            m.group(1) + m.group(2) + (self.hides(m.group(1).lstrip("-"), m.group(3)) or m.group(3))
        )

    def labels(self, text: str) -> str:
        """Prometheus text with secret-named label values hidden."""

        def hide(m: re.Match[str]) -> str:
            mark = self.hides(m.group(1), m.group(2))
            return f'{m.group(1)}="{mark}"' if mark else m.group()

        return LABEL.sub(hide, text)


def _hex_addr(text: str) -> str:
    raw = bytes.fromhex(text)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    # /proc/net/tcp6 writes the address as four little-endian 32-bit words.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def _socket_owners() -> dict[str, int]:
    owners: dict[str, int] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                owners.setdefault(target[8:-1], int(pid))
    return owners


def listeners() -> list[dict[str, Any]]:
    """Every listening TCP socket: its address, port and, where readable, its process."""
    found: list[dict[str, Any]] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) < 10 or cols[3] != LISTEN:
                continue
            addr, port = cols[1].rsplit(":", 1)
            found.append({"address": _hex_addr(addr), "port": int(port, 16), "inode": cols[9]})
    owners = _socket_owners() if found else {}
    for entry in found:
        entry["pid"] = owners.get(entry.pop("inode"))
    return found


def connect_address(host: str, port: int, listening: list[dict[str, Any]]) -> str | None:
    """The address to connect to for host:port, or None when it is not this host's own."""
    if host == "localhost":
        host = "127.0.0.1"
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None  # a name: resolving it could lead anywhere
    if ip.is_loopback:
        return str(ip)
    on_port = [e for e in listening if e["port"] == port]
    if any(ipaddress.ip_address(e["address"]) == ip for e in on_port):
        return str(ip)
    if any(ipaddress.ip_address(e["address"]).is_unspecified for e in on_port):
        return "127.0.0.1"  # the same listener, reached without leaving the host
    return None


def fetch(
    address: str, port: int, path: str, cap: int, deadline: float, keys: KeyRules
) -> dict[str, Any]:
    started = time.monotonic()
    left = deadline - started
    if left <= 0:
        return {"status": None, "error": "no time left"}
    conn = http.client.HTTPConnection(address, port, timeout=min(left, 5.0))
    try:
        conn.request("GET", path, headers={"Accept": "*/*"})
        resp = conn.getresponse()
        body, cut = b"", False
        while True:
            chunk = resp.read(min(65536, cap + 1 - len(body)))
            if not chunk:
                break
            body += chunk
            if len(body) > cap:
                body, cut = body[:cap], True
                break
            if time.monotonic() > deadline:
                cut = True
                break
        out: dict[str, Any] = {"status": resp.status, "cut": cut}
    except (OSError, http.client.HTTPException) as exc:
        return {"status": None, "error": f"{type(exc).__name__}: {exc}"}
    finally:
        conn.close()
    out["seconds"] = round(time.monotonic() - started, 4)
    out["at"] = time.time()
    text = body.decode("utf-8", "replace")
    try:
        out["json"] = keys.redact(json.loads(text)) if not cut else None
    except ValueError:
        out["json"] = None
    if out["json"] is None:
        out["text"] = keys.labels(text)
    return out


def _filtered(page: dict[str, Any], prefixes: list[str]) -> dict[str, Any]:
    text = page.get("text")
    if isinstance(text, str):
        keep = [ln for ln in text.splitlines() if ln.startswith(tuple(prefixes))]
        page = {**page, "text": "\n".join(keep) + "\n"}
    return page


def sample(
    address: str, port: int, req: dict[str, Any], first: dict[str, Any], keys: KeyRules
) -> list[dict[str, Any]]:
    """/metrics from the window's start (`first`) to its end: the first and last whole, those
    between cut to the gauge lines asked for (for their max and mean)."""
    window, every = float(req["window_s"]), max(0.2, float(req.get("sample_every_s") or 1.0))
    cap, prefixes = int(req["cap_bytes"]), list(req.get("gauge_prefixes") or [])
    start = time.monotonic() - float(first.get("seconds") or 0.0)
    samples = [first]
    while True:
        left = start + window - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(every, left))
        deadline = time.monotonic() + float(req["timeout_s"])
        page = fetch(address, port, "/metrics", cap, deadline, keys)
        if page.get("status") != 200:
            samples.append(page)
            break
        samples.append(page)
    return [samples[0], *(_filtered(p, prefixes) for p in samples[1:-1]), samples[-1]]


def probe(
    target: dict[str, Any], req: dict[str, Any], listening: list[dict[str, Any]], keys: KeyRules
) -> dict[str, Any]:
    host, port = str(target["host"]), int(target["port"])
    address = connect_address(host, port, listening)
    out: dict[str, Any] = {"host": host, "port": port, "address": address, "pages": {}}
    if address is None:
        out["refused"] = (
            f"{host}:{port} is not an address this host listens on; only its loopback and "
            "its own listening addresses are read"
        )
        return out
    cap, timeout = int(req["cap_bytes"]), float(req["timeout_s"])
    for path in req["paths"]:
        out["pages"][path] = fetch(address, port, path, cap, time.monotonic() + timeout, keys)
        if path == req["paths"][0] and out["pages"][path].get("status") is None:
            return out  # nothing answers there: do not wait on every page
    metrics = out["pages"].get("/metrics") or {}
    if float(req.get("window_s") or 0) > 0 and metrics.get("status") == 200:
        out["window"] = sample(address, port, req, metrics, keys)
    return out


def main() -> None:
    req = dict(globals().get("SECRETS") or {})
    listening = listeners()
    keys = KeyRules(req["key_rules"])
    targets = req.get("targets")
    if targets is None:
        pids, wanted = set(req.get("pids") or []), set(req.get("ports") or [])
        ports = sorted({e["port"] for e in listening if e["pid"] in pids or e["port"] in wanted})
        targets = [{"host": "127.0.0.1", "port": p} for p in ports]
    result = {"listening": listening, "targets": [probe(t, req, listening, keys) for t in targets]}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
