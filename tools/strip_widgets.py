"""Strip saved widget state from the chapters: `python tools/strip_widgets.py [nbs/X.ipynb ...]` (default: nbs/*.ipynb).

JupyterLab saves every live widget's state into a notebook's metadata (`widgets`) when it saves; nbdev-clean keeps that
key. A chart's widget state is its whole Vega-Lite spec and data again, next to the SVG the chart's output already
holds (fairneg.core.charts): 933 KB of nbs/15_eval_ladder.ipynb's 990 KB were that. A committed output's widget view
(`application/vnd.jupyter.widget-view+json`) points at that state, and without it JupyterLab shows an error where the
SVG would show. This removes both; run the chapter again in JupyterLab for a live chart. `make export` runs it, and CI
fails on a chapter it would change.
"""

from __future__ import annotations
import glob, json, os, sys
from pathlib import Path

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def strip(nb: dict) -> bool:
    "Remove a notebook's saved widget state and its outputs' widget views (where another form is kept); True if changed."
    changed = nb.get("metadata", {}).pop("widgets", None) is not None
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW in data and len(data) > 1:
                del data[WIDGET_VIEW]
                changed = True
    return changed


def main(paths: list) -> int:
    for p in paths or sorted(glob.glob("nbs/*.ipynb")):
        text = Path(p).read_text(encoding="utf-8")
        nb = json.loads(text)
        if strip(nb):
            # nbdev-clean's layout: one-space indent, non-ASCII kept, a final newline; written beside, then moved over
            # the chapter, so a kill or a full disk leaves the old file whole
            tmp = Path(p).with_name(f".{Path(p).name}.strip.tmp")
            tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            os.replace(tmp, p)
            print(f"strip_widgets: {p}: widget state removed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
