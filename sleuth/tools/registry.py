"""Tools as typed functions: the input model is the schema, the docstring the description.

```python
class ReadLinesInput(ToolInput):
    path: str = Field(description="File to read")

@tool()
def read_lines(ctx: ToolContext, args: ReadLinesInput) -> ToolResult:
    \"\"\"Read numbered lines of a text file, like `sed -n 'S,Ep'`.\"\"\"
```

A tool runs only through the call pipeline, `sleuth.agent.calls` (validate, consent, run,
redact, ground, record); nothing else calls a tool's function.

Other packages add tools through the entry-point group `sleuth.tools` (README, "Adding a
tool"): each entry point names a module whose `@tool()` functions register when it loads.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sleuth.config import HostConfig
from sleuth.errors import ErrorKind
from sleuth.tools.context import ToolContext
from sleuth.tools.results import ToolError
from sleuth.transcripts.results import ToolResult

TOOL_MODULES = (
    "sleuth.tools.files.read_lines",
    "sleuth.tools.files.grep",
    "sleuth.tools.files.list_dir",
    "sleuth.tools.files.read_json",
    "sleuth.tools.checkpoints.safetensors_header",
    "sleuth.tools.checkpoints.checkpoint_summary",
    "sleuth.tools.environment.python_env",
    "sleuth.tools.environment.gpu_info",
    "sleuth.tools.environment.list_containers",
    "sleuth.tools.capacity.capacity_plan",
    "sleuth.tools.serving.launch",
    "sleuth.tools.serving.status",
    "sleuth.tools.serving.stop",
    "sleuth.tools.serving.diagnose_log",
    "sleuth.tools.serving.preflight",
    "sleuth.tools.serving.processes",
    "sleuth.tools.live.engine_status",
    "sleuth.tools.live.engine_log_series",
    "sleuth.tools.live.query_metrics",
    "sleuth.tools.bench.run_benchmark",
    "sleuth.tools.bench.compare_benchmarks",
    "sleuth.tools.bench.ab_run",
    "sleuth.tools.bench.slo_search",
)

PLUGIN_GROUP = "sleuth.tools"
"""The entry-point group through which other packages add tools."""


class ToolInput(BaseModel):
    """Base of every tool's input: the host comes first, and unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")
    host: str = Field(
        "local",
        description="Name of the host to act on; 'local' always exists. '@GROUP' (a host group "
        "listed with the question) runs the tool on every host of the group at once and answers "
        "with the hosts grouped by identical output: the majority, each outlier with a diff, "
        "failed and unreachable hosts. Tools that change a host run on a group only under a "
        "rule in sleuth.toml that names the group.",
    )

    def chosen_python(self) -> str | None:
        """The interpreter the model chose for this call, or for a run of another tool the
        call makes itself (goodput_search's `load`): a program of its choosing, decided like a
        custom command whatever the tool. None: the host's configured one."""
        python = getattr(self, "python", None)
        return None if python is None else str(python)


In = TypeVar("In", bound=ToolInput)
ToolFn = Callable[[ToolContext, Any], ToolResult]
ArgvFn = Callable[[HostConfig, Any], list[str]]
"""The command line a mutating tool would run for these inputs, shown for approval. It is
computed from the inputs and the host's configuration alone: nothing the model supplies is
run, probed or stat'ed on a host before consent is decided."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_model: type[ToolInput]
    fn: ToolFn
    mutating: bool
    argv: ArgvFn | None = None

    def input_schema(self) -> dict[str, Any]:
        schema = self.input_model.model_json_schema()
        schema.pop("title", None)
        return schema


_TOOLS: dict[str, Tool] = {}


def tool(
    *, mutating: bool = False, argv: ArgvFn | None = None
) -> Callable[[Callable[[ToolContext, In], ToolResult]], Callable[[ToolContext, In], ToolResult]]:
    """Register a function as a tool. Its second parameter's type is the input model; `argv`
    says what command line a call would run, so an approval shows (and matches) it."""

    def register(
        fn: Callable[[ToolContext, In], ToolResult],
    ) -> Callable[[ToolContext, In], ToolResult]:
        hints = typing.get_type_hints(fn)
        params = list(inspect.signature(fn).parameters)
        model = hints[params[1]]
        doc = inspect.getdoc(fn) or ""
        known = _TOOLS.get(fn.__name__)
        if known is not None and _origin(known.fn) != _origin(fn):
            # A plugin must not replace a tool whose sandboxing others rely on.
            raise ToolError(
                f"a tool named {fn.__name__!r} exists already ({_origin(known.fn)}); "
                f"rename {_origin(fn)}",
                ErrorKind.CONFIG,
            )
        _TOOLS[fn.__name__] = Tool(fn.__name__, doc, model, fn, mutating, argv)
        return fn

    return register


def _origin(fn: Callable[..., object]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def all_tools() -> dict[str, Tool]:
    """The built-in tools, then those of each plugin in PLUGIN_GROUP that loads."""
    for module in TOOL_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    _load_plugins()
    return dict(_TOOLS)


def plugin_errors() -> dict[str, str]:
    """The plugins that did not load, by entry-point name, each with its error."""
    all_tools()
    return dict(_load_plugins())


@functools.cache
def _load_plugins() -> Mapping[str, str]:
    """Load each entry point of PLUGIN_GROUP once. A plugin that fails adds no tool and is
    reported by name; the built-in tools and the other plugins go on working."""
    failed: dict[str, str] = {}
    for entry in metadata.entry_points(group=PLUGIN_GROUP):
        before = set(_TOOLS)
        try:
            entry.load()
        except Exception as exc:  # third-party code: whatever it raises, it is its failure
            for name in set(_TOOLS) - before:
                del _TOOLS[name]
            failed[entry.name] = f"{entry.value}: {type(exc).__name__}: {exc}"
    return MappingProxyType(failed)


def get_tool(name: str) -> Tool:
    tools = all_tools()
    if name not in tools:
        broken = "".join(f"; plugin {n!r} did not load ({e})" for n, e in plugin_errors().items())
        raise ToolError(
            f"unknown tool {name!r}; available: {', '.join(sorted(tools))}{broken}",
            ErrorKind.INVALID_INPUT,
        )
    return tools[name]


def validation_text(name: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(input)"
        parts.append(f"{loc}: {err['msg']}")
    return f"invalid input for {name}: " + "; ".join(parts)
