"""The system prompt every brain is given, as shipped in sleuth/prompts/."""

from __future__ import annotations

from importlib import resources


def system_prompt(compact: bool = False) -> str:
    """The system prompt and the tool guidance, as shipped in sleuth/prompts/."""
    folder = resources.files("sleuth") / "prompts"
    names = ("compact.md",) if compact else ("system.md", "tools.md")
    return "\n\n".join((folder / name).read_text(encoding="utf-8") for name in names)
