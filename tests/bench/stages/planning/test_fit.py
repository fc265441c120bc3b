"""bench/stages/planning/fit.py: whole rounds in the budget, rows left out from the end, the window shrunk to fit the
settling rounds, a short budget said."""

from bench.stages import cost
from bench.stages.planning import build, fit, planned
from bench.stages.records import record
from helpers import CPU_CLASSES, TINY


def planned_runs(variants, repeats, workloads=("small",), estimate=10.0):
    return [
        planned.Run(f"{w}-{v}-{r}", v, "train", r, 1, workload=w, estimate_s=estimate)
        for r in range(1, repeats + 1)
        for w in workloads
        for v in variants
    ]


def test_the_budget_keeps_whole_rounds_then_leaves_rows_out_from_the_end():
    runs = planned_runs(["baseline", "amp", "dp"], 3, ("small", "imagenet"))  # 60 s a round of both workloads
    kept, left_out = fit.fit_budget(runs, 130, 5)
    assert [r.repeat for r in kept] == [1] * 6 + [2] * 6 and left_out == []
    kept, left_out = fit.fit_budget(runs, 45, 0)  # not even one round: dp goes, then nothing else need
    assert {r.variant for r in kept} == {"baseline", "amp"} and left_out == ["dp"] and {r.repeat for r in kept} == {1}
    assert fit.fit_budget(runs, None, 0) == (runs, [])
    # rounds before rows where rounds are wanted: 3 rounds of the baseline and amp rather than 2 of all three
    kept, left_out = fit.fit_budget(runs, 130, 5, wanted=3)
    assert (
        {r.variant for r in kept} == {"baseline", "amp"}
        and left_out == ["dp"]
        and {r.repeat for r in kept} == {1, 2, 3}
    )
    kept, left_out = fit.fit_budget(runs, 45, 0, wanted=3)  # two training rows kept at least, then one round
    assert {r.variant for r in kept} == {"baseline", "amp"} and left_out == ["dp"] and {r.repeat for r in kept} == {1}
    groups = build.rounds(runs)
    assert len(groups) == 6 and [(g[0].repeat, g[0].workload) for g in groups[:2]] == [(1, "small"), (1, "imagenet")]


def test_the_window_shrinks_to_fit_the_settling_rounds_but_never_below_its_floor():
    """The rounds asked, up to fit.SETTLING_ROUNDS (3): the window 11 minutes leave 2 rounds of these rows is at its
    floor for 3, and 15 minutes give 3 a window between."""
    args = (["baseline", "amp", "compile"], ["loader"], ["small", "imagenet"], 3, True, True)
    assert fit.fit_window(None, *args) == cost.WINDOW_S
    assert fit.fit_window(10**6, *args) == cost.WINDOW_S
    assert fit.fit_window(60, *args) == cost.WINDOW_MIN_S
    assert fit.fit_window(11 * 60, *args) == cost.WINDOW_MIN_S
    assert cost.WINDOW_MIN_S < fit.fit_window(15 * 60, *args) < cost.WINDOW_S
    two = (*args[:3], 2, *args[4:])
    assert cost.WINDOW_MIN_S < fit.fit_window(11 * 60, *two) < cost.WINDOW_S
    assert fit.fit_window(60, *args[:-2], False, True) == cost.WINDOW_S  # a CPU's steps are fixed


def test_a_short_budget_keeps_fewer_rounds_and_says_so(in_process_bench, monkeypatch, capsys):
    """Planning, not the runs (its runs made up, in-process): 30 s by the plan's estimate (a CPU with native bf16,
    whatever this one is: amp's row 6x longer where emulated) keeps 1 round of the baseline and amp of the 3 asked,
    and leaves dp out."""
    monkeypatch.setenv("CPUINFO_FLAGS", CPU_CLASSES["bf16"])
    flags = [*map(str, TINY), "--variants", "baseline,amp,dp", "--loaders", "none", "--repeats", "3"]
    code, launched = in_process_bench("bench", "--budget", "0.5", flags=flags)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "of the 3 asked" in out and "left out to fit the budget: dp" in out
    assert launched == ["baseline-1", "amp-1"]
    rows = record.read_runs(in_process_bench.out / "runs.csv")
    assert set(rows["repeat"]) == {1} and set(rows["variant"]) == {"baseline", "amp"}
