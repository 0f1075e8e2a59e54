"""bench/compare.py's reading of benchmark output: figures matched by line template, judged against the rounds' noise."""

import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location("bench_compare", Path(__file__).parents[1] / "bench" / "compare.py")
compare_mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_mod)


def test_figures_match_lines_by_template_and_occurrence():
    f = compare_mod.figures("solve median 512 µs (p90 1,204)\nno numbers here\nsolve median 7.5 µs (p90 −2e-3)\n")
    assert f == {("solve median # µs (p90 #)", 0): [512.0, 1204.0], ("solve median # µs (p90 #)", 1): [7.5, -0.002]}


def test_judge_needs_rounds_and_a_gap_wider_than_the_spread():
    assert compare_mod.judge([1.0], [2.0]) == "no noise estimate"
    assert compare_mod.judge([10.0, 10.4], [10.2, 10.9]) == "within noise"  # overlapping ranges
    assert compare_mod.judge([10.0, 10.4], [10.6, 10.7]) == "within noise"  # apart, but by less than a spread
    assert compare_mod.judge([10.0, 10.4], [11.0, 11.1]) == "beyond noise: head higher"
    assert compare_mod.judge([10.0, 10.1], [8.0, 8.2]) == "beyond noise: head lower"


def test_compare_lists_only_figures_that_moved():
    run = lambda t: compare_mod.figures(t)
    runs = {"base": [run("a 1 b 5\nn 3"), run("a 1 b 6\nn 3")], "head": [run("a 1 b 9\nn 3"), run("a 1 b 9.5\nn 3")]}
    rows = compare_mod.compare(runs)
    assert [(r[0], r[2], r[5]) for r in rows] == [("a # b #", 1, "beyond noise: head higher")]
