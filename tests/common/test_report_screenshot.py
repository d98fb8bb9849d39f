"""The report as a person sees it: index.html rendered by headless Chromium is not blank, every image
loads and the page logs no errors (slow: starts a browser; skipped where no Chromium is installed)."""

from __future__ import annotations

import html as html_mod
import json
import re
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


PROBE = """<script>
window.__errors = [];
window.addEventListener('error', function (e) {
  var t = e.target || {};
  window.__errors.push(t.tagName ? 'failed to load ' + t.tagName + ' ' + (t.alt || t.src || '') : String(e.message));
}, true);
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var bad = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); });
  document.body.setAttribute('data-probe', JSON.stringify({images: imgs.length, errors: window.__errors,
    broken: bad.map(function (i) { return i.alt || i.src.slice(0, 40); })}));
});
</script>"""


def probe_page(page: Path) -> dict:
    """Open ``page`` in headless Chromium with a probe script in its head; return the number of images,
    the broken ones (not loaded or zero-sized), the page's error events and its console messages."""
    browser = find_browser()
    if browser is None:
        pytest.skip("no Chromium found (apt-get install chromium) to open the report")
    probed = page.with_name(f".probe-{page.name}")
    probed.write_text(page.read_text(encoding="utf-8").replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    try:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
               "--virtual-time-budget=10000", "--dump-dom", probed.resolve().as_uri()]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    finally:
        probed.unlink()
    found = re.search(r'data-probe="([^"]*)"', done.stdout)
    if found is None:
        pytest.fail(f"{browser} ran no probe (exit {done.returncode}): {done.stderr[-500:]}")
    result = json.loads(html_mod.unescape(found.group(1)))
    result["console"] = [ln for ln in done.stderr.splitlines() if ":CONSOLE" in ln]
    return result


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


def _report_with_a_glance(fake_env, tmp_path) -> Path:
    from icml24.common.experiment import ClaimCheck
    from icml24.common.registry import get_reproduction

    store = ResultStore(tmp_path / "s.sqlite")
    run_jobs(get_reproduction("fake-sleepy").jobs("smoke"), store, workers=1, scale="smoke")
    r = analyze_paper("fake-sleepy", "smoke", None, store)
    r.analysis.checks.append(ClaimCheck("gain: it wins", "supported", "e", effect=0.2, ci=(0.1, 0.3), n=2))
    return write_report([r, analyze_paper("fake-sleepy", "quick", None, store)], tmp_path / "rep")


def test_every_image_of_the_report_loads_and_the_page_logs_no_errors(fake_env, tmp_path):
    page = _report_with_a_glance(fake_env, tmp_path)
    text = page.read_text()
    for href in re.findall(r"href='(figures/[^']+)'", text):  # the click-to-enlarge links
        assert (page.parent / href).is_file(), href
    result = probe_page(page)
    assert result["images"] == 2  # the claims at a glance and the paper's figure
    assert result["broken"] == [] and result["errors"] == [] and result["console"] == []
    # The probe can fail: a missing image and a console error are seen.
    bad = page.with_name("bad.html")
    bad.write_text(text.replace("<body>", "<body><img alt='gone' src='figures/gone.png'>"
                                "<script>console.error('boom')</script>", 1))  # fmt: skip
    result = probe_page(bad)
    assert result["broken"] == ["gone"] and result["errors"] == ["failed to load IMG gone"]
    assert len(result["console"]) == 1 and "boom" in result["console"][0]
