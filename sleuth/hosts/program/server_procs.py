"""Sleuth's read-only scan of the inference servers running on a host. Runs as `python3 -`.

Prints one JSON document: each process whose command line runs an engine's server (SGLang,
vLLM, TensorRT-LLM, TGI), with its argv, its working folder and the absolute paths its
arguments name, resolved. Reads /proc only; changes nothing.
"""

from __future__ import annotations

import json
import os
from typing import Any

MAX_PATHS = 64


def engine_of(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        base = os.path.basename(arg)
        following = argv[i + 1] if i + 1 < len(argv) else ""
        if arg.startswith("sglang.launch_server") or (base == "sglang" and following == "serve"):
            return "sglang"
        if arg.startswith("vllm.entrypoints") or (base == "vllm" and following == "serve"):
            return "vllm"
        if base == "trtllm-serve":
            return "trtllm"
        if base in ("text-generation-launcher", "text-generation-router"):
            return "tgi"
    return None


def paths_of(argv: list[str]) -> list[str]:
    found: list[str] = []
    for arg in argv[:256]:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if value.startswith("/") and len(found) < MAX_PATHS and os.path.exists(value):
            found.append(os.path.realpath(value))
    return found


def process(pid: str) -> dict[str, Any] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    argv = [part.decode("utf-8", "replace") for part in raw.split(b"\0")[:-1]]
    engine = engine_of(argv)
    if engine is None:
        return None
    try:
        cwd: str | None = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        cwd = None
    return {"pid": int(pid), "engine": engine, "argv": argv, "cwd": cwd, "paths": paths_of(argv)}


def main() -> None:
    own = str(os.getpid())
    found = []
    for pid in sorted(os.listdir("/proc"), key=lambda p: (len(p), p)):
        if pid.isdigit() and pid != own:
            entry = process(pid)
            if entry is not None:
                found.append(entry)
    print(json.dumps({"processes": found}))


if __name__ == "__main__":  # run as `python3 -`; imported, it only lends engine_of
    main()
