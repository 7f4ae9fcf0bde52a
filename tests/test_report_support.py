"""Helpers for the report tests: open a page in headless Chromium (Debian's `chromium`), collect what
its console said, dump the DOM after the page's script ran, and check a screenshot is a real picture."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

BROWSER_TIMEOUT_S = 180  # a loaded 2-core machine; only here to stop a hang
# Chromium logs every console message (an uncaught error, a Content-Security-Policy violation, a failed
# load) as `INFO:CONSOLE(...)`; a report page logs nothing of its own, so any such line is a fault.
CONSOLE_MARKS = ("CONSOLE", "Uncaught")


@dataclass(frozen=True, slots=True)
class Loaded:
    dom: str  # the DOM after load and the page's script (--dump-dom)
    console: str  # Chromium's log on stderr, the page's console messages included
    screenshot: Path


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("needs Debian's chromium (`apt-get install chromium`; .ci/run installs it)")
    return found


def _flags(profile: Path) -> list[str]:
    # A profile of its own per test: concurrent Chromiums must not share one.
    return [chromium(), "--headless", "--disable-gpu", "--no-sandbox", f"--user-data-dir={profile}",
            "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0"]  # fmt: skip


def open_page(page: Path, screenshot: Path) -> Loaded:
    profile = screenshot.parent / f".chromium-{screenshot.stem}"
    url = page.resolve().as_uri()
    dumped = subprocess.run(
        [*_flags(profile), "--dump-dom", url], capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S
    )
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    shot = subprocess.run(
        [*_flags(profile), "--hide-scrollbars", "--window-size=1280,1600", f"--screenshot={screenshot}", url],
        capture_output=True,
        text=True,
        timeout=BROWSER_TIMEOUT_S,
    )
    assert shot.returncode == 0 and screenshot.is_file(), shot.stderr[-2000:]
    return Loaded(dumped.stdout, dumped.stderr + shot.stderr, screenshot)


def console_errors(console: str) -> list[str]:
    return [line for line in console.splitlines() if any(mark in line for mark in CONSOLE_MARKS)]


def assert_real_picture(path: Path, min_colours: int = 8) -> tuple[int, int]:
    """The PNG decodes, is not one flat colour, and holds at least min_colours colours; (width, height)."""
    import matplotlib.image
    import numpy as np

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pixels = matplotlib.image.imread(path)
    height, width = pixels.shape[:2]
    flat = pixels.reshape(-1, pixels.shape[2])[:, :3]
    colours = len(np.unique((flat * 255).astype(np.uint8), axis=0))
    assert colours >= min_colours, f"{path}: only {colours} colours, a blank picture"
    background = flat[0]
    assert float(np.mean(np.any(flat != background, axis=1))) > 0.01, f"{path}: almost all one colour"
    return width, height
