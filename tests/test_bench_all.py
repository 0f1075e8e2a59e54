"""`make bench` (tools/bench_all.sh) runs every benchmark to its end and fails at the end listing each one that missed (#34)."""

import os, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_script_runs_and_misses_are_listed(tmp_path):
    scripts = {
        "a_pass.py": "print('figure 1: PASS')",
        "b_miss.py": "print('target: FAIL'); raise SystemExit(1)",
        "c_crash.py": "raise RuntimeError('boom')",
        "d_pass.py": "print('figure 4: PASS')",
    }
    for n, src in scripts.items():
        (tmp_path / n).write_text(src + "\n")
    p = subprocess.run(
        ["bash", str(ROOT / "tools" / "bench_all.sh"), *(str(tmp_path / n) for n in scripts)],
        env=dict(os.environ, PY=sys.executable),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert "figure 1: PASS" in p.stdout and "figure 4: PASS" in p.stdout  # the scripts after a miss still ran
    last = p.stdout.strip().splitlines()[-1]
    assert (
        last.startswith("make bench: 2 of 4 missed a target or failed:")
        and "b_miss.py (exit 1)" in last
        and "c_crash.py (exit 1)" in last
    ), last
    assert "a_pass.py (exit" not in last and "d_pass.py (exit" not in last


def test_all_met(tmp_path):
    (tmp_path / "ok.py").write_text("print('PASS')\n")
    p = subprocess.run(
        ["bash", str(ROOT / "tools" / "bench_all.sh"), str(tmp_path / "ok.py")],
        env=dict(os.environ, PY=sys.executable),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0 and p.stdout.strip().endswith("make bench: all 1 met their targets"), p.stdout
