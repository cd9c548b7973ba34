"""pytest plugin: replay recorded investigations in your own tests, and record new ones.

Installed with Sleuth (the `pytest11` entry point), so nothing needs configuring:

```python
from sleuth.testing import replay

def test_the_mtp_answer_still_follows_from_its_evidence():
    result = replay("transcripts/mtp-heads.jsonl")
    assert result.findings == result.recorded_findings

def test_mtp_heads(sleuth_transcript):
    result = sleuth_transcript(
        "mtp-heads", "Does /models/ckpt carry its MTP heads?",
        brain=lambda: PlaybookBrain(), ctx=lambda: build_context(load_settings(), ["gpu1"]),
    )
    assert result.findings[0].verdict == "yes"
```

`pytest --sleuth-record` runs each `sleuth_transcript` investigation for real
(brain and hosts are only built then) and writes `transcripts/<name>.jsonl`;
without the flag the stored transcript is replayed offline, and a divergence
fails the test with its report. `--sleuth-transcripts DIR` moves the folder.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # the plugin loads in every pytest run; keep its import cheap
    from sleuth.agent.protocols import Brain
    from sleuth.agent.replay.compare import ReplayResult
    from sleuth.config import Settings
    from sleuth.tools.context import ToolContext

RECORD_FLAG = "--sleuth-record"
DIR_FLAG = "--sleuth-transcripts"


def replay(path: str | Path, *, live_ctx: ToolContext | None = None) -> ReplayResult:
    """Replay a transcript (offline unless `live_ctx` gives today's hosts); see ReplayResult."""
    from sleuth.agent.replay.run import replay as run_replay

    return run_replay(Path(path), live_ctx=live_ctx)


def record(
    path: Path,
    question: str,
    brain: Brain,
    ctx: ToolContext,
    settings: Settings | None = None,
) -> Path:
    """Run the investigation for real and store its transcript at `path` (replacing it)."""
    from sleuth.agent.session import start_investigation
    from sleuth.config import Settings

    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        run = start_investigation(question, brain, ctx, settings or Settings(), Path(scratch))
        result = run.run()
        shutil.move(result.transcript, path)
    return path


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sleuth", "Sleuth transcripts")
    group.addoption(
        RECORD_FLAG,
        action="store_true",
        help="Run sleuth_transcript investigations for real and rewrite their transcripts.",
    )
    group.addoption(
        DIR_FLAG,
        default="transcripts",
        help="Folder of recorded transcripts, relative to the rootdir (default: transcripts).",
    )


Factory = Callable[[], Any]


@pytest.fixture
def sleuth_replay(request: pytest.FixtureRequest) -> Callable[..., ReplayResult]:
    """`replay`, with relative paths taken from the rootdir."""
    root = Path(str(request.config.rootpath))

    def run(path: str | Path, **kwargs: Any) -> ReplayResult:
        return replay(root / path, **kwargs)

    return run


@pytest.fixture
def sleuth_transcript(request: pytest.FixtureRequest) -> Callable[..., ReplayResult]:
    """`(name, question, brain, ctx, settings=None) -> ReplayResult` for transcripts/<name>.jsonl.

    `brain` and `ctx` are factories (or objects), called only when recording. Replaying, a
    divergence from the recording fails the test with the report of what differed.
    """
    config = request.config
    folder = Path(str(config.rootpath)) / str(config.getoption(DIR_FLAG))
    recording = bool(config.getoption(RECORD_FLAG))

    def run(
        name: str,
        question: str,
        brain: Brain | Factory,
        ctx: ToolContext | Factory,
        settings: Settings | None = None,
    ) -> ReplayResult:
        path = folder / f"{name}.jsonl"
        if recording:
            record(path, question, _built(brain), _built(ctx), settings)
        elif not path.exists():
            pytest.fail(f"{path} does not exist; run `pytest {RECORD_FLAG}` to record it")
        result = replay(path)
        if result.divergence is not None:
            pytest.fail(f"{path} no longer replays:\n{result.divergence.describe()}")
        return result

    return run


def _built(thing: Any) -> Any:
    """A factory (or a class) is called; a brain or context given as is is used as is."""
    factory = isinstance(thing, type) or (callable(thing) and not hasattr(thing, "complete"))
    return thing() if factory else thing
