"""What the pinned numerics cost (a benchmark, not a test): the same work pinned and native, side by side, in one run.

    .venv/bin/python bench/bench_numerics.py                 # 2 rounds of each workload, pinned and native alternating
    .venv/bin/python bench/bench_numerics.py --rounds 3 --only build

Every `fairneg` command runs pinned (`fairneg.core.numerics`: torch's baseline kernels, MKL's SSE2 branch, OpenBLAS's generic
kernels, glibc's generic maths, two threads), so that any x86-64 machine computes the same numbers; `FAIRNEG_NUMERICS=
native` gives each library its fastest path for this CPU instead. Workloads, each run as a whole command:

- `matmul`: the pilot model's largest product, a prompt batch through an MLP projection (14,400 × 256 by 256 × 768,
  float32: `torch.nn.functional.linear`), 20 times, in a child process under each mode (no correctness check: the
  modes are meant to differ);
- `build`: `fairneg model build-tiny --size test` (data, tokenizer, 64 SFT steps, held-out generation);
- `pilot`: the reduced pilot of tests/test_pilot_repro.py (banks, soundness, a 2-step GRPO arm, pairs, a DPO arm, eval
  cells on primary and ultimatum, analysis), with its model already built.

Printed: each workload's wall seconds per round, the median of each mode, and the ratio pinned / native. Correctness
beside the cost: every pinned build must give the test size's pinned weights (`fairneg.llm.tiny.PINNED_BUILDS`), and both
pinned pilots the same eval.json (exit 1 when either is not so). There is no speed target: the figures say what the
pins cost on this machine.
"""

from __future__ import annotations
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAIRNEG = str(Path(sys.executable).parent / "fairneg")
MODES = {"pinned": {}, "native": {"FAIRNEG_NUMERICS": "native"}}


def timed(cmd: list, cwd: Path, env: dict) -> float:
    "Wall seconds of a command (it must succeed)."
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return time.perf_counter() - t


MATMUL = (
    "import time, torch; torch.manual_seed(0); x, w = torch.randn(14400, 256), torch.randn(768, 256); "
    "torch.nn.functional.linear(x, w); t = time.perf_counter()\n"
    "for _ in range(20): torch.nn.functional.linear(x, w)\n"
    "print(time.perf_counter() - t)"
)


def matmul(work: Path, mode: str, k: int) -> tuple[float, str]:
    "The product's seconds for 20 calls, in a child process of the mode (pinned: under `python -m fairneg.core.numerics`)."
    pre = [] if mode == "native" else [sys.executable, "-m", "fairneg.core.numerics"]
    r = subprocess.run(
        [*pre, sys.executable, "-c", MATMUL],
        env={**os.environ, **MODES[mode]},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(r.stdout.split()[-1]), ""


def build(work: Path, mode: str, k: int) -> tuple[float, str]:
    "One test-size build into a fresh folder: (seconds, weights sha256)."
    out = work / f"build-{mode}-{k}"
    s = timed([FAIRNEG, "model", "build-tiny", "--size", "test", "--out", str(out), "--no-progress"], work, MODES[mode])
    return s, json.loads((out / "build_report.json").read_text())["weights_sha256"]


def pilot(work: Path, mode: str, k: int) -> tuple[float, str]:
    "One reduced pilot in a fresh folder: (seconds, its eval.json without the time it was analyzed)."
    sys.path.insert(0, str(ROOT / "tests"))
    import yaml, test_pilot_repro as T

    d = work / f"pilot-{mode}-{k}"
    d.mkdir()
    (d / "p.yaml").write_text(yaml.safe_dump(T.PARAMS))
    s = timed([FAIRNEG, "pilot", "--params", "p.yaml", "--no-progress", "--only", *T.STAGES], d, MODES[mode])
    ev = json.loads((d / "run" / "eval.json").read_text())
    ev.pop("analyzed_at")
    return s, json.dumps(ev, sort_keys=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="rounds of each workload in each mode")
    ap.add_argument("--only", choices=["matmul", "build", "pilot"], nargs="*", default=["matmul", "build", "pilot"])
    a = ap.parse_args()
    from fairneg.llm.tiny import pinned_build, tiny_path
    from fairneg.core.numerics import cpu_model

    tiny_path("test", progress=False)  # the pilots' model, built (pinned) once
    subprocess.run(
        [sys.executable, "-c", "from fairneg.llm.tiny import tiny_path; tiny_path('test', progress=False)"],
        env={**os.environ, **MODES["native"]},
        check=True,
    )  # and the native recipe's, for native pilots
    work, ok, rows = Path(tempfile.mkdtemp(prefix="bench_numerics.")), True, []
    print(f"{cpu_model()}, {os.cpu_count()} cores; {a.rounds} rounds, pinned and native alternating")
    for w in a.only:
        fn, secs, outs = (
            {"matmul": matmul, "build": build, "pilot": pilot}[w],
            {m: [] for m in MODES},
            {m: [] for m in MODES},
        )
        for k in range(a.rounds):
            for m in MODES:
                s, o = fn(work, m, k)
                secs[m].append(s)
                outs[m].append(o)
                print(f"  {w} round {k + 1} {m}: {s:.1f} s", flush=True)
        med = {m: statistics.median(v) for m, v in secs.items()}
        rows.append((w, med["pinned"], med["native"], med["pinned"] / med["native"]))
        if w == "matmul":
            same = True
        elif w == "build":
            same = all(x == pinned_build("test")["weights"] for x in outs["pinned"])
            print(f"  {w}: every pinned build gave the pinned weights: {'PASS' if same else 'FAIL'}")
        else:
            same = len(set(outs["pinned"])) == 1
            print(f"  {w}: every pinned run gave one eval.json: {'PASS' if same else 'FAIL'}")
        ok &= same
    print(f"\n{'workload':<10}{'pinned s':>10}{'native s':>10}{'pinned/native':>15}")
    for w, p, n, r in rows:
        print(f"{w:<10}{p:>10.1f}{n:>10.1f}{r:>14.2f}x")
    shutil.rmtree(work, ignore_errors=True)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
