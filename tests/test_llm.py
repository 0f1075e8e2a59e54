"""Cross-module checks of the LLM policy (fairneg.llm) on the random stand-in model: rollouts with LLM and agent seats,
determinism across co-stepping widths, trainer log-probs with gradients, seat names, and the `model eval` command."""

import json, os
import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # no effect if torch is already loaded; see nbs/11_llm.ipynb
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("xgrammar")
from typer.testing import CliRunner
from fairneg.engine.game import generate_game, ultimatum_game, divide_dollar_game
from fairneg.engine.protocol import alternating_offers_game
from fairneg.engine.bank import write_bank
from fairneg.play.rollout import AgentPolicy, EpisodeSpec, co_step, make_policies, run_tournament
from fairneg.engine.settings import PlaySettings
from fairneg.llm import HFPolicy, standin_model, sequence_logprobs, constrained_masks, evaluate_model
from fairneg.llm.policies import model_app, seat_policies


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    torch.set_num_threads(2)
    return standin_model(tmp_path_factory.mktemp("llm") / "standin")


def _policy(standin, **kw):
    return HFPolicy(
        standin, name="llm", constrain="legal", max_new_tokens=200, scratchpad_chars=16, message_chars=16, **kw
    )


def test_tournament_llm_and_agents(standin, tmp_path):
    "An LLM seat among computable agents: episodes finish, its turns are legal, the trainer's extras are kept."
    games = [generate_game(s) for s in (42000, 42001)]
    res = run_tournament(
        games,
        ["llm"] + ["passive_gate"] * 5,
        [0],
        out=tmp_path,
        progress=False,
        play=PlaySettings(max_turns=3),
        extra_policies={"llm": _policy(standin)},
    )
    assert len(res["rows"]) == 2
    mine = [t for t in res["transcripts"] if t["policy"] == "llm"]
    assert mine and all(t["legality"] == "ok" for t in mine)
    ex = [x for e in res["episodes"] for x in e.extras.values() if x["policy"] == "llm"]
    assert ex and all(len(x["completion_ids"]) == len(x["logprobs"]) == x["n_completion_tokens"] > 0 for x in ex)


def test_same_turns_at_any_width(standin):
    "Per-turn seeds: the same episodes give the same answers one at a time and co-stepped (ultimatum, divide-the-dollar too)."
    games = [generate_game(42002), generate_game(42003, n_parties=3), ultimatum_game(), divide_dollar_game(3)]
    games.append(alternating_offers_game())

    def play(width):
        specs = [EpisodeSpec(g, 0, ["llm"] * g.n, play=PlaySettings(max_turns=2)) for g in games]
        eps = co_step(specs, {"llm": _policy(standin)}, width=width, progress=False)
        return {e.state.episode_id: [t["raw"] for t in e.state.turns] for e in eps}

    assert play(1) == play(4)


def test_llm_plays_alternating_offers(standin):
    "The LLM policy plays alternating offers by the kind's declaration alone: legal proposals and answers, rounds on."
    res = run_tournament(
        [alternating_offers_game()],
        ["llm", "greedy_anchor"],  # greedy rejects most splits, so the talks go into later rounds
        [0, 1, 2],
        progress=False,
        play=PlaySettings(max_turns=3),
        extra_policies={"llm": _policy(standin)},
    )
    mine = [t for t in res["transcripts"] if t["policy"] == "llm"]
    assert mine and all(t["legality"] == "ok" for t in mine)
    assert {t["phase"] for t in mine} == {"propose", "respond"}  # it proposed, and it answered the other's proposals
    for e in res["episodes"]:  # each round's proposer is the previous round's rejecter: the seats take turns
        proposers = [t["seat"] for t in e.state.turns if t["phase"] == "propose"]
        assert proposers == [k % 2 for k in range(len(proposers))]
    assert {r["end_reason"] for r in res["rows"]} <= {"accepted", "rejected"}


def test_trainer_logprobs_and_grad(standin):
    "sequence_logprobs under the replayed masks equals the sampling log-probs; the GRPO ratio is 1 and has a gradient."
    from fairneg.engine.protocol import new_episode, decision_point, current_seats, turn_token_budget, apply_action
    from fairneg.play.rollout import TurnRequest

    pol = _policy(standin, temperature=0.8)
    reqs = []
    for k, g in enumerate(
        [generate_game(42004), generate_game(42005, n_parties=4), ultimatum_game(), divide_dollar_game()]
    ):
        s = new_episode(g, k)
        if g.protocol == "ultimatum":
            apply_action(s, 0, {"action": {"atype": "propose", "deal": "A4"}})
        seat = current_seats(s)[0]
        reqs.append(TurnRequest(decision_point(s, seat), g, 100 + k, turn_token_budget(s)))
    outs = pol.act_batch(reqs)
    masks = [constrained_masks(o["schema"], pol.tokenizer, o["completion_ids"], pol.vocab) for o in outs]
    pol.model.train()
    new = sequence_logprobs(
        pol.model,
        [o["prompt_ids"] for o in outs],
        [o["completion_ids"] for o in outs],
        masks,
        temperature=0.8,
        pad_id=pol.pad_id,
        batch_size=3,
    )
    ratio = torch.cat([torch.exp(n - torch.tensor(o["logprobs"])) for n, o in zip(new, outs)])
    assert torch.allclose(ratio.detach(), torch.ones_like(ratio), atol=1e-4)
    ratio.mean().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in pol.model.parameters())
    pol.model.zero_grad()
    pol.model.eval()


def test_seat_names(standin):
    "`seat_policies` turns LLM seat names into policies and leaves agent names to the rollout's `make_policies`."
    names = ["passive_gate", f"hf:{standin}", "greedy_anchor"]
    pols = make_policies(names, seat_policies(names))
    assert isinstance(pols[f"hf:{standin}"], HFPolicy) and pols[f"hf:{standin}"].constrain == "none"
    assert isinstance(pols["passive_gate"], AgentPolicy)


def test_model_eval_cli(standin, tmp_path):
    "`model eval` writes the rates and the agreements; without the constraint the random model is rarely legal, with it always."
    app = model_app
    write_bank([generate_game(42005), generate_game(42006)], tmp_path / "bank")
    for c in ("none", "legal"):
        r = CliRunner().invoke(
            app,
            [
                "eval",
                "--model",
                str(standin),
                "--bank",
                str(tmp_path / "bank"),
                "--constrain",
                c,
                "--max-new-tokens",
                "300",
                "--max-turns",
                "1",
                "--episodes",
                "3",
                "--agents",
                "passive_gate",
                "--out",
                str(tmp_path / f"{c}.json"),
            ],
        )
        assert r.exit_code == 0, r.output
    free, legal = (json.loads((tmp_path / f"{c}.json").read_text()) for c in ("none", "legal"))
    assert free["episodes"] == legal["episodes"] == 3
    assert free["legal_rate"] < legal["legal_rate"] == 1 and legal["fabrication_rate"] == 0
    assert set(legal["agreement"]) == {"passive_gate"} and "vote" in legal["by_phase"]


def test_evaluate_without_agents(standin):
    res = evaluate_model(_policy(standin), [ultimatum_game()], episodes=2, agents=[])
    assert res["episodes"] == 2 and res["legal_rate"] == 1 and res["agreement"] == {}


def test_graphed_decode_gives_the_dynamic_completions(tmp_path):
    """`decode="graphed"` runs the decode steps through torch.compile (`reduce-overhead`: CUDA graphs on a GPU; here, on a
    CPU, Inductor's compiled code): the same completions and log-probs as the dynamic cache, for two batch shapes (the
    second a recompile) and under the grammar, through HFPolicy as a rollout calls it."""
    from fairneg.engine.game import generate_game
    from fairneg.llm import (
        sample_batch,
        encode_request,
        stop_ids,
        load_model,
        compiled_grammar,
        legal_action_schema,
        vocab_size,
    )
    from fairneg.engine.protocol import new_episode, current_seats, decision_point
    from fairneg.play.rollout import TurnRequest, turn_seed

    model, tok = load_model(standin_model(tmp_path / "s"))
    reqs = []
    for k in range(5):
        g = generate_game(40000 + k, n_parties=3 + k % 3)
        st = new_episode(g, k)
        reqs.append(TurnRequest(decision_point(st, current_seats(st)[0]), g, turn_seed(st.episode_id, 0), 2048))
    P, E = [encode_request(tok, r) for r in reqs], stop_ids(model, tok)
    kw = dict(eos_ids=E, pad_id=tok.pad_token_id, vocab=len(tok))
    for n, caps in ((5, [16, 9, 16, 4, 16]), (2, [12, 12])):
        dyn = sample_batch(model, P[:n], [r.seed for r in reqs[:n]], caps, **kw)
        gra = sample_batch(model, P[:n], [r.seed for r in reqs[:n]], caps, decode="graphed", **kw)
        assert [r["completion_ids"] for r in gra] == [r["completion_ids"] for r in dyn]
        assert max(abs(a - b) for x, y in zip(gra, dyn) for a, b in zip(x["logprobs"], y["logprobs"])) < 1e-4
    gr = lambda: [compiled_grammar(tok, legal_action_schema(r.dp, 16, 16), vocab_size(model)) for r in reqs]
    dyn = sample_batch(model, P, [r.seed for r in reqs], [200] * 5, grammars=gr(), **kw)
    gra = sample_batch(model, P, [r.seed for r in reqs], [200] * 5, grammars=gr(), decode="graphed", **kw)
    assert [r["completion_ids"] for r in gra] == [r["completion_ids"] for r in dyn] and all(
        not r["truncated"] for r in gra
    )
    pol = HFPolicy(model, tok, max_new_tokens=16, decode="graphed")
    assert [o["completion_ids"] for o in pol.act_batch(reqs)] == [
        r["completion_ids"] for r in sample_batch(model, P, [r.seed for r in reqs], [16] * 5, **kw)
    ]
    # compiled whole (fullgraph): no fallback taken, and the kept cache served the policy's second call
    assert pol.decoding == dict(requested="graphed", chosen="graphed", used="graphed", fallback=None)
    pol.act_batch(reqs)
    assert pol.decoding["used"] == "graphed" and pol.stats["cache_hits"] >= 1
    assert HFPolicy(model, tok).decode == "dynamic"  # auto, on a CPU
