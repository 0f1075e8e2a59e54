"""The exported `fairneg.engine.metrics` and `fairneg.engine.reward` modules (the notebooks test their own cells; this checks the package)."""

import math
import numpy as np
import pytest
from fairneg.engine.game import generate_game, ultimatum_game
from fairneg.engine.geometry import solve
from fairneg.engine.metrics import episode_metrics, summarize_metrics, GOOD_DIRECTION, METRIC_NAMES
from fairneg.engine.reward import g_smooth, seat_rewards, episode_rewards

L = math.log(0.01)


def test_ultimatum_boundary_extraction():
    ug = ultimatum_game()
    geo = solve(ug)
    m = episode_metrics(ug, dict(deal=(10,), walk=False, unanimous=True), geo)
    assert (m["deal"], m["below_threshold"], m["max_share"], m["nnw"]) == (True, False, 1.0, 0.0)
    assert m["gini"] == pytest.approx(0.5) and m["dist_nbs"] == pytest.approx(0.5)
    m = episode_metrics(ug, dict(deal=(6,)), geo)
    assert m["nnw_rel"] == pytest.approx(math.sqrt(0.24) / 0.5) and m["max_share"] == pytest.approx(0.6)


def test_generated_game_at_nbs():
    g = generate_game(40000)
    geo = solve(g)
    m = episode_metrics(g, dict(deal=tuple(int(o) for o in geo.deals[geo.nbs])), geo)
    assert m["nnw_rel"] == 1.0 and m["dist_nbs"] == 0.0
    s = summarize_metrics([m, episode_metrics(g, dict(deal=None, walk=True), geo)])
    assert s["deal"] == 0.5 and s["nnw_rel_given_deal"] == 1.0 and s["counts"]["gini"] == 1
    assert set(METRIC_NAMES) <= set(GOOD_DIRECTION)


def test_reward_branch_points():
    assert g_smooth(0.01) == L and g_smooth(0.0) == L - 1 and g_smooth(-1.0, g_floor=-17.5) == -17.5
    z = np.array([1.0, 0.0])
    assert seat_rewards(z, 0).tolist() == [0.0, L - 1]
    assert seat_rewards(z, 1).tolist() == [(L - 1) / 2] * 2
    r = episode_rewards(ultimatum_game(), dict(deal=(10,)), 0, shaping_weight=0.4, illegal=[1, 0], turns=[2, 1])
    assert r.tolist() == [-0.2, L - 1]
