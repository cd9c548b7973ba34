"""Headless Chromium (Debian's `chromium` package) for tests that check what a page shows."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("needs Debian's chromium: apt-get install -y chromium")
    return found


def rendered_dom(page: Path) -> str:
    """The page's DOM after Chromium has loaded and laid it out."""
    with tempfile.TemporaryDirectory(prefix="sleuth-chromium-") as profile:
        done = subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def screenshot(page: Path, png: Path, size: str = "1400,1800") -> Path:
    with tempfile.TemporaryDirectory(prefix="sleuth-chromium-") as profile:
        subprocess.run(
            [
                chromium(),
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={size}",
                f"--screenshot={png}",
                page.as_uri(),
            ],
            capture_output=True,
            timeout=120,
            check=True,
        )
    return png
