"""The GPU check's stage runner (bench/gpu_check.sh calls it; not a test): runs a plan of stages one after another, each
in its own process under its own time limit inside one budget, and records each as it ends.

    python bench/gpu_stages.py --plan plan.json --out OUT --budget 400 [--fork]

A plan is a JSON list of stages: `name`, `argv` (a script and its arguments, run with this Python), `limit` (seconds),
`reserve` (seconds kept for the stages after it: its limit is cut to what the budget leaves less that), `env` (extra
variables), `min` (the fewest seconds worth starting it with; default 10) and `when` (a module that must import, else the
stage is skipped). What a stage prints goes to OUT/log.txt as it comes; a line `NAME EXIT SECONDS LIMIT` to
OUT/summary.txt as it ends (exit 124: stopped by its limit); a stage skipped for want of time, `NAME: skipped ...`.

`--fork` (the CPU dry run): the runner imports torch, transformers, peft, trl and fairneg once and forks each stage from
itself, so each stage skips its ~8 s of imports on 2 cores; the stage still runs in its own process (its own limit, its
own exit status, `__main__` as when run alone). Never on a GPU: a process that forks after CUDA is initialized breaks
its children, so the device run starts each stage fresh (the runner refuses to fork once CUDA is initialized).
"""

from __future__ import annotations
import argparse, importlib, importlib.util, json, os, runpy, signal, sys, time, traceback
from pathlib import Path

PRELOAD = (
    "torch",
    "transformers",
    "peft",
    "trl.trainer.utils",
    "xgrammar",
    "fairneg.llm",
    "fairneg.train.grpo",
    "fairneg.play.rollout",
    "fairneg.llm.policies",
    "fairneg.train.adapters",
    "fairneg.engine.bank",
)


def preload() -> list:
    "Import what every stage imports (a failure is the stage's to report); the modules that did not import."
    bad = []
    for m in PRELOAD:
        try:
            importlib.import_module(m)
        except Exception:
            bad.append(m)
    return bad


def start(st: dict, log, fork: bool) -> int:
    "Start a stage in a new process group, its output appended to `log`; its pid."
    env = {k: str(v) for k, v in (st.get("env") or {}).items()}
    if not fork:
        import subprocess

        return subprocess.Popen(
            [sys.executable, *st["argv"]],
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        ).pid
    log.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1  # the child: never returns
    try:
        os.setsid()
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        os.environ.update(env)
        if "TORCH_LOGS" in env and "torch" in sys.modules:  # read from the environment at torch's import: again
            sys.modules["torch"]._logging._internal._init_logs()
        sys.argv = list(st["argv"])
        sys.path[0] = str(Path(st["argv"][0]).resolve().parent)
        runpy.run_path(st["argv"][0], run_name="__main__")
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def wait(pid: int, limit: float, fork: bool) -> int:
    "The stage's exit status; at its limit its process group is stopped (TERM, then KILL 10 s later) and 124 returned."
    t_end, killed = time.monotonic() + limit, None
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if killed:
                return 124
            return os.waitstatus_to_exitcode(status) if status else 0
        now = time.monotonic()
        if killed is None and now >= t_end:
            killed = now
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        elif killed is not None and now >= killed + 10:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


def tail(path: Path, start: int, n: int = 14) -> str:
    "The stage's last lines in the log, less the noise."
    with open(path, "rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    keep = [
        l
        for l in text.splitlines()
        if not any(w in l.lower() for w in ("warn", "loading weights", "it/s]", "s/it]", "usdt:"))
    ]
    return "\n".join(keep[-n:])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget", type=float, required=True, help="seconds all the stages may take, from now")
    ap.add_argument(
        "--fork", action="store_true", help="fork each stage from a runner that imported the libraries once (CPU)"
    )
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    plan = json.loads(a.plan.read_text())
    logp, summ = a.out / "log.txt", a.out / "summary.txt"

    def say(line: str, summary: bool = False):
        print(line, flush=True)
        with open(logp, "a") as f:
            f.write(line + "\n")
        if summary:
            with open(summ, "a") as f:
                f.write(line + "\n")

    fork = a.fork
    if fork:
        bad = preload()
        import torch

        if torch.cuda.is_initialized():
            fork = False
            say("runner: CUDA is initialized here: each stage starts fresh (no fork)")
        say(
            f"runner: libraries imported once in {time.monotonic() - t0:.1f} s, stages forked from it"
            + (f" ({', '.join(bad)} did not import: the stages say why)" if bad else "")
        )
    worst = 0
    for st in plan:
        name, left = st["name"], a.budget - (time.monotonic() - t0)
        if st.get("when"):
            try:
                found = importlib.util.find_spec(st["when"]) is not None
            except Exception:
                found = False
            if not found:
                say(f"{name}: skipped, {st['when']} is not importable here", True)
                continue
        limit = int(min(st["limit"], left - st.get("reserve", 0)))
        if limit < st.get("min", 10):
            say(
                f"{name}: skipped, {max(int(left), 0)} s left of the {a.budget:.0f} s budget "
                f"({st.get('reserve', 0)} s of them kept for the stages after it)",
                True,
            )
            continue
        pos = logp.stat().st_size if logp.exists() else 0
        say(f"== {name} (limit {limit} s): {' '.join(st['argv'])}")
        s0 = time.monotonic()
        with open(logp, "a") as log:
            pid = start(st, log, fork)
            rc = wait(pid, limit, fork)
        secs = int(round(time.monotonic() - s0))
        print(tail(logp, pos), flush=True)
        if rc == 124:
            say(f"== {name}: stopped by its {limit} s limit")
        say(f"== {name}: exit {rc} in {secs} s")
        with open(summ, "a") as f:
            f.write(f"{name} {rc} {secs} {limit}\n")
        worst = worst or rc
    say(f"stages: {time.monotonic() - t0:.0f} s of the {a.budget:.0f} s budget")
    return 1 if worst else 0


if __name__ == "__main__":
    sys.exit(main())
