"""Sleuth's own fixed, read-only programs, sent to a host and run there as `python3 -`."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def program(name: str) -> bytes:
    """The source of one of the programs in this folder, e.g. program("loadgen.py")."""
    return resources.files(__name__).joinpath(name).read_bytes()
