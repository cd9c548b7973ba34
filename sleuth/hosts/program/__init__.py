"""Sleuth's own fixed, read-only programs, sent to a host and run there as `python3 -`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

SECRET_RUNNER = (
    "import sys,json;S=json.loads(sys.stdin.readline());"
    "exec(compile(sys.stdin.read(),'<sleuth>','exec'),{'__name__':'__main__','SECRETS':S})"
)
"""`python3 -c SECRET_RUNNER`: reads one JSON line of secrets, then the program, both from
stdin, and runs the program with them as its global SECRETS. Nothing secret is in argv (which
`ps` shows every user on the host) and nothing is written to the host's disk."""


@cache
def program(name: str) -> bytes:
    """The source of one of the programs in this folder, e.g. program("loadgen.py")."""
    return resources.files(__name__).joinpath(name).read_bytes()


def with_secrets(name: str, secrets: Mapping[str, Any]) -> bytes:
    """What SECRET_RUNNER expects on stdin: the secrets as one JSON line, then the program."""
    return json.dumps(dict(secrets), separators=(",", ":")).encode() + b"\n" + program(name)
