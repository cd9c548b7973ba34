"""Prometheus's HTTP API, from where Sleuth runs: instant and range queries with a bearer
token from the environment, no redirects (the token never follows one to another server),
answers read up to a byte cap and refused past it."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from pydantic import BaseModel

from sleuth.config import PrometheusSettings
from sleuth.errors import ErrorKind
from sleuth.tools.results import ToolError


class Series(BaseModel):
    labels: dict[str, str]
    values: list[tuple[float, float | None]]
    """(unix time, value); None where Prometheus said NaN or Inf."""


class Answer(BaseModel):
    kind: str
    """vector, matrix or scalar."""
    series: list[Series]
    seconds: float


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _config_error(message: str) -> ToolError:
    return ToolError(message, ErrorKind.CONFIG)


class Prometheus:
    def __init__(self, settings: PrometheusSettings) -> None:
        if not settings.url:
            raise _config_error(
                "no Prometheus is configured: add to sleuth.toml\n  [prometheus]\n  url = "
                '"http://HOST:9090"\n  token_env = "PROMETHEUS_TOKEN"   # only if it needs a '
                "bearer token"
            )
        parts = urllib.parse.urlsplit(settings.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise _config_error(f"[prometheus] url {settings.url!r} must be http(s)://HOST:PORT")
        self.settings = settings
        self.base = settings.url.rstrip("/")
        self.headers = {"Accept": "application/json"}
        if settings.token_env:
            token = os.environ.get(settings.token_env)
            if not token:
                raise _config_error(
                    f"[prometheus] token_env names {settings.token_env}, which is not set in "
                    "this environment"
                )
            self.headers["Authorization"] = f"Bearer {token}"
        self.opener = urllib.request.build_opener(_NoRedirect())

    def instant(self, promql: str, at: float) -> Answer:
        return self._get("query", {"query": promql, "time": f"{at:.3f}"})

    def range(self, promql: str, start: float, end: float, step: float) -> Answer:
        params = {
            "query": promql,
            "start": f"{start:.3f}",
            "end": f"{end:.3f}",
            "step": f"{step:g}",
        }
        return self._get("query_range", params)

    def _get(self, endpoint: str, params: dict[str, str]) -> Answer:
        url = f"{self.base}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}"
        cap = self.settings.max_bytes
        started = time.monotonic()
        try:
            with self.opener.open(
                urllib.request.Request(url, headers=self.headers), timeout=self.settings.timeout_s
            ) as resp:
                body = resp.read(cap + 1)
        except urllib.error.HTTPError as exc:
            body = exc.read(cap + 1)
            if exc.code in (400, 422) and body:
                return self._answer(body, started)  # Prometheus says why the query is bad
            raise ToolError(f"Prometheus at {self.base} answered HTTP {exc.code}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise ToolError(
                f"cannot reach Prometheus at {self.base}: {exc}", ErrorKind.UNREACHABLE
            ) from exc
        if len(body) > cap:
            raise ToolError(
                f"Prometheus's answer passed {cap:,} bytes ([prometheus] max_bytes) and was not "
                "read: narrow the query (fewer labels, a shorter range, a larger step)"
            )
        return self._answer(body, started)

    def _answer(self, body: bytes, started: float) -> Answer:
        try:
            doc = json.loads(body)
        except ValueError as exc:
            raise ToolError(f"Prometheus at {self.base} answered with something not JSON") from exc
        if doc.get("status") != "success":
            raise ToolError(f"Prometheus refused the query: {doc.get('error', 'no reason given')}")
        data = doc.get("data") or {}
        kind = str(data.get("resultType"))
        result = data.get("result")
        series: list[Series] = []
        if kind == "scalar":
            series = [Series(labels={}, values=[_point(result)])]
        elif kind in ("vector", "matrix"):
            for item in result or []:
                points = [item["value"]] if kind == "vector" else item.get("values", [])
                series.append(
                    Series(labels=item.get("metric", {}), values=[_point(p) for p in points])
                )
        return Answer(kind=kind, series=series, seconds=round(time.monotonic() - started, 4))


def _point(pair: Any) -> tuple[float, float | None]:
    at, value = float(pair[0]), float(pair[1])
    return at, (value if value == value and abs(value) != float("inf") else None)
