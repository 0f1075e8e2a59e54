"""Benchmark of the eval chapter's paired game-cluster bootstrap (SPEC §7), on 2 cores.

    python bench/bench_bootstrap.py

Target: B = 10,000 resamples over 24 games x 7 cells x 12 endpoints in under 2 s, from episode rows to intervals
(validation, pairing, per-game sums, one resample matrix and one product per cluster count, percentiles). The
figure is printed beside a naive loop that redraws and re-averages per resample in Python (run on fewer
resamples with the same draws, checked equal, and extrapolated), and beside a coverage simulation of the interval.
"""
import os
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"): os.environ[_v] = "2"
if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > 2: os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])

import time
import numpy as np
from fairneg.eval import (EVAL_ENDPOINTS, analyze_cells, contrast_from_sums, coverage_study, prepare_cell,
                          synthetic_cell, endpoint_values, pair_sides)
from fairneg.stats import resample_counts

B, G, E, N_CELLS, TARGET_S = 10_000, 24, 8, 7, 2.0
ENDPOINTS = ("deal", "nnw", "nnw_rel", "below_threshold", "worst_off_z", "gini", "max_share", "dist_nbs",
             "nnw_given_deal", "below_threshold_given_deal", "worst_off_z_given_deal", "max_share_given_deal")

def cells():
    return {f"ck_step{i}_primary": synthetic_cell(G, E, deal_delta=-0.03 * i, fair_delta=0.01 * i, seed=i) for i in range(N_CELLS)}

def best_of(fn, n=3):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter(); out = fn(); ts.append(time.perf_counter() - t0)
    return min(ts), out

def naive(cs, endpoints, n_resamples, seed=0):
    "Per resample: draw games, gather their episodes, average each side in Python; the draws of `resample_counts`."
    draws_idx = np.random.Generator(np.random.PCG64(seed)).integers(0, G, size=(n_resamples, G))
    out = {}
    for name, c in cs.items():
        keys, T, U = pair_sides(c["trained"], c["base"], name)
        VT, VU = endpoint_values(T, endpoints), endpoint_values(U, endpoints)
        games = sorted({k[0] for k in keys})
        per_game = [(VT[[k[0] == g for k in keys]], VU[[k[0] == g for k in keys]]) for g in games]
        res = np.empty((n_resamples, len(endpoints)))
        for b in range(n_resamples):
            t = np.vstack([per_game[j][0] for j in draws_idx[b]]); u = np.vstack([per_game[j][1] for j in draws_idx[b]])
            for k in range(len(endpoints)):
                tk, uk = t[:, k][~np.isnan(t[:, k])], u[:, k][~np.isnan(u[:, k])]
                res[b, k] = (sum(tk) / len(tk) if len(tk) else np.nan) - (sum(uk) / len(uk) if len(uk) else np.nan)
        out[name] = res
    return out

def vectorized_draws(cs, endpoints, n_resamples, seed=0):
    K, out = len(endpoints), {}
    for name, c in cs.items():
        p = prepare_cell(c["trained"], c["base"], name, endpoints)
        S = p["S"]
        out[name] = contrast_from_sums(S[:, :K], S[:, K:2*K], S[:, 2*K:3*K], S[:, 3*K:],
                                       resample_counts(p["n_clusters"], n_resamples, seed) @ S)["draws"]
    return out

if __name__ == "__main__":
    cs = cells()
    print(f"{N_CELLS} cells x {G} games x {E} episodes per side, {len(ENDPOINTS)} endpoints, B = {B:,}, "
          f"{len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else '?'} cores")
    t_vec, res = best_of(lambda: analyze_cells(cs, ENDPOINTS, B=B, seed=0))
    t_all, _ = best_of(lambda: analyze_cells(cs, EVAL_ENDPOINTS, B=B, seed=0))
    n_naive = 200
    t0 = time.perf_counter(); nv = naive(cs, ENDPOINTS, n_naive); t_naive = (time.perf_counter() - t0) * B / n_naive
    vd = vectorized_draws(cs, ENDPOINTS, n_naive)
    diff = max(float(np.nanmax(np.abs(nv[k] - vd[k]))) for k in cs)
    print(f"vectorized (rows -> intervals): {t_vec:6.3f} s    ({len(EVAL_ENDPOINTS)} endpoints: {t_all:.3f} s)")
    print(f"naive per-resample loop       : {t_naive:6.1f} s    (extrapolated from {n_naive} resamples; "
          f"same draws, max |difference| {diff:.1e}; speed-up x{t_naive / t_vec:,.0f})")
    t0 = time.perf_counter(); cov = coverage_study(n_reps=1000, B=2000, seed=0)
    strong = coverage_study(n_reps=1000, B=2000, seed=1, effect_sd=0.3, noise_sd=0.1)
    t_cov = time.perf_counter() - t0
    print(f"coverage of the 95% interval, 24 games x 8 episodes, 1,000 replications ({t_cov:.1f} s):")
    for nm, c in (("moderate within-game correlation", cov), ("strong within-game correlation", strong)):
        print(f"  {nm:33}: game-cluster {c['game']['coverage']:.3f} (width {c['game']['width']:.3f}), "
              f"episode-level {c['episode']['coverage']:.3f} (width {c['episode']['width']:.3f})")
    ok_time, ok_same = t_vec < TARGET_S, diff < 1e-9
    ok_cov = 0.92 <= cov["game"]["coverage"] <= 0.975 and cov["episode"]["coverage"] < cov["game"]["coverage"]
    print(f"timing {t_vec:.3f} s < {TARGET_S} s: {'PASS' if ok_time else 'FAIL'}; naive = vectorized: {'PASS' if ok_same else 'FAIL'}; "
          f"coverage near nominal: {'PASS' if ok_cov else 'FAIL'}")
    print("PASS" if ok_time and ok_same and ok_cov else "FAIL")
    raise SystemExit(0 if ok_time and ok_same and ok_cov else 1)
