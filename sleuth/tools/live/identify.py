"""Which engine answers on a port, from the pages it served: SGLang's server info, vLLM's
/version and /v1/models, and the names on its /metrics page."""

from __future__ import annotations

from typing import Any

from sleuth.tools.live.models import EngineReport, Settings
from sleuth.tools.live.probe import Page, Target
from sleuth.tools.live.prom import Sample

SGLANG_SETTINGS = (
    "model_path",
    "served_model_name",
    "tp_size",
    "dp_size",
    "ep_size",
    "quantization",
    "kv_cache_dtype",
    "context_length",
    "mem_fraction_static",
    "max_total_num_tokens",
    "max_running_requests",
    "chunked_prefill_size",
    "page_size",
    "schedule_policy",
    "disable_radix_cache",
    "attention_backend",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "enable_metrics",
    "decode_log_interval",
    "api_key",
)
PER_RANK = ("avg_spec_accept_length", "last_gen_throughput")


def _ok_json(page: Page | None) -> Any:
    return page.body if page is not None and page.status == 200 else None


def server_info(target: Target) -> dict[str, Any] | None:
    for path in ("/get_server_info", "/server_info"):
        body = _ok_json(target.pages.get(path))
        if isinstance(body, dict) and ("model_path" in body or "server_args" in body):
            return body
    return None


def engine_of(target: Target, metrics: list[Sample]) -> str | None:
    if server_info(target) is not None or any(s.name.startswith("sglang:") for s in metrics):
        return "sglang"
    models = _ok_json(target.pages.get("/v1/models"))
    owners = {m.get("owned_by") for m in _models(models)}
    if "vllm" in owners or any(s.name.startswith("vllm:") for s in metrics):
        return "vllm"
    return "sglang" if "sglang" in owners else None


def _models(body: Any) -> list[dict[str, Any]]:
    data = body.get("data") if isinstance(body, dict) else None
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def fill(report: EngineReport, target: Target, metrics: list[Sample]) -> None:
    """The engine, version, models, settings and health from the pages."""
    models = _models(_ok_json(target.pages.get("/v1/models")))
    report.models = [str(m.get("id")) for m in models]
    report.max_model_len = {
        str(m.get("id")): int(m["max_model_len"])
        for m in models
        if isinstance(m.get("max_model_len"), int)
    }
    version = _ok_json(target.pages.get("/version"))
    info = server_info(target)
    if info is not None:
        nested = info.get("server_args")
        args: dict[str, Any] = nested if isinstance(nested, dict) else info
        values = {k: args[k] for k in SGLANG_SETTINGS if k in args}
        states = [s for s in info.get("internal_states") or [] if isinstance(s, dict)]
        for key in PER_RANK:
            ranks = [s[key] for s in states if s.get(key) is not None]
            if ranks:
                values[f"{key} (per DP rank, since launch)"] = ranks
        report.settings.append(Settings(source=_info_path(target), values=values))
        report.version = str(info.get("version") or "") or None
    if isinstance(version, dict) and version.get("version"):
        report.version = str(version["version"])
    config = [s for s in metrics if s.name == "vllm:cache_config_info"]
    if config:
        report.settings.append(
            Settings(source="vllm:cache_config_info labels", values=dict(config[0].labels))
        )
    health = target.pages.get("/health")
    if health is not None:
        report.healthy = health.status == 200
        report.health = (
            f"/health: HTTP {health.status}" if health.status else (f"/health: {health.error}")
        )


def _info_path(target: Target) -> str:
    first = target.pages.get("/get_server_info")
    return "/get_server_info" if first is not None and first.status == 200 else "/server_info"
