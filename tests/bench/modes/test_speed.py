"""bench/modes/speed.py (the default mode): rounds until settled, the warm-up a later round keeps, evaluation in the
first round only, outputs that cannot be written."""

import math
import types

import pandas as pd
import pytest

from bench.config import Config, Outputs
from bench.modes import speed
from bench.stages.planning import build, planned
from bench.stages.running import execute
from bench.stages.statistics import rules
from helpers import dry_run, fast_first, run


def bench_with(rows):
    """The speed mode's warm-up bookkeeping with its finished rows, no bench around it."""
    made = types.SimpleNamespace(recorded=lambda: rows)
    for name in ("warmed", "known_needs", "finished", "note"):
        setattr(made, name, getattr(speed.Speed, name).__get__(made))
    return made


def run_of(variant, repeat, warmup=20, steps=80):
    flags = {"--steps": str(steps), "--warmup-steps": str(warmup), "--eval-samples": "0"}
    return planned.Run(
        f"{variant}-{repeat}", variant, "train", repeat, 1, ["python", "train.py"], "imagenet", flags=flags
    )


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

    def round_runs(repeat, works, context):
        return [
            planned.Run(f"{v}-{repeat}", v, "train", repeat, 1, workload="small", estimate_s=wall_s)
            for v in context.variants
        ]

    monkeypatch.setattr(build, "round_runs", round_runs)
    variants = list(effects)
    first = planned.Context(variants=variants)
    runs = [run for r in range(1, rules.MIN_ROUNDS + 1) for run in round_runs(r, None, first)]
    asked = Config(outputs=Outputs(out=tmp_path, baseline_dir=tmp_path / "baseline"))
    works = dict(small=planned.Work(timeout=60, data=str(tmp_path)))
    context = dict(variants=variants, loaders=[])
    bench = speed.Speed(asked, MACHINE, "b1", runs, works, dict(auto=True, context=context))
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
    """The most any row's earlier runs needed, 2 at least, every row of the workload alike (their steps, and so their
    learning-rate schedules, the same), their timed steps the same (60 here); the plan's warm-up where one of them
    did not say or needed it all, for a row with no finished run yet, the first round and the loader rows."""
    bench = bench_with([row("amp", 4), row("amp", 6), row("baseline", 1), row("compile", 3),
                        row("dali", 3, status="failed")])  # fmt: skip
    for variant in "amp", "baseline", "compile":
        cut = bench.warmed(run_of(variant, 3))
        assert (cut.flags["--warmup-steps"], cut.flags["--steps"]) == ("6", "66"), variant
    for kept in run_of("dali", 2), run_of("amp", 1), run_of("ddp", 2):
        assert bench.warmed(kept).flags == kept.flags  # failed, the first round, none yet
    bench.note(row("ddp", 3))  # a row kept as it finishes counts at once
    assert bench.warmed(run_of("ddp", 2)).flags["--warmup-steps"] == "6"
    bench.note(row("checkpoint", 25))  # one row needed its whole warm-up: every row keeps it
    assert bench.warmed(run_of("amp", 2)).flags == run_of("amp", 2).flags
    unsaid = bench_with([row("amp", 4), row("compile", float("nan"))])
    assert unsaid.warmed(run_of("amp", 2)).flags == run_of("amp", 2).flags  # one row did not say: none cut


def test_auto_rounds_go_on_for_the_wide_rows_only_and_stop_when_every_interval_is_narrow(tmp_path, monkeypatch):
    effects = dict(baseline=1.0, steady=0.3, noisy=1.3)
    launched, why = auto_bench(tmp_path, monkeypatch, effects, dict(baseline=0.01, steady=0.005, noisy=0.04))
    counts = {v: sum(name.startswith(v + "-") for name in launched) for v in effects}
    assert counts["steady"] == rules.MIN_ROUNDS  # narrow after the first rounds: not run again
    assert counts["noisy"] > rules.MIN_ROUNDS and counts["baseline"] == counts["noisy"]  # its pair, every round
    assert "2 of 2 technique rows decided (faster, slower or within +-10%)" in why
    noisy = pd.read_csv(tmp_path / "summary.csv").set_index("variant").loc["noisy"]
    assert noisy.speed_answer == "faster" and rules.needs_rounds(noisy.to_dict()) == (False, "decided")
    assert "Rounds stopped: 2 of 2 technique rows decided" in (tmp_path / "summary.md").read_text()


def test_auto_rounds_stop_at_the_budget_and_the_summary_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(rules, "MAX_ROUNDS", 50)  # the row stays open: about 10 more rounds would settle it
    effects = dict(baseline=1.0, noisy=1.1)
    launched, why = auto_bench(tmp_path, monkeypatch, effects, dict(baseline=0.06, noisy=0.06), budget_s=85)
    assert len(launched) == 8  # 4 rounds of 2 runs, 10 s each: a fifth would end past 85 s
    assert "the budget of 1.41667 min would be spent inside the next round" in why
    summary = pd.read_csv(tmp_path / "summary.csv").set_index("variant")
    assert summary.loc["noisy", "speed_answer"] == "unsettled" and summary.loc["noisy", "rounds_paired"] == 4


def test_auto_rounds_stop_at_the_most_rounds(tmp_path, monkeypatch):
    monkeypatch.setattr(rules, "MAX_ROUNDS", 3)
    effects = dict(baseline=1.0, noisy=1.0)
    launched, why = auto_bench(tmp_path, monkeypatch, effects, dict(baseline=0.3, noisy=0.3))
    assert len(launched) == 2 * 3 and "3 rounds is the most" in why


def test_a_row_below_the_machines_noise_gets_no_more_rounds_and_the_open_ones_do(tmp_path, monkeypatch, capsys):
    """After GIVE_UP rounds (4) a row whose interval no count of rounds up to MAX_ROUNDS would settle (1.0x, +-60%)
    gets no more: the rounds go to the row still open (1.1x, narrowing); the progress lines say which is which."""
    effects = dict(baseline=1.0, hopeless=1.0, open=1.1)
    noise = dict(baseline=0.01, hopeless=0.3, open=0.04)
    launched, why = auto_bench(tmp_path, monkeypatch, effects, noise)
    counts = {v: sum(name.startswith(v + "-") for name in launched) for v in effects}
    assert counts["hopeless"] == rules.GIVE_UP and counts["open"] > rules.GIVE_UP, counts
    said = capsys.readouterr().out
    assert "no more rounds for hopeless (below the noise)" in said and "round 5, 2 runs, after " in said


@pytest.mark.slow
def test_the_first_round_evaluates_and_the_later_ones_time_the_speed_alone():
    """Every row's accuracy is its first round's (the verdict's check that it learns alike); a later round evaluates
    nothing (--eval-samples 0), and a GPU run's 3.5 s of evaluation goes to the rounds that settle its speed."""
    plan = dry_run("--variants", "baseline,amp", "--loaders", "none", "--repeats", 3)
    runs = [line.split() for line in plan.splitlines() if " train" in line and "--eval-samples" in line]
    evaluated = [run[run.index("--eval-samples") + 1] for run in runs]
    seeds = [run[run.index("--seed") + 1] for run in runs]  # a CPU round: baseline, amp, the baseline beside it
    assert seeds == ["0"] * 3 + ["1"] * 3 + ["2"] * 3, plan
    assert evaluated == ["500", "500"] + ["0"] * 7, plan  # the baseline beside evaluates nothing either


def sized_bench(rows):
    made = types.SimpleNamespace(recorded=lambda: rows)
    for name in ("sized", "known_windows", "known_steps", "timings", "finished", "note"):
        setattr(made, name, getattr(speed.Speed, name).__get__(made))
    return made


def timed(variant, window_s, steps):
    return dict(kind="train", status="ok", workload="imagenet", variant=variant, window_s=window_s, steps_timed=steps)


def test_a_slow_row_times_fewer_steps_in_a_later_round_so_rounds_last_alike():
    """Windows sized in seconds: the baseline's window is 6 s; amp, 1.75 s a step (bf16 emulated), times 5 steps
    (FEWEST_TIMED; 6 / 1.75 rounds up to 4) in round 2, its warm-up as it was; a row as fast as the baseline, the
    baseline itself and the first round keep the plan's steps."""
    bench = sized_bench([timed("baseline", 6.0, 25), timed("baseline", 6.2, 25), timed("amp", 43.75, 25),
                         timed("compile", 5.0, 25)])  # fmt: skip
    cut = bench.sized(run_of("amp", 2, warmup=5, steps=30))
    assert (cut.flags["--warmup-steps"], cut.flags["--steps"]) == ("5", str(5 + speed.FEWEST_TIMED))
    for kept in run_of("amp", 1, 5, 30), run_of("compile", 2, 5, 30), run_of("baseline", 2, 5, 30):
        assert bench.sized(kept).flags == kept.flags
    bench.note(timed("checkpoint", 15.0, 25))  # 0.6 s a step: 10 steps of the baseline's 6.1 s
    assert bench.sized(run_of("checkpoint", 2, 5, 30)).flags["--steps"] == str(5 + 11)
