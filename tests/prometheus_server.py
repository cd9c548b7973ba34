"""A real Prometheus (Debian's `prometheus` package) on 127.0.0.1, scraping the given targets
every second, its data in a temporary folder; skipped with the install command if absent."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

INSTALL = "apt-get install prometheus"


def missing_reason() -> str | None:
    return None if shutil.which("prometheus") else f"prometheus is not installed ({INSTALL})"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrometheusServer:
    def __init__(self, folder: Path, targets: list[str]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: engine\n    static_configs:\n"
            f"      - targets: [{', '.join(repr(t) for t in targets)}]\n"
        )
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "prometheus.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    "prometheus",
                    f"--config.file={config}",
                    f"--storage.tsdb.path={folder / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait(lambda: self._get("/-/ready") is not None, 30, "ready")

    def _get(self, path: str) -> bytes | None:
        try:
            with urllib.request.urlopen(self.url + path, timeout=2) as resp:
                return bytes(resp.read())
        except OSError:
            return None

    def _wait(self, done: Any, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
            if done():
                return
            time.sleep(0.2)
        raise RuntimeError(
            f"prometheus not {what} after {seconds} s: {self.log.read_text()[-2000:]}"
        )

    def query(self, promql: str, at: float) -> dict[str, Any]:
        """Prometheus's own HTTP API, asked directly."""
        params = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
        body = self._get(f"/api/v1/query?{params}")
        assert body is not None
        return dict(json.loads(body))

    def wait_for_samples(self, series: str, count: int, seconds: float = 30) -> None:
        def enough() -> bool:
            doc = self.query(f"count_over_time({series}[5m])", time.time())
            result = doc["data"]["result"]
            return bool(result) and float(result[0]["value"][1]) >= count

        self._wait(enough, seconds, f"holding {count} samples of {series}")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
