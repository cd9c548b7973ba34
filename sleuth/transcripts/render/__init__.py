"""Tell a transcript as a story: the question, each turn's reasoning, the calls, the findings.

    events = load(path).events
    page = render(events, "html")        # one self-contained file
    console.print(render_rich(events))   # the terminal form (render.text)

Every format tells the same `Story` (render.story), built once from the events, through the
one walk over its steps (render.steps) and the phrases they share (render.phrases), so they
agree on what is shown: the verdicts and the summary first, then the turns. Long outputs
are folded; evidence links to the call it quotes. Every format puts `sleuth verify`'s verdict
first (`Banner`: its headline, "NOT VERIFIED" for a transcript that failed). One module per
format: text (rich), markdown, html, json.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sleuth.transcripts.events import Event
from sleuth.transcripts.render.html import render_html
from sleuth.transcripts.render.json import render_json
from sleuth.transcripts.render.markdown import render_markdown
from sleuth.transcripts.render.phrases import Banner
from sleuth.transcripts.render.text import render_text

Renderer = Callable[[Sequence[Event], Banner | None], str]

RENDERERS: dict[str, Renderer] = {
    "text": render_text,
    "md": render_markdown,
    "html": render_html,
    "json": render_json,
}
FORMATS = tuple(RENDERERS)


__all__ = ["FORMATS", "Banner", "render"]


def render(events: Sequence[Event], fmt: str, banner: Banner | None = None) -> str:
    """`fmt` is one of FORMATS."""
    if fmt not in RENDERERS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return RENDERERS[fmt](events, banner)
