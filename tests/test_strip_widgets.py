"""tools/strip_widgets.py: a chapter's saved widget state and its outputs' widget views go; every other form stays."""

import json, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import strip_widgets

VIEW = strip_widgets.WIDGET_VIEW


def _nb():
    chart = {
        "output_type": "display_data",
        "metadata": {},
        "data": {VIEW: {"model_id": "m1"}, "image/svg+xml": "<svg/>"},
    }
    alone = {"output_type": "display_data", "metadata": {}, "data": {VIEW: {"model_id": "m2"}}}
    cell = {
        "cell_type": "code",
        "id": "a",
        "metadata": {},
        "source": "x",
        "outputs": [chart, alone],
        "execution_count": None,
    }
    meta = {"kernelspec": {"name": "python3"}, "widgets": {"application/vnd.jupyter.widget-state+json": {"state": {}}}}
    return {"cells": [cell], "metadata": meta, "nbformat": 4, "nbformat_minor": 5}


def test_state_and_views_go_other_forms_stay():
    nb = _nb()
    assert strip_widgets.strip(nb)
    assert nb["metadata"] == {"kernelspec": {"name": "python3"}}
    chart, alone = nb["cells"][0]["outputs"]
    assert chart["data"] == {"image/svg+xml": "<svg/>"}  # the SVG shows where the widget had no state
    assert alone["data"] == {VIEW: {"model_id": "m2"}}  # an output with nothing else is left as it is
    assert not strip_widgets.strip(nb)  # a second pass changes nothing


def test_command_rewrites_only_what_it_strips(tmp_path):
    dirty, clean = tmp_path / "dirty.ipynb", tmp_path / "clean.ipynb"
    dirty.write_text(json.dumps(_nb()))
    nb = _nb()
    strip_widgets.strip(nb)
    clean.write_text(text := json.dumps(nb))
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "strip_widgets.py"), str(dirty), str(clean)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert r.stdout == f"strip_widgets: {dirty}: widget state removed\n"
    assert "widgets" not in json.loads(dirty.read_text())["metadata"] and clean.read_text() == text
