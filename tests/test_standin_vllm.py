"""tests/test_vllm.py run on a CPU against tests/standin_vllm, the stand-in of vLLM's offline API: the GPU test file
itself and VLLMPolicy's handling of vLLM-shaped outputs are checked here, so a GPU session only meets the engine."""
import os, subprocess, sys
from pathlib import Path
import pytest
pytest.importorskip("torch"); pytest.importorskip("xgrammar")

HERE = Path(__file__).parent

def test_vllm_tests_pass_on_the_standin(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE / "standin_vllm"), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-m", "pytest", str(HERE / "test_vllm.py"), "-v", "-p", "no:cacheprovider", "-p", "no:warnings",
                        "--basetemp", str(tmp_path / "t")], env=env, capture_output=True, text=True, timeout=900, cwd=HERE.parent)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert "4 passed" in p.stdout and "skipped" not in p.stdout, p.stdout[-2000:]
