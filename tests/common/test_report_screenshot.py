"""The report as a person sees it: index.html rendered by headless Chromium is not blank, and the
figures are drawn (slow: starts a browser)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from icml24.common.report import analyze_paper, write_report
from icml24.common.runner import run_jobs
from icml24.common.store import ResultStore

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(html: Path, png: Path, width: int = 1280, height: int = 2400) -> Path:
    """Render ``html`` in headless Chromium into ``png``."""
    browser = find_browser()
    if browser is None:
        pytest.skip("no Chromium found (apt-get install chromium) to screenshot the report")
    cmd = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--allow-file-access-from-files",
        f"--window-size={width},{height}", f"--screenshot={png}", html.resolve().as_uri(),
    ]  # fmt: skip
    subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    if not png.exists():
        pytest.fail(f"{browser} wrote no screenshot")
    return png


def ink(png: Path) -> tuple[float, float]:
    """The fraction of pixels that are not near-white, and the fraction that are coloured (not grey)."""
    import matplotlib.image as mpimg

    img = mpimg.imread(png)[..., :3].astype(float)
    not_white = (img < 0.9).any(axis=-1).mean()
    coloured = (img.max(axis=-1) - img.min(axis=-1) > 0.15).mean()
    return float(not_white), float(coloured)


@pytest.mark.slow
def test_report_screenshot_is_not_blank_and_shows_the_figure(fake_env, tmp_path):
    from icml24.common.registry import get_reproduction

    store = ResultStore(tmp_path / "s.sqlite")
    run_jobs(get_reproduction("fake-sleepy").jobs("smoke"), store, workers=1, scale="smoke")
    reports = [analyze_paper("fake-sleepy", "smoke", None, store), analyze_paper("fake-sleepy", "quick", None, store)]
    html = write_report(reports, tmp_path / "rep")
    shot = screenshot(html, tmp_path / "shot.png")
    not_white, coloured = ink(shot)
    assert not_white > 0.02, f"the page is blank ({not_white:.1%} ink)"
    assert coloured > 0.001, "no verdict badge or plot colour on the page"
    # A white page of the same size, for contrast: the check can fail.
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><html><body></body></html>")
    assert ink(screenshot(blank, tmp_path / "blank.png"))[0] < 0.001
    assert np.isfinite(not_white)
