"""Which Python interpreter a read-only tool may run without anyone's consent.

A `python` the model names is a program of its choosing, whatever the tool. It runs without
a `commands` rule or a person's yes only when it is the host's configured interpreter, or
one the host itself vouches for: `hosts/program/interpreter_check.py`, run there by the
configured interpreter, resolves and stats the file where it lives (over SSH too): named
python*, outside the roots (the model folders) with the folder it runs from and that
folder's parent (a venv's pyvenv.cfg and site-packages), owned by root or the login user and
writable by no one else, all the way up.

```python
found = vouched(sandbox, "/opt/venv/bin/python")   # InterpreterCheck(trusted=True, ...)
```
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ValidationError

from sleuth.errors import HostError
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.approval import ApprovalDecision
from sleuth.tools.program_run import last_stderr_line


class InterpreterCheck(BaseModel):
    """The host's answer about one interpreter."""

    trusted: bool
    path: str | None = None
    """The file it resolves to on the host."""
    why: str = ""
    """Why it is not trusted."""


def vouched(sandbox: SandboxedHost, python: str) -> InterpreterCheck:
    """The host's judgement of `python`, made there by the configured interpreter; a check
    that cannot run trusts nothing."""
    try:
        run = sandbox.run_program(
            "interpreter_check.py",
            [python, json.dumps(sandbox.config.roots)],
            python=sandbox.config.python,
            timeout=30,
        )
    except HostError as exc:
        return InterpreterCheck(trusted=False, why=f"the host could not check it: {exc}")
    if run.exit_code != 0:
        return InterpreterCheck(
            trusted=False, why=f"the host could not check it: {last_stderr_line(run.stderr)}"
        )
    try:
        return InterpreterCheck.model_validate_json(run.stdout)
    except ValidationError:
        return InterpreterCheck(trusted=False, why="the host's check gave no answer")


def found_on_host(sandbox: SandboxedHost, python: str) -> tuple[ApprovalDecision | None, str]:
    """The decision that lets a read-only call run `python` because the host vouches for it,
    or None and why not."""
    check = vouched(sandbox, python)
    if not check.trusted:
        return None, check.why
    rule = (
        f"interpreter vouched for by host {sandbox.name!r}: {check.path} (named python*, "
        "outside the roots, owned by root or the login user, writable by no one else)"
    )
    return ApprovalDecision(approved=True, by="host", rule=rule), ""
