"""`make docs`: the chapters (nbs/*.ipynb but the run notebooks) as static HTML pages under _docs/, with the code shown
and the charts as the SVG their outputs carry (no kernel, no CDN), an index page from nbs/index.ipynb, and links
between pages (a chapter's `[x](05_engine_metrics.ipynb)` becomes `engine_metrics.html`, as nbdev names its pages).

    python tools/docs.py [--out _docs]

The pages are rendered from the committed outputs (nothing is executed), so `make docs` takes seconds; every page is
checked self-contained (`fairneg.report.check_self_contained`: nothing loaded from outside it)."""

import argparse, html, re
from pathlib import Path
import nbformat
from nbconvert import HTMLExporter
from nbdev.config import nbpath2html
from jinja2 import DictLoader
from fairneg.report import (
    OFFLINE_TEMPLATE,
    check_self_contained,
)  # the report's template: lab without require.js, MathJax, mermaid, widgets

ROOT = Path(__file__).resolve().parents[1]
RUN_NOTEBOOKS = ("train.ipynb", "report.ipynb")  # papermill templates, not chapters
WIDGET = "application/vnd.jupyter.widget-view+json"  # needs a kernel: the page shows the output's SVG instead
DIRECTIVE = re.compile(r"^#\|.*\n?", re.M)
PRE = re.compile(r"<pre\b.*?</pre>", re.S)
NB_LINK = re.compile(r"\]\(([\w./-]+)\.ipynb(#[\w-]+)?\)")
CSS = """<style>
nav.fairneg-nav { font: 14px system-ui, sans-serif; padding: .6em 1em; border-bottom: 1px solid #ddd; background: #fafafa; }
nav.fairneg-nav a { margin-right: 1.2em; }
</style>"""


def page_name(nb: Path) -> str:
    "The page a notebook becomes, as nbdev names it (`00_core_commands.ipynb` -> `core_commands.html`)."
    return nbpath2html(Path(nb.name)).name


def chapters(nbs: Path) -> list[Path]:
    "The notebooks to render: index first, then the chapters in file order."
    nbs_ = sorted(p for p in nbs.glob("*.ipynb") if p.name not in RUN_NOTEBOOKS)
    return sorted(nbs_, key=lambda p: p.name != "index.ipynb")


def title(nb) -> str:
    "The notebook's `# Title`."
    for c in nb.cells:
        if c.cell_type == "markdown" and (m := re.match(r"#\s+(.+)", c.source)):
            return m[1].strip()
    return "fairneg"


def link_pages(text: str) -> str:
    "Markdown links to notebooks point at their pages."
    return NB_LINK.sub(lambda m: f"]({page_name(Path(m[1] + '.ipynb'))}{m[2] or ''})", text)


def prepare(nb):
    "A notebook as its page shows it: no hidden cells, no nbdev directives, no widget views (their SVG stays)."
    cells = []
    for c in nb.cells:
        if c.cell_type == "code":
            if re.search(r"^#\|\s*hide\b", c.source, re.M):
                continue
            c.source = DIRECTIVE.sub("", c.source).strip("\n")
            if not c.source and not c.get("outputs"):
                continue  # a cell of directives only (`#| default_exp`)
            for o in c.get("outputs", []):
                if WIDGET in o.get("data", {}) and len(o["data"]) > 1:
                    del o["data"][WIDGET]
        elif c.cell_type == "markdown":
            c.source = link_pages(c.source)
        cells.append(c)
    nb.cells = cells
    return nb


def nav(pages: list[tuple[str, str]], i: int) -> str:
    "Links to the index and the previous and next pages."
    a = lambda href, text: f'<a href="{href}">{html.escape(text)}</a>'
    parts = [a("index.html", "fairneg: contents")]
    if i > 1:
        parts.append(a(pages[i - 1][0], "← " + pages[i - 1][1]))
    if 0 < i < len(pages) - 1:
        parts.append(a(pages[i + 1][0], pages[i + 1][1] + " →"))
    if i == 0 and len(pages) > 1:
        parts.append(a(pages[1][0], pages[1][1] + " →"))
    return f'<nav class="fairneg-nav">{" ".join(parts)}</nav>'


def render(nbs: Path = ROOT / "nbs", out: Path = ROOT / "_docs") -> list[Path]:
    "Render every chapter to `out`; return the pages written."
    out.mkdir(parents=True, exist_ok=True)
    books = [(p, nbformat.read(p, as_version=4)) for p in chapters(nbs)]
    pages = [(page_name(p), title(nb)) for p, nb in books]
    exp = HTMLExporter(
        template_name="lab",
        extra_loaders=[DictLoader({"fairneg-docs.html.j2": OFFLINE_TEMPLATE})],
        template_file="fairneg-docs.html.j2",
        embed_images=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )  # nbdev-clean keeps no execution counts
    written = []
    for i, (p, nb) in enumerate(books):
        nb.metadata["title"] = f"{pages[i][1]} — fairneg"
        body, _ = exp.from_notebook_node(prepare(nb))
        body = body.replace("<body", CSS + "<body", 1)
        body = re.sub(r"(<body[^>]*>)", lambda m: m[1] + nav(pages, i), body, count=1)
        f = out / pages[i][0]
        check_self_contained(
            PRE.sub("<pre></pre>", body)
        )  # code listings may quote a URL; the browser loads none of them
        f.write_text(body)
        written.append(f)
    return written


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "_docs")
    a = ap.parse_args()
    pages = render(out=a.out)
    print(f"docs: {len(pages)} pages in {a.out} (open {a.out / 'index.html'})")
