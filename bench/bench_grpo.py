"""Evidence that GRPO learns (a benchmark, not a test): a λ = 1 run on the embedded small model.

Trains one arm for `--steps` GRPO steps on a small generated training bank, then plays the same held-out
(game, seed) pairs with the untrained base (step 0) and with the final adapter, and prints the mean table
reward R_table and the mean nnw of each, with 95% game-cluster bootstrap intervals and the paired difference,
plus the time per step split into rollout, reference pass and update, and tokens per second.
Whatever it shows is reported as measured.

    .venv/bin/python bench/bench_grpo.py --steps 24 --model tiny
"""

import argparse, tempfile, time
from pathlib import Path
import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny", help="base model (tiny, tiny-test, a folder)")
    ap.add_argument("--steps", type=int, default=24, help="GRPO steps")
    ap.add_argument("--groups", type=int, default=2)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--lam", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--max-turns", type=int, default=8, help="protocol deadline (short CPU episodes)")
    ap.add_argument("--train-games", type=int, default=8)
    ap.add_argument("--eval-games", type=int, default=8)
    ap.add_argument("--eval-seeds", type=int, default=3)
    ap.add_argument("--out", default=None, help="run folder (default: a temporary one)")
    ap.add_argument("--B", type=int, default=10_000)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(2)
    from fairneg.engine.bank import generate_bank
    from fairneg.engine.game import generate_game
    from fairneg.train.grpo import GRPOConfig, train
    from fairneg.train.adapters import checkpoints
    from fairneg.llm.policies import make_policy
    from fairneg.play.rollout import run_tournament, episode_table_rewards
    from fairneg.engine.settings import PlaySettings
    from fairneg.core.store import read_jsonl
    from fairneg.core.stats import cluster_bootstrap

    out = Path(a.out or tempfile.mkdtemp(prefix="bench_grpo_"))
    generate_bank(n_games=a.train_games, seed_offset=40000, modes=("private",), out=out / "bank", progress=False)
    cfg = GRPOConfig(
        model=a.model,
        lam=a.lam,
        steps=a.steps,
        groups=a.groups,
        k=a.k,
        lr=a.lr,
        max_turns=a.max_turns,
        bank=str(out / "bank"),
        out=str(out / "run"),
        checkpoint_steps=[a.steps],
        transcript_every=0,
        max_new_tokens=96,
        scratchpad_chars=16,
        message_chars=16,
        lora_r=16,
        lora_alpha=32,
    )
    t0 = time.time()
    train(cfg, resume=True, progress=True)
    t_train = time.time() - t0
    rows = read_jsonl(out / "run" / "training_steps.jsonl")
    games = [generate_game(s, info_mode="private") for s in range(45000, 45000 + a.eval_games)]  # held out: other seeds
    seeds = list(range(a.eval_seeds))
    ck = checkpoints(out / "run")[-1][1]
    res = {}
    for side, adapter in (("step 0 (base)", None), (f"step {a.steps}", ck)):
        pol = make_policy(a.model, name="p", adapter=adapter, max_new_tokens=96, scratchpad_chars=16, message_chars=16)
        r = run_tournament(
            games, "p", seeds, extra_policies={"p": pol}, progress=False, play=PlaySettings(max_turns=a.max_turns)
        )["rows"]
        res[side] = r
    print(
        f"\nGRPO λ={a.lam} on {a.model}: {a.steps} steps × {a.groups} groups × {a.k} episodes, train bank {a.train_games} games, "
        f"{t_train:.0f} s of training"
    )
    st = np.array([[r["rollout_s"], r["ref_s"], r["train_s"], r["total_s"]] for r in rows])
    print(
        f"time per step (median): rollout {np.median(st[:, 0]):.1f} s, reference pass {np.median(st[:, 1]):.1f} s, "
        f"update {np.median(st[:, 2]):.1f} s, total {np.median(st[:, 3]):.1f} s"
    )
    tps = [r["rollout_tokens_per_s"] for r in rows if r["rollout_tokens_per_s"]]
    ttps = [r["train_tokens_per_s"] for r in rows if r["train_tokens_per_s"]]
    print(
        f"tokens per second: rollout {np.median(tps):.0f} (generated), training {np.median(ttps) if ttps else 0:.0f} (completion tokens through ref + update)"
    )
    print(
        f"training telemetry: reward_mean first {rows[0]['reward_mean']:+.3f} last {rows[-1]['reward_mean']:+.3f}; "
        f"deal rate first {rows[0]['deal_rate']:.2f} last {rows[-1]['deal_rate']:.2f}; kl last {rows[-1]['kl']:.4f}"
    )
    print(
        f"\nheld-out: {a.eval_games} games × {len(seeds)} seeds, same (game, seed) pairs on both sides; 95% game-cluster intervals (B={a.B})"
    )
    for side, r in res.items():
        R = episode_table_rewards(r)
        for name, v in (
            ("R_table", R),
            ("nnw", np.array([x["nnw"] for x in r])),
            ("deal", np.array([float(x["deal"]) for x in r])),
        ):
            cb = cluster_bootstrap(v, [x["instance_id"] for x in r], B=a.B)
            print(f"  {side:>14} {name:>7}: {cb['estimate'][0]:+.3f} [{cb['lo'][0]:+.3f}, {cb['hi'][0]:+.3f}]")
    a0, a1 = list(res.values())
    key = lambda x: (x["instance_id"], x["episode_seed"])
    b = {key(x): x for x in a0}
    for name, f in (("R_table", None), ("nnw", "nnw")):
        d = [
            (episode_table_rewards([x])[0] - episode_table_rewards([b[key(x)]])[0])
            if f is None
            else x[f] - b[key(x)][f]
            for x in a1
        ]
        cb = cluster_bootstrap(np.array(d), [x["instance_id"] for x in a1], B=a.B)
        print(
            f"  paired difference (trained - base) {name:>7}: {cb['estimate'][0]:+.3f} [{cb['lo'][0]:+.3f}, {cb['hi'][0]:+.3f}]"
        )
    print(f"\nrun folder: {out}")


if __name__ == "__main__":
    main()
