"""bench/modes/speed.py (the default mode): rounds until settled, the warm-up a later round keeps, evaluation in the
first round only, outputs that cannot be written."""

import math
import types

import pandas as pd
import pytest

from bench.config import Config, Outputs
from bench.modes import speed
from bench.stages import execute, plan, summarize
from helpers import dry_run, fast_first, run


def bench_with(rows):
    """A Bench's warm-up bookkeeping with its finished rows, no bench around it."""
    made = types.SimpleNamespace(recorded=lambda: rows)
    for name in ("warmed", "known_needs", "note_need"):
        setattr(made, name, getattr(speed.Bench, name).__get__(made))
    return made


def run_of(variant, repeat, warmup=20, steps=80):
    flags = {"--steps": str(steps), "--warmup-steps": str(warmup), "--eval-samples": "0"}
    return plan.Run(f"{variant}-{repeat}", variant, "train", repeat, 1, ["python", "train.py"], "imagenet", flags=flags)


def row(variant, need, status="ok"):
    return dict(kind="train", status=status, workload="imagenet", variant=variant, warmup_steady_steps=need)


MACHINE = dict(machine_class="cpu-test", gpu_count=0, gpu_name=None, cpu_model="a test CPU", cpu_cores=2)


Z = [1.0, -1.2, 0.3, 0.8, -0.5, -1.0, 1.1, 0.2, -0.3, 0.6, -0.9, 0.4]  # a variant's noise in round r: Z[r - 1]


class FakeLaunch:
    """launch() without processes: a rate per variant with noise per variant, a wall time per run."""

    def __init__(self, effects, noise, wall_s=10.0):
        self.effects, self.noise, self.wall_s, self.launched, self.clock = effects, noise, wall_s, [], 0.0

    def monotonic(self):
        return self.clock

    def __call__(self, run, logs, timeout, stop, tensorboard=False, profile=False):
        self.launched.append(run.name)
        self.clock += self.wall_s
        sign = 1 if run.variant == "baseline" else -1
        rate = 100 * self.effects[run.variant] * math.exp(sign * self.noise[run.variant] * Z[run.repeat - 1])
        return dict(run=run.name, variant=run.variant, kind=run.kind, repeat=run.repeat, status="ok",
                    samples_per_s=rate, wall_s=self.wall_s, global_batch_size=64, dataset="generated",
                    model="m", image_size=32, steps_timed=10, device="cpu", time_utc="2026-11-23T00:00:00")  # fmt: skip


def auto_bench(tmp_path, monkeypatch, effects, noise, budget_s=None, wall_s=10.0):
    fake = FakeLaunch(effects, noise, wall_s)
    monkeypatch.setattr(execute, "launch", fake)
    monkeypatch.setattr(execute, "time", fake)  # the executor's clock: each run takes wall_s
    monkeypatch.setattr(speed, "report", lambda *a: None)

    def round_runs(repeat, works, variants, loaders, context):
        return [plan.Run(f"{v}-{repeat}", v, "train", repeat, 1, workload="small", estimate_s=wall_s) for v in variants]

    monkeypatch.setattr(plan, "round_runs", round_runs)
    variants = list(effects)
    runs = [run for r in range(1, summarize.MIN_ROUNDS + 1) for run in round_runs(r, None, variants, [], None)]
    asked = Config(outputs=Outputs(out=tmp_path, baseline_dir=tmp_path / "baseline"))
    works = dict(small=plan.Work(timeout=60, data=str(tmp_path)))
    context = dict(variants=variants, loaders=[])
    bench = speed.Bench(asked, MACHINE, "b1", runs, works, dict(auto=True, context=context))
    bench.logs.mkdir(parents=True)
    execute.execute(bench, budget_s)
    return fake.launched, (bench.logs / "rounds.txt").read_text()


@pytest.mark.parametrize(
    "mode", fast_first([["--summarize"], ["--check"], ["--variants", "baseline", "--loaders", "none"]])
)
def test_outputs_of_this_rounds_modes_that_cannot_be_written_are_one_line(mode, tmp_path):
    """The report is an output like the tables: a folder in its place is refused before any work; so is an --out
    that is a file, for --check too."""
    (tmp_path / "results" / "report.html").mkdir(parents=True)
    result = run("-m", "bench", "--out", tmp_path / "results", *mode)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    if mode != ["--check"]:
        assert "report.html is a folder: the bench writes a file of that name" in result.stderr
    (tmp_path / "file").write_text("x")
    result = run("-m", "bench", "--out", tmp_path / "file", *mode)
    assert result.returncode == 2 and "is a file, not a folder" in result.stderr, result.stderr


def test_a_later_round_warms_up_as_long_as_its_rows_earlier_runs_needed():
    """The most its earlier runs needed, 2 at least, its timed steps the same (60 here); the plan's warm-up where one
    of them did not say or needed it all; the first round and the loader rows as planned."""
    bench = bench_with([row("amp", 4), row("amp", 6), row("baseline", 1), row("compile", float("nan")),
                        row("checkpoint", 25), row("dali", 3, status="failed")])  # fmt: skip
    cut = bench.warmed(run_of("amp", 3))
    assert (cut.flags["--warmup-steps"], cut.flags["--steps"]) == ("6", "66")
    assert bench.warmed(run_of("baseline", 2)).flags["--warmup-steps"] == "2"  # 2 at least
    for kept in run_of("compile", 2), run_of("checkpoint", 2), run_of("dali", 2), run_of("amp", 1), run_of("ddp", 2):
        assert bench.warmed(kept).flags == kept.flags  # not said, needed more, failed, the first round, none yet
    bench.note_need(row("ddp", 3))  # a row kept as it finishes counts at once
    assert bench.warmed(run_of("ddp", 2)).flags["--warmup-steps"] == "3"


def test_auto_rounds_go_on_for_the_wide_rows_only_and_stop_when_every_interval_is_narrow(tmp_path, monkeypatch):
    effects = dict(baseline=1.0, steady=0.3, noisy=1.3)
    launched, why = auto_bench(tmp_path, monkeypatch, effects, dict(baseline=0.01, steady=0.005, noisy=0.04))
    counts = {v: sum(name.startswith(v + "-") for name in launched) for v in effects}
    assert counts["steady"] == summarize.MIN_ROUNDS  # narrow after the first rounds: not run again
    assert counts["noisy"] > summarize.MIN_ROUNDS and counts["baseline"] == counts["noisy"]  # its pair, every round
    assert "within +-5% or a quarter of its effect" in why
    noisy = pd.read_csv(tmp_path / "summary.csv").set_index("variant").loc["noisy"]
    assert summarize.precise(noisy.speedup, noisy.speedup_low, noisy.speedup_high) and noisy.speed_answer == "faster"
    assert "Rounds stopped: every row's 95% interval is within +-5%" in (tmp_path / "summary.md").read_text()


def test_auto_rounds_stop_at_the_budget_and_the_summary_says_why(tmp_path, monkeypatch):
    effects = dict(baseline=1.0, noisy=1.02)
    launched, why = auto_bench(tmp_path, monkeypatch, effects, dict(baseline=0.2, noisy=0.2), budget_s=85)
    assert len(launched) == 8  # 4 rounds of 2 runs, 10 s each: a fifth would end past 85 s
    assert "the budget of 1.41667 min would be spent inside the next round" in why
    summary = pd.read_csv(tmp_path / "summary.csv").set_index("variant")
    assert summary.loc["noisy", "speed_answer"] == "unsettled" and summary.loc["noisy", "rounds_paired"] == 4


def test_auto_rounds_stop_at_the_most_rounds(tmp_path, monkeypatch):
    effects = dict(baseline=1.0, noisy=1.0)
    launched, why = auto_bench(tmp_path, monkeypatch, effects, dict(baseline=0.3, noisy=0.3))
    assert len(launched) == 2 * summarize.MAX_ROUNDS and f"{summarize.MAX_ROUNDS} rounds is the most" in why


@pytest.mark.slow
def test_the_first_round_evaluates_and_the_later_ones_time_the_speed_alone():
    """Every row's accuracy is its first round's (the verdict's check that it learns alike); a later round evaluates
    nothing (--eval-samples 0), and a GPU run's 3.5 s of evaluation goes to the rounds that settle its speed."""
    plan = dry_run("--variants", "baseline,amp", "--loaders", "none", "--repeats", 3)
    runs = [line.split() for line in plan.splitlines() if " train" in line and "--eval-samples" in line]
    evaluated = [run[run.index("--eval-samples") + 1] for run in runs]
    assert evaluated == ["500", "500", "0", "0", "0", "0"], plan
