"""The golden hashes of `tools/golden.py` (issue #36's proof that a redesign changed nothing): the play hashes are the
same when computed twice, a planted change in one output changes exactly the hashes that cover it, and the fields left
out are only those that say when, where or how long."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import golden


def test_volatile_fields_only():
    kept = [
        "deal",
        "nnw",
        "max_share",
        "dist_nbs",
        "n_steps",
        "seat",
        "prompt_ref",
        "step",
        "loss",
        "kl",
        "config",
        "messages",
        "episode_seed",
        "lam",
    ]
    dropped = ["total_s", "analyzed_at", "code_version", "rss_mb", "train_tflops", "hostname", "gpu_name", "created"]
    assert not [k for k in kept if golden.volatile(k)] and all(golden.volatile(k) for k in dropped)
    assert golden.digest({"a": 1, "total_s": 3.0}) == golden.digest({"a": 1, "total_s": 9.0}) != golden.digest({"a": 2})


def test_html_tables():
    page = "<p>x</p><table><tr><th>arm</th><th>deal</th></tr><tr><td>lam0</td><td> 0.5 <b>*</b></td></tr></table><table></table>"
    assert golden.html_tables(page) == [[["arm", "deal"], ["lam0", "0.5 *"]], []]


def test_play_hashes_repeat_and_see_a_planted_change(monkeypatch):
    first, second = golden.play_hashes(), golden.play_hashes()
    assert first == second and len(first) == 3 * 2 * 2 * 4
    import fairneg.play.rollout as R

    real = R.render_prompt
    monkeypatch.setattr(
        R, "render_prompt", lambda *a, **k: [dict(m, content=m["content"] + " ") for m in real(*a, **k)]
    )
    planted = golden.play_hashes()
    changed = {k for k in first if planted[k] != first[k]}
    assert {k for k in first if "/window/" in k and k.endswith("/prompts")} <= changed  # every windowed prompt changed
    assert not {
        k for k in changed if "/conversation/" in k and k.endswith("/decision_points")
    }  # conversations never render it
