"""Engine rules confirmed at the source: read the installed engine's own lines and quote them.

When python_env finds sglang or vllm inside the host's roots, capacity_plan reads the
quantisation class's `get_min_capability` (the number used, not only quoted) and finds
the KV cell line, each quoted as `file:line` on that host. Files are read whole through
the sandbox (paths resolved and kept in the roots); nothing is imported or run.
"""

from __future__ import annotations

import itertools
import posixpath
import re

from pydantic import BaseModel

from sleuth.hosts.host import HostError, read_whole
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.capacity.model import Evidence
from sleuth.tools.capacity.quant_rules import QUANT_DIRS, quant_rules
from sleuth.tools.results import ToolError

MAX_SOURCE_BYTES = 2_000_000

KV_FILES = {
    "sglang": (
        "srt/model_executor/pool_configurator.py",
        "srt/model_executor/model_runner_kv_cache_mixin.py",
        "srt/model_executor/model_runner.py",
    ),
    "vllm": ("v1/kv_cache_interface.py",),
}
KV_LINE = {
    "mha": re.compile(r"head_dim\s*\+\s*[\w.]*v_head_dim|head_size\s*\+\s*self\.head_size_v"),
    "mla": re.compile(r"kv_lora_rank\s*\+\s*[\w.]*qk_rope_head_dim|self\.head_size\s*$"),
}


class MinCapability(BaseModel):
    value: int
    evidence: Evidence


class EngineSource(BaseModel):
    engine: str
    version: str | None
    root: str
    min_capability: MinCapability | None = None
    kv_cell: Evidence | None = None
    notes: list[str] = []


def _read(sandboxed: SandboxedHost, path: str) -> list[str] | None:
    try:
        real = sandboxed.resolve(path)
        data = read_whole(sandboxed.files, real, size=MAX_SOURCE_BYTES)
    except (ToolError, HostError):
        return None
    if not data:
        return None
    return data.decode(errors="replace").splitlines()


def confirm(
    sandboxed: SandboxedHost,
    engine: str,
    version: str | None,
    root: str,
    method: str | None,
    mla: bool,
) -> EngineSource:
    """Quote the installed engine's rules; what cannot be found is said in `notes`."""
    found = EngineSource(engine=engine, version=version, root=root)
    host = sandboxed.name
    if method is not None:
        rule = quant_rules(engine).get(method)
        rel = posixpath.join(QUANT_DIRS[engine], rule.file) if rule else None
        lines = _read(sandboxed, posixpath.join(root, rel)) if rel else None
        hit = _min_capability(lines, method) if lines else None
        if hit is None:
            found.notes.append(
                f"no get_min_capability for {method} found in {engine}'s installed source"
            )
        else:
            line_no, value, text = hit
            found.min_capability = MinCapability(
                value=value,
                evidence=Evidence(
                    source=f"{host}:{posixpath.join(root, str(rel))}:{line_no}", quote=text
                ),
            )
    pattern = KV_LINE["mla" if mla else "mha"]
    for rel in KV_FILES[engine]:
        lines = _read(sandboxed, posixpath.join(root, rel))
        for i, text in enumerate(lines or [], 1):
            if pattern.search(text):
                found.kv_cell = Evidence(
                    source=f"{host}:{posixpath.join(root, rel)}:{i}", quote=text.strip()
                )
                return found
    found.notes.append(f"the KV cell rule was not found in {engine}'s installed source")
    return found


_CLASS = re.compile(r"^class\s+\w+")
_NAME = re.compile(r"""return\s+["']([\w\-]+)["']""")
_RETURN = re.compile(r"^\s*return\s+(.*?)\s*(#.*)?$")


def _min_capability(lines: list[str], name: str) -> tuple[int, int, str] | None:
    """(line, value, text) of get_min_capability in the class whose get_name returns `name`.

    A class is the text from one top-level `class` to the next. Its get_name's return gives
    its name; its get_min_capability's first `return` line with a number gives the value
    (the last number: `return 100 if self.use_mxfp8 else 80` is 80 for plain fp8).
    """
    starts = [i for i, text in enumerate(lines) if _CLASS.match(text)] + [len(lines)]
    for begin, end in itertools.pairwise(starts):
        body = lines[begin:end]
        names = _class_names(body)
        if name not in names:
            continue
        for j, text in enumerate(body):
            if "def get_min_capability" not in text:
                continue
            for k in range(j + 1, min(j + 12, len(body))):
                match = _RETURN.match(body[k])
                if match:
                    numbers = re.findall(r"\b\d+\b", match.group(1))
                    if numbers:
                        return begin + k + 1, int(numbers[-1]), body[k].strip()
                    break
    return None


def _class_names(body: list[str]) -> set[str]:
    names = set()
    for j, text in enumerate(body):
        if "def get_name" in text:
            for k in range(j + 1, min(j + 4, len(body))):
                match = _NAME.search(body[k])
                if match:
                    names.add(match.group(1))
                    break
    return names
