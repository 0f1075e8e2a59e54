"""Shared by the tests that start JupyterLab (tests/test_lab.py, tests/test_browser.py): a JupyterLab server on a free
localhost port, started as `make lab` starts it, with its own runtime, data, config and settings folders."""

import contextlib, json, os, socket, subprocess, sys, time, urllib.request
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
IN_CI = os.environ.get("CI", "").lower() in ("true", "1")  # under CI nothing skips: a missing part fails

# Under CI a skip or an xfail fails the run unless its reason holds one of these, each with why CI may skip it.
CI_ALLOWED_SKIPS = {
    "vLLM is installed: tests/test_vllm.py runs on the real engine": "test_standin_vllm runs test_vllm.py on a stand-in of vLLM's API; where vLLM is installed, test_vllm.py runs on the real engine",
}


def skip_reason(rep) -> str:
    "The reason of a skipped (or xfailed) test or collection report."
    if hasattr(rep, "wasxfail"):
        return f"xfail: {rep.wasxfail}"
    lr = rep.longrepr
    return (str(lr[2]) if isinstance(lr, tuple) and len(lr) == 3 else str(lr)).removeprefix("Skipped: ")


def ci_refusal(rep) -> str | None:
    "Why CI fails this skipped report (None: not skipped, not CI, or an allowed skip)."
    if not (IN_CI and rep.skipped):
        return None
    why = skip_reason(rep)
    if not hasattr(rep, "wasxfail") and any(a in why for a in CI_ALLOWED_SKIPS):
        return None
    return f"CI=true: skipped ({why}); under CI only the skips listed in tests/conftest.py's CI_ALLOWED_SKIPS may pass"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    rep = (yield).get_result()
    if msg := ci_refusal(rep):
        rep.outcome, rep.longrepr = "failed", msg


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    rep = (yield).get_result()  # a module-level skip (importorskip, allow_module_level) is a collection report
    if msg := ci_refusal(rep):
        rep.outcome, rep.longrepr = "failed", msg


def need(what: str, ok: bool):
    "Skip when a part is missing; fail under CI."
    if ok:
        return
    if IN_CI:
        pytest.fail(f"{what} is missing (CI skips nothing)")
    pytest.skip(f"{what} is missing")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str, method: str = "GET", body: dict | None = None):
    req = urllib.request.Request(
        url,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        raw = r.read()
        return json.loads(raw) if raw else None


def need_lab():
    "Skip (fail under CI) where this venv has no JupyterLab."
    need("JupyterLab in this venv (the dev extra has it)", (Path(sys.executable).parent / "jupyter-lab").exists())


@contextlib.contextmanager
def lab_server(tmp_path: Path, *args: str, settings: dict | None = None):
    "JupyterLab on nbs/, headless on a free port: yields (base url, token query). `settings`: {plugin id: its settings}."
    need_lab()
    port, token = free_port(), "fairneg-test"
    sdir = tmp_path / "lab-settings"
    for plugin, s in (settings or {}).items():
        pkg, name = plugin.split(":")
        f = sdir / pkg / f"{name}.jupyterlab-settings"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(s))
    env = dict(
        os.environ,
        JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
        JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"),
        JUPYTERLAB_SETTINGS_DIR=str(sdir),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "ws"),
    )
    p = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "jupyter"),
            "lab",
            "--notebook-dir=nbs",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            "--ServerApp.port_retries=0",
            *(["--allow-root"] if os.geteuid() == 0 else []),
            *args,
        ],
        cwd=ROOT,
        env=env,
        stdout=(log := open(tmp_path / "lab.log", "w")),
        stderr=subprocess.STDOUT,
    )  # a file: a pipe nobody reads would fill and block the server
    base, q = f"http://127.0.0.1:{port}", f"?token={token}"
    try:
        for _ in range(120):
            try:
                get_json(f"{base}/api/status{q}")
                break
            except OSError:
                if p.poll() is not None:
                    pytest.fail("JupyterLab exited: " + (tmp_path / "lab.log").read_text()[-2000:])
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not answer within 60 s")
        yield base, q
    finally:
        p.terminate()
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
        log.close()
