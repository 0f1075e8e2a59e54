"""The chapters' charts in a real browser: JupyterLab headless on a free localhost port, Debian's Chromium driven by
Playwright. For each chapter, run all cells, then check that every chart drew marks, that a bound input redraws its
chart, that the console shows no error, and that the page asked nothing of any host but this one."""

import json
from pathlib import Path
from urllib.parse import urlparse
import pytest

from conftest import ROOT, lab_server, need as _need
from fairneg.core.charts import CHART_TEXT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]  # without these Chromium calls Google's hosts
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},  # render every cell, not just the visible ones
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
}  # the chapter on disk stays as committed
pytestmark = pytest.mark.xdist_group("browser")  # one Chromium at a time on 2 cores


def charts_in(nb: str) -> int:
    "How many chart outputs the chapter's committed outputs hold (cells showing a chart of the `fairneg` renderer)."
    cells = json.loads((ROOT / "nbs" / nb).read_text())["cells"]
    chart = lambda o: "".join(o.get("data", {}).get("text/plain", [])) == CHART_TEXT  # its SVG kept, its widget not
    return sum(any(chart(o) for o in c.get("outputs", [])) for c in cells if c["cell_type"] == "code")


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
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel?.status === 'idle'",
        timeout=120_000,
    )
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(DONE_JS, timeout=timeout_s * 1000, polling=1000)


@pytest.mark.parametrize("nb", ["05_engine_reward.ipynb", "04_engine_geometry.ipynb", "06_engine_explorer.ipynb"])
def test_chapter_charts_render_offline_in_jupyterlab(nb, tmp_path):
    _need("Chromium (/usr/bin/chromium)", Path(CHROMIUM).exists())
    try:
        from playwright.sync_api import sync_playwright, TimeoutError as PlaywrightTimeout
    except ImportError:
        _need("playwright (the dev extra has it)", False)
    expected, committed = charts_in(nb), (ROOT / "nbs" / nb).read_bytes()
    assert expected > 0, f"{nb}'s committed outputs hold no chart: refill them"
    with (
        lab_server(tmp_path, "--LabApp.expose_app_in_browser=True", settings=LAB_SETTINGS) as (base, q),
        sync_playwright() as pw,
    ):
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(120_000)  # a loaded 2-core machine: JupyterLab is slow to answer
        errors, off_machine = [], []
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))

        def route(r):
            u = urlparse(r.request.url)
            if u.scheme in ("http", "https", "ws", "wss") and u.hostname not in ("127.0.0.1", "localhost"):
                off_machine.append(r.request.url)
                return r.abort()
            return r.continue_()

        page.route("**/*", route)
        try:
            run_chapter(page, base, q, nb)
            raised = page.evaluate(ERRORS_JS)
            assert raised == [], f"{nb}: a cell raised: {raised}"
            try:
                page.wait_for_function(
                    f"() => {{ const m = ({MARKS_JS})(); return m.length >= {expected} && m.every(n => n > 0); }}",
                    timeout=120_000,
                    polling=500,
                )  # vega draws after it creates the svg
            except PlaywrightTimeout:
                drawn = page.evaluate("() => document.querySelectorAll('.jp-OutputArea-output .vega-embed svg').length")
                pytest.fail(
                    f"{drawn} of {expected} charts drew within 120 s; requests off the machine: {off_machine}; "
                    f"console errors: {errors}"
                )
            marks = page.evaluate(MARKS_JS)
            assert len(marks) == expected, (marks, expected)
            assert all(m > 0 for m in marks), f"a chart drew no marks: {marks}"
            bound = page.locator(".jp-OutputArea-output .vega-embed .vega-bind select")
            if bound.count():  # a selector bound to a param redraws its chart
                chart = bound.first.locator("xpath=ancestor::div[contains(@class,'vega-embed')]").locator("svg").first
                before = chart.inner_html()
                opts = bound.first.locator("option").all_inner_texts()
                assert len(opts) > 1
                now = bound.first.evaluate("s => s.selectedIndex")
                bound.first.select_option(index=(now + 1) % len(opts))  # another option than the one shown
                page.wait_for_function(
                    "([e, b]) => e.innerHTML !== b", arg=[chart.element_handle(), before], timeout=10_000
                )
            else:
                assert nb not in ("05_engine_reward.ipynb", "06_engine_explorer.ipynb"), (
                    f"{nb}: its chart selector is gone"
                )
            page.screenshot(path=str(tmp_path / f"{nb}.png"), full_page=False)
        finally:
            browser.close()
        assert errors == [], f"console errors: {errors}"
        assert off_machine == [], f"requests off the machine: {off_machine}"
    assert (ROOT / "nbs" / nb).read_bytes() == committed, f"the browser run changed nbs/{nb} on disk"


# --- Strings from a run are text in every page fairneg writes (#50 item 7) -------------------------------------------
# Each field of a run that a user controls gets a string that runs if a page writes it as markup: a <script> (which
# also ends any script it is written into) or an <img> whose onerror runs. Opened in Chromium, the page must not run
# it, and must show the whole string as text: an escape that dropped the content fails too.
PAYLOADS = ("<script>window.__pwned=1</script>", '"><img src=x onerror=window.__pwned=1>')


def planted(field: str, k: int = 0) -> str:
    "Payload `k` (of the two), naming the field it is planted in, so that each field's text can be found on the page."
    return f"{PAYLOADS[k % 2]} [{field}]"


PAGE_JS = """() => { document.querySelectorAll('details').forEach(d => d.open = true);
  return {pwned: typeof window.__pwned !== 'undefined', handlers: document.querySelectorAll('[onerror]').length,
          injected: [...document.scripts].filter(s => s.text.trim() === 'window.__pwned=1').length,
          text: document.body.innerText, title: document.title,
          svg: [...document.querySelectorAll('svg text')].map(t => t.textContent),
          options: [...document.querySelectorAll('select option')].map(o => o.textContent)}; }"""
DRAWN_JS = (
    "() => [...document.querySelectorAll('figure.fairneg-chart, .vega-embed')].every(f => f.querySelector('svg'))"
)


def open_page(path: Path, drawn: str = DRAWN_JS) -> dict:
    "What a page shows in Chromium once `drawn` holds (its charts drew; every <details> open), and whether anything ran."
    _need("Chromium (/usr/bin/chromium)", Path(CHROMIUM).exists())
    try:
        from playwright.sync_api import sync_playwright, TimeoutError as PlaywrightTimeout
    except ImportError:
        _need("playwright (the dev extra has it)", False)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, "--host-resolver-rules=MAP * ~NOTFOUND"]
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(path.resolve().as_uri(), wait_until="load")
            try:
                page.wait_for_function(drawn, timeout=60_000, polling=500)
                ok = True
            except PlaywrightTimeout:
                ok = False  # told after what ran: a page a payload broke draws nothing
            return dict(page.evaluate(PAGE_JS), drawn=ok)
        finally:
            browser.close()


def assert_inert(seen: dict, where: str):
    "Nothing planted ran, none of it became an element (an <img> with its onerror, a <script> of its own), charts drew."
    assert not seen["pwned"], f"{where}: a planted string ran"
    assert (seen["handlers"], seen["injected"]) == (0, 0), f"{where}: planted markup became elements"
    assert seen["drawn"], f"{where}: its charts did not draw within 60 s"


def _edit_json(path: Path, fn):
    d = json.loads(path.read_text())
    fn(d)
    path.write_text(json.dumps(d))


def plant_run(root: Path) -> list[str]:
    "Plant a payload in every field of the demo run at `root` that a user controls; return those the page shows as text."
    from fairneg.run.demo import synthetic_steps
    from fairneg.core.store import append_jsonl, read_jsonl, write_json

    shown = []

    def p(field, k, show=True):
        shown.extend([planted(field, k)] if show else [])
        return planted(field, k)

    game = "gen-41003"  # an eval game: renamed in every file that names it (bank, cells, eval)
    new = json.dumps(p("game", 1, show=False))  # shown in the explorer's selector (checked apart)
    for f in [*root.rglob("*.json"), *root.rglob("*.jsonl")]:
        f.write_text(f.read_text().replace(json.dumps(game), new))
    parties = [p("party", 0), p("party 2", 1)]  # the same two party names in every eval game
    for f in (root / "banks" / "eval").glob("gen-*.json"):
        _edit_json(f, lambda g: g["parties"].__setitem__(slice(0, 2), parties))
    gv = p("generator_version", 0)
    for bank in ("eval", "train"):
        m = root / "banks" / bank / "manifest.jsonl"
        m.write_text("".join(json.dumps(dict(r, generator_version=gv)) + "\n" for r in read_jsonl(m)))
    arm = root / "train" / "xss"  # an arm named by its training rows
    append_jsonl(synthetic_steps(p("arm", 0), 0.5, 12, seed=5), arm / "training_steps.jsonl")
    append_jsonl(
        [
            dict(
                event="start",
                segment=1,
                at="2026-01-01T00:00:00Z",
                host=p("host", 1),
                start_step=0,
                changes=[p("changes", 0)],
            ),
            dict(event="end", segment=1, at="2026-01-01T01:00:00Z", end_step=12, ended="complete"),
        ],
        arm / "segments.jsonl",
    )

    def sound(s):
        first, camp = next(iter(s["campaigns"])), p("campaign", 1)
        s["campaigns"] = {(camp if k == first else k): v for k, v in s["campaigns"].items()}
        s["checks"][0]["expect"] = p("check", 0)

    _edit_json(root / "reward_soundness.json", sound)

    def gate(g):
        g["prereg"] = p("prereg", 1)
        next(iter(g["checkpoints"].values()))["clauses"][0].update(id=p("clause", 0), reason=p("reason", 1))

    _edit_json(root / "gate.json", gate)
    rows = read_jsonl(root / "eval_contrasts.jsonl")  # one cell more, on a condition the user named
    cell, cond = p("cell", 0), p("condition", 1)
    append_jsonl(
        [dict(r, cell=cell, condition=cond) for r in rows if r["cell"] == "lam1_step12_primary"],
        root / "eval_contrasts.jsonl",
    )
    write_json(
        root / "dpo" / "xss" / "outcome.json", dict(arm=p("dpo arm", 1), trained=False, reason=p("dpo reason", 0))
    )
    write_json(root / "model.json", dict(spec=p("model", 0), weights_sha256={p("weights", 1): "d" * 64}, pinned=None))
    append_jsonl(
        [
            dict(
                code_version=p("code_version", 1),
                numerics=dict(pinned=True, cpu=p("cpu", 0)),
                lock=dict(lock=p("lock", 0), lock_sha256="f" * 64, matches=True),
            )
        ],
        root / "provenance.jsonl",
    )
    v = dict(
        status="insufficient",
        slope=None,
        lo=None,
        hi=None,
        n=3,
        n_points=3,
        n_games=1,
        yes_rate=0.5,
        z_yes=None,
        z_no=None,
        level=0.95,
        reason=p("validity reason", 1),
    )
    write_json(root / "validity.json", dict(v, by_kind={p("kind", 0): v}))
    return shown


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    "A small demo run (`fairneg.run.demo.demo_run`, as tests/test_report.py's) with a payload in every field a user controls."
    from fairneg.run.demo import demo_run

    root = demo_run(tmp_path_factory.mktemp("planted") / "run", B=200)
    return root, plant_run(root)


@pytest.mark.parametrize("mode", ["svg", "interactive"])
def test_report_shows_planted_strings_as_text(planted_run, mode, tmp_path):
    from fairneg.report import render_report

    root, shown = planted_run
    title = planted("title", 0)
    out = render_report(root, tmp_path / f"report-{mode}.html", title=title, mode=mode)
    seen = open_page(out)
    assert_inert(seen, f"the {mode} report")
    assert [s for s in shown if s not in seen["text"]] == [], "planted strings not shown as text"
    assert seen["title"] == title and title in seen["text"]
    parties = [planted("party", 0), planted("party 2", 1)]
    assert {planted("game", 1), f"1 {parties[0]}", f"2 {parties[1]}"} <= set(seen["options"]), seen["options"]


def test_explorer_page_shows_planted_strings_as_text(tmp_path):
    import dataclasses
    from fairneg.engine.explorer import explorer
    from fairneg.engine.game import save_game, ultimatum_game

    game, parties = planted("game", 0), [planted("party", 0), planted("party 2", 1)]
    save_game(dataclasses.replace(ultimatum_game(), name=game, parties=parties), tmp_path / "game.json")
    out = tmp_path / "explorer.html"
    explorer(tmp_path / "game.json").save(out, inline=True)  # the vega bundle inlined: nothing from a CDN
    seen = open_page(out, "() => !!document.querySelector('.vega-embed svg')")
    assert_inert(seen, "the explorer page")
    labels = [f"1 {parties[0]}", f"2 {parties[1]}"]
    assert seen["options"] == [game, *labels, *labels], seen["options"]  # the game and the two parties' selectors
    caption = f"{game}: x = z of {labels[0]}, y = z of {labels[1]}"
    assert caption in seen["svg"], seen["svg"]  # the line above the plot
