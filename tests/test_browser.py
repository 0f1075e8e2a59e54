"""The chapters' charts in a real browser: JupyterLab headless on a free localhost port, Debian's Chromium driven by
Playwright. For each chapter, run all cells, then check that every chart drew marks, that a bound input redraws its
chart, that the console shows no error, and that the page asked nothing of any host but this one."""
import json, os, shutil, time
from pathlib import Path
from urllib.parse import urlparse
import pytest

from conftest import ROOT, lab_server, need as _need

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]   # without these Chromium calls Google's hosts
LAB_SETTINGS = {"@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},   # render every cell, not just the visible ones
                "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
                "@jupyterlab/docmanager-extension:plugin": {"autosave": False}}    # the chapter on disk stays as committed
WIDGET = "application/vnd.jupyter.widget-view+json"
pytestmark = pytest.mark.xdist_group("browser")    # one Chromium at a time on 2 cores

def charts_in(nb:str)->int:
    "How many chart outputs the chapter's committed outputs hold (cells whose output is a `fairneg.charts` widget)."
    cells = json.loads((ROOT / "nbs" / nb).read_text())["cells"]
    return sum(any(WIDGET in o.get("data", {}) for o in c.get("outputs", [])) for c in cells if c["cell_type"] == "code")

DONE_JS = """() => { const p = window.jupyterapp.shell.currentWidget; const k = p?.sessionContext?.session?.kernel;
  if (!k || k.status !== 'idle' || !p.content) return false;
  const cells = p.content.widgets.filter(c => c.model.type === 'code');
  const raised = cells.some(c => Array.from({length: c.model.outputs.length}, (_, i) => c.model.outputs.get(i).type).includes('error'));
  return raised || (cells.length > 0 && cells.every(c => c.model.executionCount !== null && c.promptNode.textContent.indexOf('*') < 0)); }"""
ERRORS_JS = """() => window.jupyterapp.shell.currentWidget.content.widgets.filter(c => c.model.type === 'code')
  .flatMap(c => Array.from({length: c.model.outputs.length}, (_, i) => c.model.outputs.get(i).toJSON()))
  .filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue)"""
MARKS_JS = """() => Array.from(document.querySelectorAll('.jp-OutputArea-output .vega-embed')).map(e =>
  Array.from(e.querySelectorAll('svg g[class*="mark-"]')).reduce((n, g) => n + g.querySelectorAll('path, rect, line, text, circle').length, 0))"""

def run_chapter(page, base, q, nb, timeout_s=420):
    "Open a chapter in JupyterLab, run all its cells, and wait until the kernel is idle with every cell run."
    page.goto(f"{base}/lab/tree/{nb}{q}")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel?.status === 'idle'",
                           timeout=120_000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(DONE_JS, timeout=timeout_s * 1000, polling=1000)

@pytest.mark.parametrize("nb", ["03_reward.ipynb", "02_geometry.ipynb", "04_explorer.ipynb"])
def test_chapter_charts_render_offline_in_jupyterlab(nb, tmp_path):
    _need("Chromium (/usr/bin/chromium)", Path(CHROMIUM).exists())
    try: from playwright.sync_api import sync_playwright, TimeoutError as PlaywrightTimeout
    except ImportError: _need("playwright (the dev extra has it)", False)
    expected, committed = charts_in(nb), (ROOT / "nbs" / nb).read_bytes()
    assert expected > 0, f"{nb}'s committed outputs hold no chart widget: refill them"
    with lab_server(tmp_path, "--LabApp.expose_app_in_browser=True", settings=LAB_SETTINGS) as (base, q), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(120_000)                  # a loaded 2-core machine: JupyterLab is slow to answer
        errors, off_machine = [], []
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        def route(r):
            u = urlparse(r.request.url)
            if u.scheme in ("http", "https", "ws", "wss") and u.hostname not in ("127.0.0.1", "localhost"):
                off_machine.append(r.request.url); return r.abort()
            return r.continue_()
        page.route("**/*", route)
        try:
            run_chapter(page, base, q, nb)
            raised = page.evaluate(ERRORS_JS)
            assert raised == [], f"{nb}: a cell raised: {raised}"
            try: page.wait_for_function(f"() => {{ const m = ({MARKS_JS})(); return m.length >= {expected} && m.every(n => n > 0); }}",
                                        timeout=120_000, polling=500)     # vega draws after it creates the svg
            except PlaywrightTimeout:
                drawn = page.evaluate("() => document.querySelectorAll('.jp-OutputArea-output .vega-embed svg').length")
                pytest.fail(f"{drawn} of {expected} charts drew within 120 s; requests off the machine: {off_machine}; "
                            f"console errors: {errors}")
            marks = page.evaluate(MARKS_JS)
            assert len(marks) == expected, (marks, expected)
            assert all(m > 0 for m in marks), f"a chart drew no marks: {marks}"
            bound = page.locator(".jp-OutputArea-output .vega-embed .vega-bind select")
            if bound.count():                     # a selector bound to a param redraws its chart
                chart = bound.first.locator("xpath=ancestor::div[contains(@class,'vega-embed')]").locator("svg").first
                before = chart.inner_html()
                opts = bound.first.locator("option").all_inner_texts()
                assert len(opts) > 1
                now = bound.first.evaluate("s => s.selectedIndex")
                bound.first.select_option(index=(now + 1) % len(opts))       # another option than the one shown
                page.wait_for_function("([e, b]) => e.innerHTML !== b", arg=[chart.element_handle(), before], timeout=10_000)
            else:
                assert nb not in ("03_reward.ipynb", "04_explorer.ipynb"), f"{nb}: its chart selector is gone"
            page.screenshot(path=str(tmp_path / f"{nb}.png"), full_page=False)
        finally:
            browser.close()
        assert errors == [], f"console errors: {errors}"
        assert off_machine == [], f"requests off the machine: {off_machine}"
    assert (ROOT / "nbs" / nb).read_bytes() == committed, f"the browser run changed nbs/{nb} on disk"
