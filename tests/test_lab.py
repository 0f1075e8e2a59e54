"""`make lab`: JupyterLab, started as the Makefile starts it (headless here, on a free localhost port), serves the
chapters and starts a kernel of this venv. (Charts in a browser: not yet tested, see #17.)"""
import json, os, socket, subprocess, sys, time, urllib.request
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]

def _free_port()->int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]

def _get(url:str, method:str="GET", body:dict|None=None):
    req = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        raw = r.read()
        return json.loads(raw) if raw else None

def test_make_lab_serves_the_chapters_on_this_venv(tmp_path):
    lab = Path(sys.executable).parent / "jupyter"
    if not (Path(sys.executable).parent / "jupyter-lab").exists():
        if os.environ.get("CI"): pytest.fail("JupyterLab is not installed in this venv (the dev extra has it)")
        pytest.skip("JupyterLab is not installed in this venv")
    port, token = _free_port(), "fairneg-test"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"), JUPYTER_DATA_DIR=str(tmp_path / "data"),
               JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"))
    p = subprocess.Popen([str(lab), "lab", "--notebook-dir=nbs", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
                          f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0",
                          *(["--allow-root"] if os.geteuid() == 0 else [])],       # as the Makefile adds it
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base, q = f"http://127.0.0.1:{port}", f"?token={token}"
    try:
        for _ in range(120):
            try: _get(f"{base}/api/status{q}"); break
            except OSError:
                if p.poll() is not None: pytest.fail("JupyterLab exited: " + p.stdout.read()[-2000:])
                time.sleep(0.5)
        else: pytest.fail("JupyterLab did not answer within 60 s")
        nb = _get(f"{base}/api/contents/03_reward.ipynb{q}&content=0")
        assert nb["type"] == "notebook" and nb["name"] == "03_reward.ipynb"
        with urllib.request.urlopen(f"{base}/lab{q}", timeout=10) as r:       # the JupyterLab page itself
            assert r.status == 200 and b"JupyterLab" in r.read()
        specs = _get(f"{base}/api/kernelspecs{q}")["kernelspecs"]
        assert "python3" in specs
        argv0 = specs["python3"]["spec"]["argv"][0]        # the kernel is this venv's python: the native spec's `python`
        assert argv0 == "python" or Path(argv0).parent == Path(sys.executable).parent, argv0   # is the server's own interpreter
        k = _get(f"{base}/api/kernels{q}", "POST", {"name": "python3"})
        try:
            assert k["name"] == "python3" and k["id"]
        finally:
            _get(f"{base}/api/kernels/{k['id']}{q}", "DELETE")
    finally:
        p.terminate()
        try: p.wait(timeout=20)
        except subprocess.TimeoutExpired: p.kill()
