"""Options and fixtures of the adversarial suite.

- `--deep`: ten times the fuzzing (>= 10,000 examples) and the slow cases.
- `--figures PATH`: write the measured figures (see figures.py) to PATH as JSON.

Both need the suite named on the command line (`pytest tests/adversarial --deep`),
since pytest reads options only from the conftest files it loads first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from . import figures


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sleuth-adversarial")
    group.addoption(
        "--deep", action="store_true", help="adversarial suite: >= 10,000 fuzz examples"
    )
    group.addoption("--figures", metavar="PATH", help="write the adversarial figures as JSON")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "deep: slow adversarial case, only with --deep")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--deep", default=False):
        return
    skip = pytest.mark.skip(reason="slow adversarial case; run with --deep")
    for item in items:
        if "deep" in item.keywords:
            item.add_marker(skip)


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("--figures", default=None)
    if path:
        figures.write(Path(path))


@pytest.fixture(scope="session")
def deep(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--deep", default=False))
