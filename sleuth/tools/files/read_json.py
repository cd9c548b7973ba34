"""read_json: the value at a JSON Pointer in a JSON file, keyed secrets redacted first."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from sleuth.hosts.host import read_whole
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError, cap_output
from sleuth.transcripts.redact import redact_keyed
from sleuth.transcripts.results import ToolResult

try:
    import orjson

    def _loads(raw: bytes) -> Any:
        return orjson.loads(raw)
except ImportError:  # pragma: no cover - orjson is optional

    def _loads(raw: bytes) -> Any:
        return json.loads(raw)


MAX_JSON_BYTES = 128 * 1024 * 1024


class ReadJsonInput(ToolInput):
    path: str = Field(description="JSON file, e.g. a checkpoint's config.json.")
    pointer: str = Field(
        "", description="JSON Pointer into the file, e.g. /text_config/num_experts"
    )


@tool()
def read_json(ctx: ToolContext, args: ReadJsonInput) -> ToolResult:
    """Read a JSON file and return the value at a JSON Pointer ("" for the whole document).

    Use it for config.json, hf_quant_config.json, tokenizer configs or a
    safetensors index, e.g. pointer "/text_config/mtp_num_hidden_layers".
    Big values are cut with an explicit marker; narrow the pointer to see more.
    """
    sandbox = ctx.host(args.host)
    path = sandbox.resolve(args.path)
    st = sandbox.files.stat(path)
    if st.kind != "file":
        raise ToolError(f"{path} is not a regular file ({st.kind})")
    if st.size > MAX_JSON_BYTES:
        raise ToolError(f"{path} is {st.size} bytes, over the {MAX_JSON_BYTES}-byte limit")
    raw = read_whole(sandbox.files, path, size=st.size, timeout=ctx.limits.timeout_s)
    try:
        doc = _loads(raw)
    except ValueError as exc:
        raise ToolError(f"{path} is not valid JSON: {exc}") from exc
    # The whole document first: a pointer to /server/password must not lift the value
    # away from the key that marks it.
    value = resolve_pointer(redact_keyed(doc), args.pointer)
    rendered = json.dumps(value, indent=2, ensure_ascii=False)
    text, cut = cap_output(
        rendered + "\n", ctx.limits.max_output_bytes, ctx.limits.max_output_lines
    )
    return ToolResult(
        ok=True,
        output=f"{path}{args.pointer or ''}:\n{text}",
        data=value if not cut else None,
        bytes_cut=cut,
    )


def resolve_pointer(doc: Any, pointer: str) -> Any:
    """RFC 6901: "/a/0/b~1c" -> doc["a"][0]["b/c"]."""
    if pointer == "":
        return doc
    if not pointer.startswith("/"):
        raise ToolError(f"JSON Pointer {pointer!r} must start with '/' (or be empty)")
    value = doc
    walked = ""
    for token in pointer[1:].split("/"):
        key = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict):
            if key not in value:
                keys = ", ".join(list(value)[:30])
                raise ToolError(f"no key {key!r} at {walked or '/'}; keys there: {keys}")
            value = value[key]
        elif isinstance(value, list):
            if not key.isdigit() or int(key) >= len(value):
                raise ToolError(f"{walked or '/'} is a list of {len(value)}; {key!r} is no index")
            value = value[int(key)]
        else:
            raise ToolError(f"{walked or '/'} is a {type(value).__name__}, not an object or list")
        walked += "/" + token
    return value
