"""Tools as typed functions: the input model is the schema, the docstring the description.

```python
class ReadLinesInput(ToolInput):
    path: str = Field(description="File to read")

@tool()
def read_lines(ctx: ToolContext, args: ReadLinesInput) -> ToolResult:
    \"\"\"Read numbered lines of a text file, like `sed -n 'S,Ep'`.\"\"\"
```

`execute` is the one way a tool runs: validate, check policy and approval,
run, cap, and turn every failure into a `ToolResult` the model can act on. A failure
carries its kind; an unexpected exception (a bug) is an `internal` result with its
traceback, never an ordinary failure.
"""

from __future__ import annotations

import importlib
import inspect
import time
import traceback
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sleuth.errors import ErrorKind, HostError
from sleuth.hosts.policy import PolicyError
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest
from sleuth.tools.context import ToolContext
from sleuth.tools.results import ToolError, ToolResult

TOOL_MODULES = (
    "sleuth.tools.files.file_tools",
    "sleuth.tools.checkpoints.checkpoint_tools",
    "sleuth.tools.capacity.capacity_plan",
    "sleuth.tools.environment.env_tools",
    "sleuth.tools.serving.launch",
    "sleuth.tools.serving.status",
    "sleuth.tools.serving.stop",
    "sleuth.tools.bench.run_benchmark",
    "sleuth.tools.bench.compare_benchmarks",
    "sleuth.tools.bench.ab_run",
    "sleuth.tools.bench.slo_search",
)


class ToolInput(BaseModel):
    """Base of every tool's input: the host comes first, and unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")
    host: str = Field("local", description="Name of the host to act on; 'local' always exists.")


In = TypeVar("In", bound=ToolInput)
ToolFn = Callable[[ToolContext, Any], ToolResult]
ArgvFn = Callable[[ToolContext, Any], list[str]]
"""The command line a mutating tool would run for these inputs, shown for approval."""


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
        _TOOLS[fn.__name__] = Tool(fn.__name__, doc, model, fn, mutating, argv)
        return fn

    return register


def all_tools() -> dict[str, Tool]:
    for module in TOOL_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    return dict(_TOOLS)


def get_tool(name: str) -> Tool:
    tools = all_tools()
    if name not in tools:
        raise ToolError(
            f"unknown tool {name!r}; available: {', '.join(sorted(tools))}",
            ErrorKind.INVALID_INPUT,
        )
    return tools[name]


ApprovalHook = Callable[[ApprovalRequest, ApprovalDecision], None]


def execute(
    ctx: ToolContext, name: str, raw: dict[str, Any], *, on_approval: ApprovalHook | None = None
) -> ToolResult:
    """Run one tool call. Never raises for the tool's own failures: they become results.

    `on_approval` hears this call's approval decision (besides `ctx.on_approval`), so a run
    records its approvals without changing a context that others may share.
    """
    start = time.monotonic()
    try:
        spec = get_tool(name)
        args = spec.input_model.model_validate(raw)
        if spec.mutating:
            _approve(ctx, spec, args, on_approval)
        result = spec.fn(ctx, args)
    except ValidationError as exc:
        result = ToolResult.failure(validation_text(name, exc), ErrorKind.INVALID_INPUT)
    except (ToolError, HostError) as exc:
        result = ToolResult.failure(str(exc), exc.kind)
    except Exception as exc:  # a bug in a tool must not end the investigation, nor hide
        result = ToolResult.failure(
            f"internal error in {name} (a bug in Sleuth): {type(exc).__name__}: {exc}",
            ErrorKind.INTERNAL,
            traceback=traceback.format_exc(),
        )
    if not result.duration_s:
        result.duration_s = time.monotonic() - start
    return result


def _approve(
    ctx: ToolContext, spec: Tool, args: ToolInput, on_approval: ApprovalHook | None
) -> None:
    sandbox = ctx.host(args.host)
    sandbox.check_allowed(spec.name)
    request = ApprovalRequest(
        tool=spec.name,
        host=args.host,
        input=args.model_dump(),
        argv=spec.argv(ctx, args) if spec.argv else None,
        rules=sandbox.config.approve,
    )
    decision = ctx.approver(request)
    for hook in (ctx.on_approval, on_approval):
        if hook:
            hook(request, decision)
    if not decision.approved:
        raise PolicyError(
            f"{spec.name} on {args.host!r} was not approved: {decision.reason}",
            ErrorKind.NOT_APPROVED,
        )


def validation_text(name: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(input)"
        parts.append(f"{loc}: {err['msg']}")
    return f"invalid input for {name}: " + "; ".join(parts)
