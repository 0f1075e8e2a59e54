"""`make docs`: every chapter becomes a page under the output folder, with its code shown and its charts as SVG;
nothing on a page loads from outside it; every link between the pages resolves (file and anchor); every page is
reachable from the index."""

import base64, json, re, subprocess, sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlparse
import pytest
from fairneg.report import check_self_contained

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("docs")  # one worker, so the site (~60 s) is built once, not once per worker
sys.path.insert(0, str(ROOT / "tools"))
import docs


class Links(HTMLParser):
    "The hrefs and ids of a page."

    def __init__(self):
        super().__init__()
        self.hrefs, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])


def parse(f: Path) -> Links:
    p = Links()
    p.feed(f.read_text())
    return p


@pytest.fixture(scope="session")  # a worker may run other files' tests between these, ending a module fixture
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs")
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "docs.py"), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # as `make docs` runs it
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"pages in {out}" in r.stdout
    return out


def test_every_chapter_has_a_page_with_its_code_and_charts(site):
    nbs = docs.chapters(ROOT / "nbs")
    assert nbs[0].name == "index.ipynb" and len(nbs) >= 25
    assert not {"train.ipynb", "report.ipynb"} & {p.name for p in nbs}
    for nb in nbs:
        page = site / docs.page_name(nb)
        assert page.is_file(), f"{nb.name}: no page {page.name}"
        html = page.read_text()
        cells = json.loads(nb.read_text())["cells"]
        code = [
            c
            for c in cells
            if c["cell_type"] == "code"
            and not re.search(r"^#\|\s*hide\b", "".join(c["source"]), re.M)
            and (re.sub(r"^#\|.*\n?", "", "".join(c["source"]), flags=re.M).strip() or c.get("outputs"))
        ]
        assert html.count('class="jp-Cell jp-CodeCell') == len(code), f"{page.name}: code cells shown"
        svgs = sum("image/svg+xml" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
        assert html.count('src="data:image/svg+xml;base64,') >= svgs, f"{page.name}: {svgs} chart(s) as SVG"
        assert docs.WIDGET not in docs.PRE.sub("", html), f"{page.name}: a widget view (needs a kernel)"
        check_self_contained(docs.PRE.sub("<pre></pre>", html))


def test_charts_pages_show_their_svg(site):
    html = (site / "engine_explorer.html").read_text()
    svgs = [base64.b64decode(m).decode() for m in re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', html)]
    assert svgs and all(s.lstrip().startswith("<svg") for s in svgs)
    assert any(s.count("<path") > 100 and "mark-symbol" in s for s in svgs)  # the explorer's deals, drawn
    assert "cdn.jsdelivr" not in html


def test_every_link_between_pages_resolves(site):
    pages = {f.name: parse(f) for f in site.glob("*.html")}
    bad, linked = [], set()
    for name, p in pages.items():
        for h in p.hrefs:
            u = urlparse(h)
            if u.scheme or u.netloc or h.startswith("mailto:"):
                continue  # off-site: not ours to resolve
            target = u.path or name
            if target not in pages:
                bad.append(f"{name}: {h} (no page {target})")
                continue
            linked.add(target)
            if u.fragment and u.fragment not in pages[target].ids:
                bad.append(f"{name}: {h} (no #{u.fragment} in {target})")
    assert bad == [], "\n".join(bad)
    index = {urlparse(h).path for h in pages["index.html"].hrefs}
    assert set(pages) - {"index.html"} <= index, (
        f"pages the index does not link: {sorted(set(pages) - index - {'index.html'})}"
    )


def test_a_chapter_link_to_a_notebook_points_at_its_page():
    assert (
        docs.link_pages("see [the reward](05_engine_reward.ipynb#the-reward) and [x](https://a.org/b.ipynb)")
        == "see [the reward](engine_reward.html#the-reward) and [x](https://a.org/b.ipynb)"
    )
    assert docs.page_name(Path("00_core_commands.ipynb")) == "core_commands.html"
