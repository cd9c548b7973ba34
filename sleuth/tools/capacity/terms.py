"""One line of an engine's memory accounting: its value, its arithmetic and its rule."""

from __future__ import annotations

from pydantic import BaseModel


class Term(BaseModel):
    name: str
    bytes: int
    """Per GPU; subtracted from the budget unless the accounting says otherwise."""
    how: str
    """The arithmetic, with the numbers it used."""
    source: str
    """The engine rule it follows: file:line in the installed engine, else the release."""
    estimated: bool = False
    """A measured constant or a model of the engine's allocations, not an exact rule."""
    spread: float = 0.0
    """How far an estimated term may be off, as a share of its value."""
