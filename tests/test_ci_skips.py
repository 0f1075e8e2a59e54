"""Under CI=true a skip or xfail fails the run unless tests/conftest.py's CI_ALLOWED_SKIPS lists its reason (#34): a suite
must not pass by skipping. Run on a scratch test folder holding this suite's conftest.py."""

import os, shutil, subprocess, sys
from pathlib import Path

HERE = Path(__file__).parent
SCRATCH = """
import pytest
def test_plain_skip(): pytest.skip("no engine here")
def test_allowed(): pytest.skip("vLLM is installed: tests/test_vllm.py runs on the real engine")
@pytest.mark.xfail(reason="known bug")
def test_xfail(): assert False
@pytest.mark.skipif(True, reason="a marker skip")
def test_marker(): pass
def test_passes(): pass
"""


def run(tmp_path, ci: str | None):
    d = tmp_path / ("ci" if ci else "dev")
    d.mkdir()
    shutil.copy(HERE / "conftest.py", d / "conftest.py")
    (d / "test_scratch.py").write_text(SCRATCH)
    (d / "test_module_skip.py").write_text(
        'import pytest\npytest.importorskip("no_such_module_xyz")\ndef test_x(): pass\n'
    )
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": ci} if ci else {})
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-rA",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "--continue-on-collection-errors",
            "--rootdir",
            str(d),
            str(d),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=d,
    )
    return p.returncode, p.stdout


def test_ci_fails_unlisted_skips(tmp_path):
    rc, out = run(tmp_path, "true")
    assert rc == 1, out
    tail = out.strip().splitlines()[-1]
    assert all(f in tail for f in ("2 failed", "1 passed", "1 skipped", "2 errors")), (
        tail
    )  # a skip and an xfail fail; a marker's and a module's skip error
    for t in ("test_plain_skip", "test_xfail"):
        assert f"FAILED test_scratch.py::{t}" in out, out
    assert "ERROR test_scratch.py::test_marker - CI=true: skipped (a marker skip)" in out, out
    assert "CI=true: skipped (no engine here)" in out and "CI=true: skipped (xfail: known bug)" in out
    assert "ERROR test_module_skip.py - CI=true: skipped (could not import 'no_such_module_xyz'" in out, out
    assert "SKIPPED [1] test_scratch.py:4: vLLM is installed: tests/test_vllm.py runs on the real engine" in out, (
        out
    )  # the listed reason


def test_outside_ci_skips_stay_skips(tmp_path):
    rc, out = run(tmp_path, None)
    assert rc == 0, out
    tail = out.strip().splitlines()[-1]
    assert "1 passed" in tail and "4 skipped" in tail and "1 xfailed" in tail, tail


def test_broken_vllm_is_an_error_not_an_absence(tmp_path):
    "`vllm_on_cpu` decides which real-engine tests run: an installed vLLM that fails to import raises instead of reading as 'no vLLM'."
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")
    (tmp_path / "vllm" / "platforms.py").write_text(
        'raise ImportError("libtorch_cpu.so: cannot open shared object file")\n'
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run(
        [sys.executable, "-c", "from fairneg.llm import vllm_on_cpu; print(vllm_on_cpu())"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode != 0 and "libtorch_cpu.so: cannot open shared object file" in p.stderr, (
        p.stdout,
        p.stderr[-2000:],
    )
