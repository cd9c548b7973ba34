"""Read-only file tools: read_lines, grep, list_dir, read_json.

Each builds an argument vector from typed input (with `--` before operands and
`-e` before patterns) or reads bytes directly, so nothing the model writes is
ever parsed by a shell as code.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from sleuth.hosts.host import read_whole
from sleuth.tools.context import ToolContext
from sleuth.tools.files import redacted_grep
from sleuth.tools.files.keyed_secrets import scan_paths, too_big
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


LINE_BYTES = 4096
# A fixed script: the path and numbers arrive as positional parameters, never as code. `cut`
# streams, so a file of one enormous line costs no memory, where `sed` alone would hold it.
READ_LINES_SCRIPT = 'cut -b "1-$1" -- "$2" | sed -n -e "$3,$4p" -e "\\$="'


def _show_line(raw: bytes) -> str:
    if len(raw) > LINE_BYTES:
        return raw[:LINE_BYTES].decode(errors="replace") + f" [line cut at {LINE_BYTES} bytes]"
    return raw.decode(errors="replace")


class ReadLinesInput(ToolInput):
    path: str = Field(description="File to read; relative paths start at the host's first root.")
    start: int = Field(1, ge=1, description="First line to show (1-based).")
    end: int | None = Field(None, ge=1, description="Last line to show; default start+199.")


@tool()
def read_lines(ctx: ToolContext, args: ReadLinesInput) -> ToolResult:
    """Read numbered lines START..END of a text file, like `sed -n 'START,ENDp'`.

    Use it to look at source code or logs around a line you found with grep.
    The output shows each line with its number and ends with the file's total
    line count, so you can page on. Very long lines or ranges are cut with an
    explicit "[truncated: N more bytes]" marker.
    """
    sandbox = ctx.host(args.host)
    path = sandbox.resolve(args.path)
    limit = ctx.limits.max_output_lines
    end = args.end or args.start + min(199, limit - 1)
    if end < args.start:
        raise ToolError(f"end ({end}) is before start ({args.start})")
    note = ""
    if end - args.start + 1 > limit:
        end = args.start + limit - 1
        note = f"(range shortened to {limit} lines, the per-call limit)\n"
    if b"\x00" in sandbox.host.read_range(path, 0, 8192):
        raise ToolError(
            f"{path} is binary (NUL bytes in its first 8 KiB); read_lines shows text. "
            "For a .safetensors file use safetensors_header."
        )
    argv = [
        "sh",
        "-c",
        READ_LINES_SCRIPT,
        "sleuth-read-lines",
        str(LINE_BYTES + 1),
        path,
        str(args.start),
        str(end),
    ]
    run = sandbox.run(argv)
    if run.timed_out or run.exit_code != 0 or run.stderr.strip():
        raise ToolError(_command_failure(run.stderr, run.exit_code, run.timed_out, path))
    raw_lines = run.stdout.split(b"\n")[:-1] if run.stdout.endswith(b"\n") else []
    total: int | None = None
    if not run.stdout_cut and raw_lines and raw_lines[-1].isdigit():
        total = int(raw_lines.pop())
    keyed = scan_paths(sandbox, [path], ctx.limits.timeout_s).get(path, {})
    if keyed is None:
        raise too_big(path)
    raw_lines = [
        keyed[n].encode() if n in keyed else line for n, line in enumerate(raw_lines, args.start)
    ]
    body = "".join(f"{args.start + i:>6}\t{_show_line(line)}\n" for i, line in enumerate(raw_lines))
    lines = raw_lines
    shown_end = args.start + len(lines) - 1
    if total is None and not run.stdout_cut:
        total = 0
    head = f"{path} lines {args.start}-{shown_end} of {total if total is not None else '?'}\n"
    text, cut = cap_output(
        head + note + body, ctx.limits.max_output_bytes, limit + 2, run.stdout_cut
    )
    return ToolResult(
        ok=True,
        output=text,
        data={"path": path, "start": args.start, "end": shown_end, "total_lines": total},
        argv=[run.argv],
        exit_code=run.exit_code,
        bytes_cut=cut,
        reconnected=run.reconnected,
    )


class GrepInput(ToolInput):
    pattern: str = Field(description="Extended regular expression (or a fixed string).")
    path: str = Field(description="File or folder to search, recursively.")
    fixed_string: bool = Field(False, description="Match the pattern literally.")
    ignore_case: bool = False
    include_glob: str | None = Field(None, description="Only files matching, e.g. '*.py'.")
    context: int = Field(0, ge=0, le=20, description="Lines of context around each match.")
    max_matches: int = Field(200, ge=1, le=5000, description="Stop after this many per file.")


@tool()
def grep(ctx: ToolContext, args: GrepInput) -> ToolResult:
    """Search file contents recursively and return `file:line:text` for each match.

    Use it to find where a flag, class or string is defined or used in a source
    tree (e.g. pattern "speculative_algorithm", include_glob "*.py"). Binary
    files are skipped and symlinks inside folders are not followed. Secrets are
    redacted before matching: a line matches only if the pattern matches what is
    shown, so searching for a secret's content finds nothing. The output ends with
    the number of matching lines and files; if it was cut, it says so.
    """
    sandbox = ctx.host(args.host)
    path = sandbox.resolve(args.path)
    flags = ["-F" if args.fixed_string else "-E", *(["-i"] if args.ignore_case else [])]
    select = [f"--include={args.include_glob}"] if args.include_glob else []
    found = redacted_grep.search(
        sandbox, path, flags, select, args.pattern, args.max_matches, ctx.limits.timeout_s
    )
    context = (
        redacted_grep.context_lines(sandbox, found, args.context, ctx.limits.timeout_s)
        if args.context
        else {}
    )
    lines = _grep_lines(found.matches, context)
    files = sorted({name for name, _, _ in found.matches})
    at_least = "at least " if found.raw_cut else ""
    summary = f"{at_least}{len(found.matches)} matching lines in {at_least}{len(files)} files"
    if not found.matches:
        summary = f"no matches for {args.pattern!r} under {path}"
    if found.unscanned:
        summary += (
            f"; not searched, too big to check for secrets by key: {', '.join(found.unscanned)}"
        )
    if found.hidden:
        summary += (
            f"; {found.hidden} lines with redacted values did not match once redacted "
            "(a match inside a redacted value is not shown)"
        )
    text, cut = cap_output(
        "".join(line + "\n" for line in lines),
        ctx.limits.max_output_bytes,
        ctx.limits.max_output_lines,
        found.raw_cut,
    )
    return ToolResult(
        ok=True,
        output=f"{text}{summary}\n",
        data={
            "matches": len(found.matches),
            "files": files,
            "complete": not cut,
            "redacted_lines_unmatched": found.hidden,
            "not_searched": found.unscanned,
        },
        argv=found.argv,
        exit_code=0 if found.matches else 1,
        bytes_cut=cut,
    )


def _grep_lines(
    matches: list[tuple[str, int, str]], context: dict[tuple[str, int], str]
) -> list[str]:
    """grep's own layout: `file:N:text` for a match, `file-N-text` around it, `--` between."""
    shown: dict[tuple[str, int], str] = {
        **{hit: f"{hit[0]}-{hit[1]}-{text}" for hit, text in context.items()},
        **{(name, n): f"{name}:{n}:{text}" for name, n, text in matches},
    }
    lines: list[str] = []
    last: tuple[str, int] | None = None
    for hit in sorted(shown):
        if context and last is not None and (hit[0] != last[0] or hit[1] != last[1] + 1):
            lines.append("--")
        lines.append(shown[hit])
        last = hit
    return lines


class ListDirInput(ToolInput):
    path: str = Field(".", description="Folder to list; relative to the host's first root.")
    depth: int = Field(1, ge=1, le=6, description="How many levels down to go.")
    max_entries: int = Field(500, ge=1, le=20_000)


_KINDS = {"d": "dir", "f": "file", "l": "link", "p": "fifo", "s": "socket"}


@tool()
def list_dir(ctx: ToolContext, args: ListDirInput) -> ToolResult:
    """List a folder: the type, size in bytes and name of each entry, DEPTH levels down.

    Use it to find checkpoints (config.json, *.safetensors), source trees and
    logs. Symlinks are shown as links, not followed.
    """
    sandbox = ctx.host(args.host)
    path = sandbox.resolve(args.path)
    argv = [
        "find",
        "-P",
        path,
        "-mindepth",
        "1",
        "-maxdepth",
        str(args.depth),
        "-printf",
        r"%y\t%s\t%P\n",
    ]
    run = sandbox.run(argv)
    if run.timed_out or run.exit_code not in (0, 1):
        raise ToolError(_command_failure(run.stderr, run.exit_code, run.timed_out, path))
    entries: list[dict[str, Any]] = []
    for line in run.stdout.decode(errors="replace").splitlines():
        parts = line.split("\t", 2)
        if len(parts) == 3 and parts[1].isdigit():
            entries.append(
                {"kind": _KINDS.get(parts[0], "other"), "size": int(parts[1]), "name": parts[2]}
            )
    seen = len(entries)
    entries.sort(key=lambda e: str(e["name"]))
    shown = entries[: args.max_entries]
    more = seen - len(shown)
    body = "".join(
        f"{e['kind']:<6} {e['size']:>14} {e['name']}{'/' if e['kind'] == 'dir' else ''}\n"
        for e in shown
    )
    tail = ""
    if more or run.stdout_cut:
        tail = f"[truncated: {more} more entries{' and more not read' if run.stdout_cut else ''}]\n"
    text, cut = cap_output(
        f"{path}: {seen} entries\n{body}",
        ctx.limits.max_output_bytes,
        ctx.limits.max_output_lines + 1,
    )
    return ToolResult(
        ok=True,
        output=text + tail,
        data={"path": path, "entries": shown, "complete": not (more or run.stdout_cut)},
        argv=[run.argv],
        exit_code=run.exit_code,
        bytes_cut=cut + run.stdout_cut,
        reconnected=run.reconnected,
    )


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
    st = sandbox.host.stat(path)
    if st.kind != "file":
        raise ToolError(f"{path} is not a regular file ({st.kind})")
    if st.size > MAX_JSON_BYTES:
        raise ToolError(f"{path} is {st.size} bytes, over the {MAX_JSON_BYTES}-byte limit")
    raw = read_whole(sandbox.host, path, size=st.size, timeout=ctx.limits.timeout_s)
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


def _command_failure(stderr: bytes, code: int | None, timed_out: bool, path: str) -> str:
    if timed_out:
        return f"timed out on {path}; narrow the path or pattern"
    detail = stderr.decode(errors="replace").strip().splitlines()
    return f"failed on {path} (exit {code}): {detail[-1] if detail else 'no message'}"
