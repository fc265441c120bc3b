"""Answers that hold on a noisy machine: paired ratios and their intervals on made-up runs whose answer is known,
rounds added under --repeats auto until the intervals are narrow or the budget is spent, and every row of a plan
on the same cores."""

import math
import random
import types

import pandas as pd
import pytest

from bench import catalogue, cli
from bench.modes import speed
from bench.outputs import verdicts
from bench.stages import execute, plan, record, summarize

MACHINE = dict(machine_class="cpu-test", gpu_count=0, gpu_name=None, cpu_model="a test CPU", cpu_cores=2)


def made_up(effects, rounds, noise, drift=0.0, seed=0):
    """Rows of runs.csv: every variant once a round; a variant's rate is 100 x its effect x the round's drift
    (shared by every row of the round) x its own noise (lognormal, sd `noise`)."""
    rng, rows = random.Random(seed), []
    for r in range(1, rounds + 1):
        machine = math.exp(rng.gauss(0, drift))
        for variant, effect in effects.items():
            rate = 100 * effect * machine * math.exp(rng.gauss(0, noise))
            rows.append(dict(variant=variant, kind="train", workload="small", repeat=r, run=f"{variant}-{r}",
                             status="ok", samples_per_s=rate, global_batch_size=64, dataset="generated",
                             peak_host_mem_mib=1000 * (1.5 if variant == "bigger" else 1), busy=False))  # fmt: skip
    return pd.DataFrame(rows)


def answers(runs):
    summary = verdicts.summary(runs.reindex(columns=list(dict.fromkeys(record.RUN_COLUMNS + list(runs.columns)))))
    return summary.set_index("variant")


def answer_counts(effects, rounds, noise, seeds=20):
    """{answer: how many of `seeds` made-up benches gave it}, for the last variant of effects."""
    variant, counts = list(effects)[-1], {}
    for seed in range(seeds):  # summarize's own steps (the answers tests below take the whole of summarize)
        ratios = summarize.paired(made_up(effects, rounds, noise, seed=seed), "samples_per_s", "baseline")[variant]
        answer = summarize.classify(*summarize.interval(ratios)[1:])
        counts[answer] = counts.get(answer, 0) + 1
    return counts


def test_a_variant_20_percent_faster_with_10_percent_noise_is_settled_faster():
    """10% noise on each run is 14% on a ratio of two: 10 rounds settle it nearly always, never the wrong way."""
    counts = answer_counts(dict(baseline=1.0, faster=1.2), rounds=10, noise=0.1)
    assert counts.get("faster", 0) >= 16 and "slower" not in counts and "same" not in counts, counts
    row = answers(made_up(dict(baseline=1.0, faster=1.2), rounds=10, noise=0.1, seed=1)).loc["faster"]
    assert row.speed_answer == "faster" and row.speedup_low > 1 and row.rounds_paired == 10
    assert "faster (95% interval" in row.verdict and "10 paired rounds" in row.verdict


def test_a_variant_identical_to_the_baseline_settles_as_no_difference():
    counts = answer_counts(dict(baseline=1.0, same=1.0), rounds=6, noise=0.005)
    assert counts.get("same", 0) >= 18, counts  # and noisier, it is rarely called faster or slower: 95% intervals
    wrong = answer_counts(dict(baseline=1.0, same=1.0), rounds=5, noise=0.2, seeds=40)
    assert wrong.get("faster", 0) + wrong.get("slower", 0) <= 5 and "same" not in wrong, wrong
    row = answers(made_up(dict(baseline=1.0, same=1.0), rounds=6, noise=0.005)).loc["same"]
    assert row.speed_answer == "same" and 0.97 <= row.speedup_low <= row.speedup_high <= 1.03
    assert "no measurable difference in speed" in row.verdict


def test_noise_wider_than_the_effect_stays_unsettled():
    counts = answer_counts(dict(baseline=1.0, maybe=1.05), rounds=4, noise=0.2)
    assert counts.get("unsettled", 0) >= 16 and "same" not in counts, counts
    row = answers(made_up(dict(baseline=1.0, maybe=1.05), rounds=4, noise=0.2)).loc["maybe"]
    assert row.speed_answer == "unsettled" and row.speedup_low < 1 < row.speedup_high
    assert "not settled after 4 rounds" in row.verdict and "wider than the effect" in row.verdict


def test_pairing_cancels_the_drift_that_hides_an_effect_from_the_spread_of_the_repeats():
    """The machine's speed drifts 30% from round to round, alike for every row: the runs' ranges overlap, the
    ratios within each round do not move."""
    runs = made_up(dict(baseline=1.0, faster=1.1), rounds=5, noise=0.01, drift=0.3)
    rates = runs.groupby("variant")["samples_per_s"]
    assert rates.max()["baseline"] > rates.min()["faster"]  # unpaired, the ranges overlap
    row = answers(runs).loc["faster"]
    assert row.speed_answer == "faster" and 1.05 < row.speedup_low < row.speedup_high < 1.15


def test_one_round_gives_no_interval_and_says_so():
    row = answers(made_up(dict(baseline=1.0, amp=0.5), rounds=1, noise=0.01)).loc["amp"]
    assert row.speed_answer == "unsettled" and pd.isna(row.speedup_low)
    assert "one paired round, no interval" in row.verdict


def test_memory_is_compared_in_pairs_too():
    summary = answers(made_up(dict(baseline=1.0, bigger=1.0), rounds=3, noise=0.01))
    assert summary.loc["bigger", "memory_answer"] == "more" and summary.loc["bigger", "memory_vs_baseline"] == 1.5


def test_the_interval_is_scipys_t_interval_on_the_log_ratios():
    ratios = [1.1, 1.2, 1.15, 1.05]
    estimate, low, high = summarize.interval(ratios)
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    t = 3.182446305284263  # Student's t, 3 degrees of freedom, 97.5th percentile
    assert estimate == pytest.approx(math.exp(mean))
    assert (low, high) == pytest.approx((math.exp(mean - t * sd / 2), math.exp(mean + t * sd / 2)))
    assert summarize.classify(low, high) == "faster" and summarize.classify(0.99, 1.02) == "same"
    assert summarize.classify(0.5, 0.9) == "slower" and summarize.classify(0.9, 1.1) == "unsettled"


# ----------------------------------------------------------------------------- --repeats auto


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
    args = types.SimpleNamespace(
        out=tmp_path, chunk=None, baseline_dir=tmp_path / "baseline", tensorboard=False, profile=False
    )
    works = dict(small=plan.Work(timeout=60, data=str(tmp_path)))
    context = dict(variants=variants, loaders=[])
    bench = speed.Bench(args, MACHINE, "b1", runs, works, dict(auto=True, context=context))
    bench.logs.mkdir(parents=True)
    execute.execute(bench, budget_s)
    return fake.launched, (bench.logs / "rounds.txt").read_text()


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


def test_an_interval_is_precise_within_5_percent_or_a_quarter_of_a_large_effect():
    assert summarize.precise(1.0, 0.96, 1.04) and not summarize.precise(1.0, 0.9, 1.1)
    assert summarize.precise(0.2, 0.16, 0.25) and not summarize.precise(0.2, 0.1, 0.4)  # log: +-0.22 against 1.61 / 4
    assert not summarize.precise(1.1, 0.95, 1.27) and not summarize.precise(1.0, math.nan, math.nan)


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


# ----------------------------------------------------------------------------- equal terms


@pytest.mark.parametrize("cores", [2, 16])
def test_every_row_of_a_plan_uses_the_same_cores(cores, described, tmp_path):
    """processes x threads = the cores, for every row, DDP's torchrun rows included (torchrun would set 1)."""
    args = cli.parse_args(["--dry-run", "--out", str(tmp_path)])
    runs, _, _ = plan.make_plan(args, 0, cores, dry_run=True)
    trained = [r for r in runs if r.kind == "train"]
    assert {r.variant for r in trained if r.processes == 2} == {"ddp", "all"}
    assert all(r.processes * int(r.env["OMP_NUM_THREADS"]) == cores for r in trained)
    assert all(int(r.env["OMP_NUM_THREADS"]) == cores for r in runs if r.kind == "loader")


def test_rounds_after_the_first_run_in_a_shuffled_order_the_seed_fixes(described, tmp_path):
    args = cli.parse_args(["--dry-run", "--out", str(tmp_path), "--repeats", "3", "--budget", "none"])
    runs, _, _ = plan.make_plan(args, 0, 2, dry_run=True)
    order = {r: [run.variant for run in runs if run.repeat == r and run.kind == "train"] for r in (1, 2, 3)}
    # no GPU: dp, a passthrough, left out; a CNN's workload leaves the transformers' techniques to theirs
    assert order[1] == plan.ordered([v for v in catalogue.TRAIN if v not in ("dp", *catalogue.TRANSFORMER_ONLY)], 0)
    assert sorted(order[2]) == sorted(order[1]) and order[2] != order[1] and order[3] != order[2]
    again, _, _ = plan.make_plan(args, 0, 2, dry_run=True)
    assert [r.name for r in again] == [r.name for r in runs]


def test_dp_is_left_out_of_a_cpu_bench_by_default_but_runs_where_asked_or_on_a_gpu(described, tmp_path):
    """Without a GPU DataParallel is a passthrough: the default bench leaves its row out (make check keeps it); named
    in --variants it runs, and on a GPU machine it is in by default."""

    def trained(argv, gpus):
        args = cli.parse_args(["--dry-run", "--out", str(tmp_path), "--repeats", "1", "--budget", "none", *argv])
        return {r.variant for r in plan.make_plan(args, gpus, 2, dry_run=True)[0] if r.kind == "train"}

    assert "dp" not in trained([], 0) and {"baseline", "ddp", "amp"} <= trained([], 0)
    assert trained(["--variants", "baseline,dp"], 0) == {"baseline", "dp"}
    assert "dp" in trained(["--workload", "small"], 1)


@pytest.mark.parametrize(
    "low, high, answer",
    [
        (0.98, 1.08, "unsettled"),  # holds 1, above the band's low edge: not faster (a faster rule at 0.97 said so)
        (1.001, 1.08, "faster"),
        (0.93, 0.999, "slower"),
        (0.92, 1.02, "unsettled"),  # holds 1, below the band's low edge: not slower, not the same
        (0.97, 1.03, "same"),  # the band's edges themselves
        (0.969, 1.03, "unsettled"),
        (1.01, 1.03, "same"),  # wholly above 1 but inside the band: the band comes first, no difference
    ],
)
def test_an_answer_is_faster_or_slower_only_where_the_interval_leaves_1(low, high, answer):
    assert summarize.classify(low, high) == answer
