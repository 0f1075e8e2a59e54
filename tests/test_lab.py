"""`make lab`: JupyterLab, started as the Makefile starts it (headless here, on a free localhost port), serves the
chapters and starts a kernel of this venv. (Charts in a browser: tests/test_browser.py.)"""

import sys, urllib.request
from pathlib import Path

from conftest import get_json as _get, lab_server


def test_make_lab_serves_the_chapters_on_this_venv(tmp_path):
    with lab_server(tmp_path) as (base, q):
        nb = _get(f"{base}/api/contents/05_engine_reward.ipynb{q}&content=0")
        assert nb["type"] == "notebook" and nb["name"] == "05_engine_reward.ipynb"
        with urllib.request.urlopen(f"{base}/lab{q}", timeout=10) as r:  # the JupyterLab page itself
            assert r.status == 200 and b"JupyterLab" in r.read()
        specs = _get(f"{base}/api/kernelspecs{q}")["kernelspecs"]
        assert "python3" in specs
        argv0 = specs["python3"]["spec"]["argv"][0]  # the kernel is this venv's python: the native spec's `python`
        assert argv0 == "python" or Path(argv0).parent == Path(sys.executable).parent, (
            argv0
        )  # is the server's own interpreter
        k = _get(f"{base}/api/kernels{q}", "POST", {"name": "python3"})
        try:
            assert k["name"] == "python3" and k["id"]
        finally:
            _get(f"{base}/api/kernels/{k['id']}{q}", "DELETE")
