"""`fairneg eval launch --submit --cluster slurm` on a real Slurm: the single-node cluster of `tools/slurm.sh start`
(or the one SLURM_CONF names). Cell jobs played through Slurm give the eval.json of the same launch run here; a cell
job that raises is reported by `launch` with its log and named by `analyze`; a cancelled job is reported, and a
relaunch completes only the missing cell, leaving the finished one untouched.

Where no cluster answers these tests skip; under CI=true (.ci/run starts the cluster) they fail instead."""

import json, os, shutil, subprocess, time
from pathlib import Path
import pytest
from typer.testing import CliRunner
from fairneg.engine.bank import write_bank
from fairneg.cli import app
from fairneg.core.jobs import SLURM_ALIVE, slurm_states, wait_jobs
from fairneg.engine.game import generate_game
from fairneg.core.store import read_jsonl
from fairneg.core.store import read_json

from conftest import IN_CI

try:
    import submitit
except ImportError:
    if IN_CI:
        raise
    pytest.skip("needs submitit (the llm extra)", allow_module_level=True)
TOOLS_CONF = Path(os.environ.get("FAIRNEG_SLURM_DIR", "/tmp/fairneg-slurm")) / "slurm.conf"  # written by tools/slurm.sh
pytestmark = pytest.mark.xdist_group("slurm")  # one worker: the tests share a small cluster
runner = CliRunner()

AGENTS = ["--checkpoint", "fair=agent:fairness_oracle", "--base", "agent:oracle_omniscient", "--episodes", "2"]
SUBMIT = ["--submit", "--cluster", "slurm", "--cpus", "1", "--timeout-min", "10"]  # one CPU: fits any node


def cli(*args):
    return runner.invoke(app, ["eval", *map(str, args)])


def _slurm_conf() -> str | None:
    "The slurm.conf the client commands read: SLURM_CONF when set, else tools/slurm.sh's when it is running."
    return os.environ.get("SLURM_CONF") or (str(TOOLS_CONF) if TOOLS_CONF.is_file() else None)


def _unreachable(conf) -> str | None:
    "Why no cluster can take jobs (None when one can)."
    if not shutil.which("sbatch"):
        return "no sbatch on PATH"
    env = dict(os.environ, **({"SLURM_CONF": conf} if conf else {}))
    try:
        p = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"sinfo: {e}"
    if p.returncode:
        return f"sinfo: {(p.stderr.strip().splitlines() or [p.returncode])[-1]}"
    if not {s.strip("*~#") for s in p.stdout.split()} & {"idle", "mixed", "allocated"}:
        return f"no node up (sinfo: {p.stdout.strip()})"
    return None


@pytest.fixture(scope="module")
def slurm():
    "A reachable cluster, its SLURM_CONF in the environment the jobs inherit; skip (fail under CI=true) without one."
    conf = _slurm_conf()
    why = _unreachable(conf)
    if why:
        msg = f"no Slurm cluster: {why} (start one with `tools/slurm.sh start`)"
        pytest.fail(f"CI=true: {msg}") if IN_CI else pytest.skip(msg)
    with pytest.MonkeyPatch.context() as mp:
        if conf:
            mp.setenv("SLURM_CONF", conf)
        yield conf


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    d = tmp_path_factory.mktemp("bank")
    write_bank([generate_game(s) for s in (41000, 41001, 41002)], d)
    return d


def _sbatch(*args) -> str:
    return (
        subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True, check=True)
        .stdout.strip()
        .split(";")[0]
    )


def _ended(ids, timeout: float = 60) -> dict:
    "Slurm's states of the jobs once none is still running (a job writes its result a moment before it ends)."
    t = time.monotonic()
    while True:
        states = slurm_states(ids) or {}
        if not set(states.values()) & set(SLURM_ALIVE) or time.monotonic() - t > timeout:
            return states
        time.sleep(0.5)


def _eval_json(path) -> dict:
    return {k: v for k, v in json.loads(Path(path).read_text()).items() if k != "analyzed_at"}


def test_slurm_launch_matches_local(tmp_path, bank, slurm):
    "Two cells played as Slurm jobs give the eval.json the same launch gives run here."
    cells = ["--cells", "ultimatum", "primary", "--bank", bank]
    t0 = time.monotonic()
    r = cli("launch", *AGENTS, *cells, "--out-dir", tmp_path / "slurm", *SUBMIT, "--wait")
    assert r.exit_code == 0, r.output
    jobs = read_jsonl(tmp_path / "slurm" / "launch.jsonl")
    assert [(j["cell"], j["executor"]) for j in jobs] == [("fair_ultimatum", "slurm"), ("fair_primary", "slurm")]
    for j in jobs:
        assert f"[{j['cell']}] submitted job {j['job_id']} (slurm; logs: {j['log']})" in r.output
        assert (tmp_path / "slurm" / "submitit" / f"{j['job_id']}_0_result.pkl").is_file()
    ids = [str(j["job_id"]) for j in jobs]
    assert _ended(ids) == {
        i: "COMPLETED" for i in ids
    }  # Slurm ran both to completion (tools/slurm.sh keeps ended jobs an hour)
    print(f"slurm launch: {time.monotonic() - t0:.1f} s")
    r = cli("launch", *AGENTS, *cells, "--out-dir", tmp_path / "local")
    assert r.exit_code == 0, r.output
    for k in ("slurm", "local"):
        r = cli("analyze", "--run-dir", tmp_path / k, "--out", tmp_path / f"{k}.json", "--b", 200)
        assert r.exit_code == 0, r.output
    s, here = _eval_json(tmp_path / "slurm.json"), _eval_json(tmp_path / "local.json")
    assert sorted(s["cells"]) == ["fair_primary", "fair_ultimatum"] and s["cells"]["fair_primary"]["n_episodes"] == 6
    assert s == here


def test_failed_job_reported_with_its_log(tmp_path, slurm):
    """A job sbatch refuses is one line, not a traceback. A cell job that raises: launch names it with its log and exits 2,
    the other cell completes, analyze names the missing cell."""
    out = tmp_path / "eval"
    r = cli("launch", *AGENTS, "--cells", "ultimatum", "--out-dir", tmp_path / "big", *SUBMIT, "--cpus", 100_000)
    assert (
        r.exit_code == 2
        and "error: [fair_ultimatum] could not be submitted (slurm): sbatch: error: Batch job submission failed"
        in r.output
    ), r.output
    assert "Traceback" not in r.output and not (tmp_path / "big" / "launch.jsonl").exists()
    r = cli(
        "launch",
        "--checkpoint",
        "good=agent:fairness_oracle",
        "bad=py:fairneg_no_such_module:make",
        "--base",
        "agent:oracle_omniscient",
        "--cells",
        "ultimatum",
        "--episodes",
        2,
        "--out-dir",
        out,
        *SUBMIT,
        "--wait",
    )
    assert r.exit_code == 2, r.output
    rows = {j["cell"]: j for j in read_jsonl(out / "launch.jsonl")}
    bad, log = rows["bad_ultimatum"], rows["bad_ultimatum"]["log"]
    assert (
        f"[bad_ultimatum] job {bad['job_id']} failed: fairneg.llm.policies.PolicyError: `py:fairneg_no_such_module:make`: "
        f"cannot import the factory (No module named 'fairneg_no_such_module') (logs: {log})"
    ) in r.output, r.output
    assert "fairneg_no_such_module" in Path(log).read_text()  # the log it names holds the traceback
    assert "1 of 2 cell jobs failed (bad_ultimatum; each log is named above)" in r.output
    assert "[good_ultimatum] {'cell': 'good_ultimatum'" in r.output
    r = cli("analyze", "--run-dir", out, "--out", tmp_path / "e.json", "--b", 100)
    assert r.exit_code == 2 and "1 cell(s) not complete: bad_ultimatum (no trained/episodes.jsonl" in r.output, r.output
    assert f"job {bad['job_id']}, logs: {log}" in r.output and not (tmp_path / "e.json").exists()


def test_cancelled_job_relaunch_completes_only_the_missing_cell(tmp_path, slurm):
    "A job cancelled in the queue is reported as such; the relaunch submits only its cell and leaves the finished one alone."
    out = tmp_path / "eval"
    launch = ["launch", *AGENTS, "--cells", "ultimatum", "divide_dollar", "--out-dir", out, *SUBMIT]
    blocker = _sbatch(
        "--cpus-per-task=1", "--output=/dev/null", "--wrap", "sleep 300"
    )  # holds the cell jobs in the queue
    try:
        r = cli(*launch, "--slurm", f"dependency=afterany:{blocker}")  # a Slurm launch does not wait by default
        assert r.exit_code == 0, r.output
        ids = {j["cell"]: j["job_id"] for j in read_jsonl(out / "launch.jsonl")}
        assert slurm_states(ids.values()) == {i: "PENDING" for i in ids.values()}
        r = cli(*launch)  # queued jobs are not submitted twice
        assert (
            r.exit_code == 0
            and f"[fair_divide_dollar] job {ids['fair_divide_dollar']} still pending: not submitted again" in r.output
        ), r.output
        assert len(read_jsonl(out / "launch.jsonl")) == 2
        subprocess.run(["scancel", ids["fair_divide_dollar"]], check=True)
        # without accounting storage only squeue tells that it ended: it is reported, not waited for
        res, failed = wait_jobs(
            [("fair_divide_dollar", submitit.SlurmJob(out / "submitit", ids["fair_divide_dollar"]))],
            echo=print,
            states=slurm_states,
            grace=1,
            poll=0.5,
        )
        assert not res and "it ended without a result (CANCELLED: cancelled" in failed["fair_divide_dollar"], failed
    finally:
        subprocess.run(["scancel", blocker], check=True)
    res, failed = wait_jobs(
        [("fair_ultimatum", submitit.SlurmJob(out / "submitit", ids["fair_ultimatum"]))],
        echo=print,
        states=slurm_states,
        poll=0.5,
    )  # the blocker gone, the other cell runs
    assert not failed and res["fair_ultimatum"]["cell"] == "fair_ultimatum"
    done = {p: p.stat().st_mtime_ns for p in (out / "fair_ultimatum").rglob("*") if p.is_file()}
    assert not (out / "fair_divide_dollar").exists()  # cancelled before it started

    r = cli(*launch, "--wait")
    assert r.exit_code == 0, r.output
    assert f"[fair_ultimatum] complete already ({out / 'fair_ultimatum'}): not submitted" in r.output
    jobs = read_jsonl(out / "launch.jsonl")
    assert [j["cell"] for j in jobs] == ["fair_ultimatum", "fair_divide_dollar", "fair_divide_dollar"]
    assert jobs[-1]["job_id"] != ids["fair_divide_dollar"]
    assert {p: p.stat().st_mtime_ns for p in (out / "fair_ultimatum").rglob("*") if p.is_file()} == done  # untouched
    r = cli("analyze", "--run-dir", out, "--out", tmp_path / "e.json", "--b", 100)
    assert r.exit_code == 0, r.output
    assert sorted(json.loads((tmp_path / "e.json").read_text())["cells"]) == ["fair_divide_dollar", "fair_ultimatum"]


# ---- training arms as Slurm jobs (`fairneg train --submit`) ----

TRAIN = [
    "--model",
    "tiny-test",
    "--groups",
    "2",
    "--k",
    "2",
    "--max-new-tokens",
    "80",
    "--max-turns",
    "3",
    "--lr",
    "1e-3",
    "--transcript-every",
    "1",
    "--scratchpad-chars",
    "16",
    "--message-chars",
    "16",
    "--no-progress",
]

STEPS = 6  # an arm's steps: room for a signal sent after the first one to land before the last (each takes ~0.5 s here)


def train(*args):
    return runner.invoke(app, ["train", *map(str, args)])


def checkpoints(out):
    from fairneg.train.adapters import checkpoints

    return checkpoints(out)


def read_segments(out):
    from fairneg.train.adapters import read_segments

    return read_segments(out)


@pytest.fixture(scope="module")
def train_bank(tmp_path_factory):
    from fairneg.engine.bank import generate_bank

    d = tmp_path_factory.mktemp("train_bank")
    generate_bank(n_games=3, seed_offset=40000, modes=("private",), out=d, progress=False)
    return d


@pytest.fixture(scope="module")
def uninterrupted(train_bank, tmp_path_factory):
    "The arm trained here, start to end, in one go: what every interrupted job must end as."
    out = tmp_path_factory.mktemp("ref") / "lam0"
    r = train(*TRAIN, "--bank", train_bank, "--steps", STEPS, "--checkpoint-steps", STEPS, "--out", out)
    assert r.exit_code == 0, r.output
    return out


def _same_arm(a, b):
    "Two arm folders hold the same steps and the same final adapter (what a machine measured aside)."
    from safetensors.torch import load_file
    from fairneg.core.store import step_differences

    ra, rb = read_jsonl(a / "training_steps.jsonl"), read_jsonl(b / "training_steps.jsonl")
    assert [r["step"] for r in rb] == [r["step"] for r in ra] == list(range(1, STEPS + 1))  # none missing, none twice
    assert [step_differences(x, y) for x, y in zip(ra, rb)] == [[]] * STEPS
    wa, wb = (
        load_file(str(a / f"checkpoint-{STEPS}" / "adapter_model.safetensors")),
        load_file(str(b / f"checkpoint-{STEPS}" / "adapter_model.safetensors")),
    )
    assert wa.keys() == wb.keys() and all(wa[k].equal(wb[k]) for k in wa)


def _until(pred, timeout: float, what: str, poll: float = 0.5):
    t = time.monotonic()
    while not pred():
        if time.monotonic() - t > timeout:
            raise AssertionError(f"waited {timeout:.0f} s for {what}")
        time.sleep(poll)


def _steps(out) -> int:
    p = out / "training_steps.jsonl"
    return len(read_jsonl(p)) if p.is_file() else 0


def _job_id(out) -> str:
    return read_jsonl(out / "jobs.jsonl")[-1]["job_id"]


def _start_now(job):
    """Slurm holds a requeued job about two minutes (its BeginTime, AuthInfo's cred_expire); let it start sooner (the
    requeue itself is Slurm's). Not within the second its old run's credential was revoked: slurmd refuses a credential
    issued in that second ("Job credential revoked") and the job ends FAILED. The job is PENDING only after the revoke."""
    time.sleep(2)
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)


def test_warned_arm_stops_checkpoints_requeues_and_ends_as_uninterrupted(tmp_path, train_bank, uninterrupted, slurm):
    """USR1 mid-run (what `--signal=USR1@<s>` sends before the time limit): the job finishes its step, writes that step's
    checkpoint (not a scheduled one), requeues itself, and the requeued job ends the arm as the uninterrupted run did."""
    out = tmp_path / "lam0"
    r = train(*TRAIN, "--bank", train_bank, "--steps", STEPS, "--checkpoint-steps", STEPS, "--out", out, *SUBMIT)
    assert r.exit_code == 0 and "[lam0] submitted job" in r.output, r.output
    job = _job_id(out)
    _until(lambda: _steps(out) >= 1, 300, "the job's first step", poll=0.1)
    subprocess.run(["scancel", "--signal=USR1", job], check=True)
    _until(lambda: (slurm_states([job]) or {}).get(job) in ("PENDING", "COMPLETED"), 120, "the job to requeue")
    if slurm_states([job])[job] == "PENDING":
        _start_now(job)
    ended = _ended([job], timeout=300)
    log = (out / "submitit" / f"{job}_0_log.err").read_text()
    assert ended == {job: "COMPLETED"}, (ended, log)
    assert (
        "received SIGUSR1: stopping at the next safe point" in log
        and f"requeuing job {job} (lam0 stopped after step" in log
    ), log
    stopped = int(log.split("lam0 stopped after step ")[1].split()[0])
    assert 1 <= stopped < STEPS and f"lam0: resuming from checkpoint-{stopped} of {STEPS}" in log, log
    assert (out / f"checkpoint-{stopped}").is_dir()  # written at the stop: only the last step is scheduled
    segs = read_segments(out)  # two sessions of one job, the second resumed exactly
    assert [(s["start_step"], s["optimizer"], s["end_step"], s["ended"], s["slurm_job"]) for s in segs] == [
        (0, "fresh", stopped, "stopped on SIGUSR1", job),
        (stopped, "exact", STEPS, "complete", job),
    ], segs
    _same_arm(uninterrupted, out)
    r = train(*TRAIN, "--bank", train_bank, "--steps", STEPS, "--checkpoint-steps", STEPS, "--out", out, *SUBMIT)
    assert r.exit_code == 0 and f"lam0: complete already at step {STEPS} ({out}): nothing submitted" in r.output, (
        r.output
    )
    assert len(read_jsonl(out / "jobs.jsonl")) == 1


def test_queued_arm_refuses_a_second_writer_and_a_killed_job_resumes_on_submit(
    tmp_path, train_bank, uninterrupted, slurm
):
    """While an arm's job is queued, neither a second submit nor a local run starts (two writers). A job cancelled while
    it runs (scancel: SIGTERM, then SIGKILL after Slurm's KillWait) stays cancelled (it does not requeue itself), having
    checkpointed the step it was in if it could finish it in time; the next submit resumes from its newest checkpoint
    and ends the arm as the uninterrupted run did."""
    out = tmp_path / "lam0"
    args = [*TRAIN, "--bank", train_bank, "--steps", STEPS, "--checkpoint-steps", 2, STEPS, "--out", out]
    blocker = _sbatch(
        "--cpus-per-task=1", "--output=/dev/null", "--wrap", "sleep 300"
    )  # holds the arm's job in the queue
    try:
        r = train(*args, *SUBMIT, "--slurm", f"dependency=afterany:{blocker}")
        assert r.exit_code == 0, r.output
        job = _job_id(out)
        assert slurm_states([job]) == {job: "PENDING"}
        for again in (train(*args, *SUBMIT), train(*args)):
            assert again.exit_code == 2 and f"job {job} of arm lam0 is still pending" in again.output, again.output
        assert len(read_jsonl(out / "jobs.jsonl")) == 1
    finally:
        subprocess.run(["scancel", blocker], check=True)
    _until(lambda: (out / "checkpoint-2").is_dir(), 300, "checkpoint-2")
    subprocess.run(["scancel", job], check=True)
    assert _ended([job], timeout=120) == {job: "CANCELLED"}  # not requeued: a cancel is the user's word
    log = (out / "submitit" / f"{job}_0_log.err").read_text()
    assert "received SIGTERM: stopping at the next safe point" in log, log
    # it finishes its step and checkpoints it when Slurm's KillWait lets it (`ending job`); else it is killed mid-step
    stopped = [s for s, _ in checkpoints(out)][-1]
    assert stopped == 2 or f"ending job {job} (lam0 stopped after step {stopped} on SIGTERM)" in log, (stopped, log)
    r = train(*args, *SUBMIT, "--wait")
    assert r.exit_code == 0, r.output
    second = _job_id(out)
    assert second != job and f"lam0: trained to step {STEPS}" in r.output, r.output
    assert (
        f"lam0: resuming from checkpoint-{stopped} of {STEPS}" in (out / "submitit" / f"{second}_0_log.err").read_text()
    )
    segs = read_segments(out)
    assert [(s["slurm_job"], s["start_step"]) for s in segs] == [(job, 0), (second, stopped)] and segs[-1][
        "ended"
    ] == "complete"
    assert segs[0]["ended"] in ("stopped on SIGTERM", None), segs  # None: killed before it could say
    _same_arm(uninterrupted, out)


def test_pilot_submit_trains_and_evaluates_through_slurm(tmp_path, slurm):
    """`fairneg pilot --submit`: every stage that runs the model (soundness, the GRPO arm, pairs, the DPO arm, the eval
    cells) runs as Slurm jobs, the other stages here, into the run folder `make pilot` writes; its report has every section of the report notebook. (The gate stage is left out:
    a preregistered gate needs 8 games, more than a test should play.)"""
    import yaml

    p = dict(
        bank=dict(
            train=dict(n_games=2, seed_offset=40000, modes=["private"], out="banks/train"),
            eval=dict(
                n=2,
                first_seed=41000,
                min_spread=0.2,
                modes=["full"],
                max_candidates=200,
                known_banks=[],
                out="banks/eval",
            ),
        ),
        geometry=dict(out="geometry.jsonl"),
        pilot=dict(
            run_dir="run",
            lams=[0.0],
            dpo_types=["rational_private"],
            ladder_conditions=[],
            pairs_games=1,
            pairs_seeds=1,
        ),
        soundness=dict(games=2, seeds=1, required=False),
        train=dict(model="tiny-test", steps=2, groups=1, k=2, max_new_tokens=48, max_turns=3, checkpoint_steps=[2]),
        dpo=dict(steps=2, batch_size=2),
        eval=dict(cells=["ultimatum"], episodes=2),
        analysis=dict(B=200, min_games=2),
        report=dict(out="run/pilot.html", title="pilot through Slurm"),
    )
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(p))
    stages = [
        "train-bank",
        "eval-bank",
        "llmdel-geometry",
        "model",
        "soundness",
        "train",
        "pairs",
        "dpo",
        "eval",
        "analyze",
        "report",
    ]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = runner.invoke(app, ["pilot", "--params", "p.yaml", "--no-progress", "--only", *stages, *SUBMIT])
    finally:
        os.chdir(cwd)
    assert r.exit_code == 0, r.output
    run = tmp_path / "run"
    arm_jobs, cell_jobs = read_jsonl(run / "train" / "lam0" / "jobs.jsonl"), read_jsonl(run / "eval" / "launch.jsonl")
    assert [(j["arm"], j["executor"]) for j in arm_jobs] == [("lam0", "slurm")]
    dpo = read_json(run / "dpo" / "dpo_rational_private" / "outcome.json")  # trained, or why not (too few pairs)
    cells = ["lam0_step2_ultimatum"] + (["dpo_rational_private_step2_ultimatum"] if dpo["trained"] else [])
    assert sorted((j["cell"], j["executor"]) for j in cell_jobs) == sorted((c, "slurm") for c in cells)
    assert read_segments(run / "train" / "lam0")[0]["slurm_job"] == arm_jobs[0]["job_id"]
    stage_jobs = read_jsonl(run / "jobs.jsonl")  # the model stages, one Slurm job each
    assert [(j["name"], j["executor"]) for j in stage_jobs] == [
        (s, "slurm") for s in ("soundness", "pairs", "dpo-dpo_rational_private")
    ]
    assert (run / "pairs" / "pairs.jsonl").is_file() and (
        run / "dpo" / "dpo_rational_private" / "outcome.json"
    ).is_file()
    html = (run / "pilot.html").read_text()
    nb = json.loads((Path(__file__).resolve().parents[1] / "nbs" / "report.ipynb").read_text())
    headings = [
        l[3:].strip()
        for c in nb["cells"]
        if c["cell_type"] == "markdown"
        for l in "".join(c["source"]).splitlines()
        if l.startswith("## ")
    ]
    assert len(headings) >= 10 and [h for h in headings if h not in html] == []
    assert "Training sessions of each arm" in html and "lam0_step2" in html


def test_preempted_arm_requeued_by_slurm_ends_as_uninterrupted(tmp_path, train_bank, uninterrupted, slurm):
    """Preemption where the partition says PreemptMode=REQUEUE, as Slurm carries it out (`scontrol requeue`: the job's
    processes are signalled and killed, the same job goes back in the queue): the job does not requeue itself a second
    time, and its rerun resumes from the newest checkpoint, checks the steps it computes again, and ends the arm as the
    uninterrupted run did."""
    out = tmp_path / "lam0"
    r = train(*TRAIN, "--bank", train_bank, "--steps", STEPS, "--checkpoint-steps", 2, STEPS, "--out", out, *SUBMIT)
    assert r.exit_code == 0, r.output
    job = _job_id(out)
    _until(lambda: _steps(out) >= 1, 300, "the job's first step", poll=0.1)
    subprocess.run(["scontrol", "requeue", job], check=True)
    _until(lambda: (slurm_states([job]) or {}).get(job) == "PENDING", 120, "Slurm to requeue the job")
    _start_now(job)
    assert _ended([job], timeout=300) == {job: "COMPLETED"}
    assert len(read_jsonl(out / "jobs.jsonl")) == 1  # one submission, run twice by Slurm
    segs = read_segments(out)
    assert [s["slurm_job"] for s in segs] == [job, job] and segs[0]["start_step"] == 0, segs
    assert segs[0]["ended"] in ("stopped on SIGTERM", None), segs  # None: killed before it could say
    start = segs[1]["start_step"]  # checkpoint-2, or the step it stopped after
    assert (segs[1]["optimizer"], segs[1]["end_step"], segs[1]["ended"]) == (
        "exact" if start else "fresh",
        STEPS,
        "complete",
    ), segs
    log = (out / "submitit" / f"{job}_0_log.err").read_text()
    assert "DUE TO JOB REQUEUE" in log and "requeuing job" not in log, (
        log
    )  # Slurm requeued it; it did not requeue itself
    assert (
        f"lam0: resuming from checkpoint-{start} of {STEPS}" if start else f"lam0: starting at step 0 of {STEPS}"
    ) in log, log
    _same_arm(uninterrupted, out)
