"""bench/stages/statistics/summarize.py: the paired intervals on made-up runs (scipy's t interval on the log ratios),
each workload against its own baseline."""

import math
import random

import pandas as pd
import pytest

from bench import modes, schema
from bench.modes import speed
from bench.outputs import markdown
from bench.stages.records import record
from bench.stages.statistics import intervals, rules, summarize
from helpers import ROOT


def fake_rows(workload, rates, **common):
    """Rows of runs.csv for one workload: {variant: rate}, two repeats each (rate and rate * 1.1)."""
    rows = []
    for variant, rate in rates.items():
        synthetic = variant.endswith("synthetic")
        amp = "bf16" if variant.startswith("amp") else None
        dataset = "synthetic" if synthetic else "generated"
        for repeat, r in enumerate((rate, rate * 1.1), 1):
            row = dict(workload=workload, kind="train", variant=variant, status="ok", samples_per_s=r, busy=False)
            row["repeat"] = repeat
            rows.append(dict(row, dataset=dataset, amp_dtype=amp, **common))
    return rows


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
    summary = speed.summary_of(runs.reindex(columns=list(dict.fromkeys(record.RUN_COLUMNS + list(runs.columns)))))
    return summary.set_index("variant")


def answer_counts(effects, rounds, noise, seeds=20):
    """{answer: how many of `seeds` made-up benches gave it}, for the last variant of effects."""
    variant, counts = list(effects)[-1], {}
    for seed in range(seeds):  # summarize's own steps (the answers tests below take the whole of summarize)
        ratios = intervals.paired(made_up(effects, rounds, noise, seed=seed), "samples_per_s", "baseline")[variant]
        answer = rules.classify(*intervals.interval(ratios)[1:])
        counts[answer] = counts.get(answer, 0) + 1
    return counts


def test_each_workload_is_summarized_against_its_own_baseline_and_ceilings():
    runs = pd.DataFrame(
        fake_rows("small", {"baseline": 100.0, "amp": 150.0, "synthetic": 200.0, "amp-synthetic": 300.0})
        + fake_rows("imagenet", {"baseline": 10.0, "amp": 30.0, "synthetic": 20.0, "amp-synthetic": 40.0})
    ).reindex(columns=record.RUN_COLUMNS)
    summary = speed.summary_of(runs).set_index(["workload", "variant"])
    assert summary.loc[("small", "amp"), "speedup"] == pytest.approx(1.5)
    assert summary.loc[("imagenet", "amp"), "speedup"] == pytest.approx(3.0)
    assert summary.loc[("small", "baseline"), "ceiling"] == "synthetic"
    assert summary.loc[("small", "baseline"), "ceiling_pct"] == pytest.approx(50.0)
    assert summary.loc[("imagenet", "amp"), "ceiling"] == "amp-synthetic"  # mixed precision against its own
    assert summary.loc[("imagenet", "amp"), "ceiling_pct"] == pytest.approx(75.0)
    assert pd.isna(summary.loc[("small", "synthetic"), "ceiling_pct"])  # a ceiling is not read against itself
    text = markdown.markdown(speed.summary_of(runs), {"small": "A", "imagenet": "B"}, "now")
    assert text.index("### A (now)") < text.index("| synthetic (ceiling) |") < text.index("### B (now)")


def test_a_variant_20_percent_faster_with_10_percent_noise_is_settled_faster():
    """10% noise on each run is 14% on a ratio of two: 10 rounds settle it nearly always, never the wrong way."""
    counts = answer_counts(dict(baseline=1.0, faster=1.2), rounds=10, noise=0.1)
    assert counts.get("faster", 0) >= 16 and "slower" not in counts and "same" not in counts, counts
    row = answers(made_up(dict(baseline=1.0, faster=1.2), rounds=10, noise=0.1, seed=1)).loc["faster"]
    assert row.speed_answer == "faster" and row.speedup_low > 1 and row.rounds_paired == 10
    assert "faster (98% interval" in row.verdict and "10 paired rounds" in row.verdict


def test_a_variant_identical_to_the_baseline_settles_as_no_difference():
    counts = answer_counts(dict(baseline=1.0, same=1.0), rounds=6, noise=0.005)
    assert counts.get("same", 0) >= 18, counts  # and noisier, it is rarely called faster or slower: 95% intervals
    wrong = answer_counts(dict(baseline=1.0, same=1.0), rounds=5, noise=0.2, seeds=40)
    assert wrong.get("faster", 0) + wrong.get("slower", 0) <= 5 and "same" not in wrong, wrong
    row = answers(made_up(dict(baseline=1.0, same=1.0), rounds=6, noise=0.005)).loc["same"]
    assert row.speed_answer == "same" and 0.97 <= row.speedup_low <= row.speedup_high <= 1.03
    assert "within the margin in speed" in row.verdict and "inside +-10%" in row.verdict


def test_noise_wider_than_the_effect_stays_unsettled():
    counts = answer_counts(dict(baseline=1.0, maybe=1.05), rounds=4, noise=0.2)
    assert counts.get("unsettled", 0) >= 16 and "same" not in counts, counts
    row = answers(made_up(dict(baseline=1.0, maybe=1.05), rounds=4, noise=0.2)).loc["maybe"]
    assert row.speed_answer == "unsettled" and row.speedup_low < 1 < row.speedup_high
    assert "open after 4 rounds" in row.verdict and "wider than its distance from 1 and from the margin" in row.verdict


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


@pytest.mark.parametrize("speedup,cold_steps,warm_steps", [(1.25, 250, 3), (4.0, 67, 1), (2.0, 100, 1)])
def test_a_compiled_step_saves_the_baselines_step_less_its_own(speedup, cold_steps, warm_steps):
    """At a speed-up s a step takes 1/s of the baseline's, so it saves base x (1 - 1/s): 0.2 s of a 1 s step at
    1.25x, 0.75 s at 4x (at 2x the saving, 0.5 s, is also base / s: a test at 2x alone cannot tell the two apart).
    The compile's extra cost is its first step less eager's: 52 - 2 = 50 s, and 2.5 - 2 = 0.5 s warm."""
    base = dict(rate_median=100.0, global_batch_size=100, first_step_s=2.0)  # 1 s a step, 2 s the first
    row = dict(speedup=speedup, speedup_low=speedup * 0.9, speedup_high=speedup * 1.1)
    row |= dict(compile_cold_s=52.0, compile_warm_s=2.5)
    assert summarize.payback(row, base) == ("pays back", cold_steps, warm_steps)


def test_each_rows_answers_are_worked_out_once_and_again_alike_from_summary_csv(tmp_path):
    """The words and the renderers read each row's answers as fields (rules.derived): the same from a summary
    read back from summary.csv (which holds only the numbers they come from) as from the bench's own; each is its
    rule's (the step at the rate, the data wait less, the standing against the ceiling, the stall)."""
    stalled = dict(step_time_median_ms=500.0, step_time_p90_ms=700.0, data_wait_frac=0.25, global_batch_size=64)
    runs = made_up({"baseline": 1.0, "synthetic": 2.0, "bigger": 1.2}, rounds=3, noise=0.02)
    runs["dataset"] = runs["variant"].map(lambda v: "synthetic" if v == "synthetic" else "generated")
    runs = runs.assign(**{k: [v if variant == "bigger" else None for variant in runs["variant"]]
                          for k, v in stalled.items() if k != "global_batch_size"})  # fmt: skip
    summary = answers(runs)
    columns = [a.column for a in rules.DERIVED]
    bigger = summary.loc["bigger"]
    assert bigger["step_ms"] == pytest.approx(1e3 * 64 / bigger["rate_median"])
    assert bigger["compute_ms"] == pytest.approx(bigger["step_ms"] * 0.75) and bigger["wait_share"] == 0.25
    assert (bigger["stall_p90_ms"], bigger["stall_median_ms"]) == (700.0, 500.0)  # 1.4x its median: it stalls
    assert pd.isna(summary.loc["baseline", "stall_p90_ms"]) and bigger["ceiling_standing"] == "below"
    assert bigger["torch_blind"] is False and bigger["bf16_emulated"] is False and bigger["rounds_to_settle"] >= 1
    summarize.in_order(summary.reset_index()).to_csv(tmp_path / "summary.csv", index=False)
    back = pd.read_csv(tmp_path / "summary.csv")
    assert not set(columns) & set(back.columns)  # summary.csv: the numbers, not the answers
    again = rules.derived(back).set_index("variant")[columns]
    pd.testing.assert_frame_equal(again, summary[columns], check_dtype=False)


def gpu_runs(**fields):
    """Rows of runs.csv of the imagenet workload on a GPU, 3 rounds of the baseline and amp: 122 steps timed at batch
    256, each window holding one epoch start (41x ImageNet-1k's rate), the window's rate 80% of the median step's."""
    rows = []
    for r in 1, 2, 3:
        for variant, step_ms in ("baseline", 118.8), ("amp", 108.9):
            row = dict(variant=variant, kind="train", workload="imagenet", repeat=r, run=f"{variant}-{r}",
                       status="ok", device="cuda", dataset="generated", global_batch_size=256, steps_timed=122,
                       epoch_starts_timed=1, step_time_median_ms=step_ms, step_time_p90_ms=step_ms * 1.001,
                       samples_per_s=0.8 * 256e3 / step_ms, data_wait_frac=0.12, starved_frac=0.13, busy=False,
                       epoch_time_s=20_000 / (0.8 * 256e3 / step_ms), train_loss_final=1.0)  # fmt: skip
            rows.append(dict(row, **{k: v(row) if callable(v) else v for k, v in fields.items()}))
    return pd.DataFrame(rows)


def test_a_window_with_more_epoch_starts_than_the_real_set_is_read_at_its_steady_steps():
    """A record from before the steady fields, its steps steady: read at its median step, its data wait unknown."""
    summary = answers(gpu_runs())
    amp = summary.loc["amp"]
    assert amp["rate_basis"] == "median step" and amp["rate_median"] == pytest.approx(256e3 / 108.9)
    assert amp["speedup"] == pytest.approx(118.8 / 108.9) and amp["speed_answer"] == "same"  # 1.09x: inside +-10%
    assert amp["epoch_starts_over"] == pytest.approx(5004 / 122) and amp["stands_for"] == "ImageNet-1k"
    assert math.isnan(amp["wait_share"]) and math.isnan(summary.loc["baseline", "wait_share"])  # not separated
    said = markdown.markdown(summary.reset_index(), {"imagenet": "imagenet"}, "now")
    assert "(median step)" in said and "41x as often as training on ImageNet-1k" in said
    assert "Data-bound" not in said


def test_a_window_read_at_its_steady_steps_where_the_record_has_them():
    runs = gpu_runs(steady_samples_per_s=lambda row: 256e3 / row["step_time_median_ms"] * 0.99,
                    data_wait_steady_frac=0.01, starved_steady_frac=0.02)  # fmt: skip
    summary = answers(runs)
    assert summary.loc["amp", "rate_basis"] == "steady steps"
    assert summary.loc["amp", "rate_median"] == pytest.approx(0.99 * 256e3 / 108.9)
    assert summary.loc["amp", "wait_share"] == pytest.approx(0.02)  # a GPU's: the device's own, between the starts


def test_a_stalled_run_whose_window_held_a_refill_has_no_steady_rate_and_says_so():
    """Its steps stalled (the 90th percentile 1.7x the median): neither its window nor its median step is its steady
    rate: no speed-up, no answer, its window's rate a floor."""
    runs = gpu_runs(step_time_p90_ms=lambda row: row["step_time_median_ms"] * (1.7 if row["variant"] == "amp" else 1))
    summary = answers(runs)
    amp = summary.loc["amp"]
    assert amp["rate_basis"] == "unknown" and amp["runs_unsteady"] == 3 and math.isnan(amp["rate_median"])
    assert amp["speed_answer"] == "unsettled" and pd.isna(amp.get("cause"))
    assert amp["speedup_floor"] == pytest.approx(0.8 * (256e3 / 108.9) / (256e3 / 118.8))
    said = markdown.markdown(summary.reset_index(), {"imagenet": "imagenet"}, "now")
    assert "Not measured steadily" in said and "no verdict on its speed" in said and "not known (at least" in said


def test_epoch_starts_at_the_real_sets_rate_are_read_as_the_window_holds_them():
    """small stands for CIFAR-10, 195 steps an epoch at batch 256: a window of 400 steps may hold 2 starts."""
    runs = gpu_runs(workload="small", steps_timed=400, epoch_starts_timed=2, epoch_time_s=50_000 / 1000.0)
    summary = answers(runs)
    assert summary.loc["amp", "rate_basis"] == "window" and pd.isna(summary.loc["amp", "epoch_starts_over"])
    assert summary.loc["amp", "rate_median"] == pytest.approx(0.8 * 256e3 / 108.9)
    assert summary.loc["amp", "stands_for"] == "CIFAR-10"


def test_a_folder_of_ones_own_is_its_own_real_set_and_the_row_says_its_starts():
    runs = gpu_runs(workload="custom", steps_timed=25, epoch_starts_timed=25, steps_per_epoch=1)
    summary = answers(runs)
    assert summary.loc["amp", "rate_basis"] == "window" and summary.loc["amp", "stands_for"] == "its own data"
    assert "25 epoch starts each, as often as training on this folder does" in summary.loc["amp", "verdict"]


def losses(base, row, rounds):
    """Rows of two variants' runs with their final losses per round (each round at a seed of its own)."""
    return pd.DataFrame([
        dict(variant=v, kind="train", workload="small", repeat=r, run=f"{v}-{r}", status="ok", samples_per_s=100.0,
             global_batch_size=64, dataset="generated", busy=False, train_loss_final=loss)
        for r in range(rounds) for v, loss in (("baseline", base[r]), ("amp", row[r]))
    ])  # fmt: skip


def test_a_learning_difference_beyond_what_reruns_show_is_said_and_one_of_their_size_is_not():
    """The baseline's final loss over 3 rounds at 3 seeds: 1.57, 1.13, 1.92 (the fourth H200 run's spread). A row
    ending at 3x it each round learns worse: its verdict and the answer say so. One ending at 0.87, 1.69, 1.16 (the
    fourth run's compile) is a rerun's difference: nothing is said. Rounds that replay the same numbers (one seed, a
    deterministic machine) say nothing of the noise: nothing either, whatever the ratio."""
    base = [1.57, 1.13, 1.92]
    worse = answers(losses(base, [4.9, 3.4, 5.7], 3))
    assert worse.loc["amp", "learning_answer"] == "worse" and worse.loc["amp", "loss_ratio"] > 2.5
    assert "it learns worse" in worse.loc["amp", "verdict"]
    said = markdown.markdown(worse.reset_index(), {"small": "small"}, "now")
    assert "**Flag**: amp ends at" in said and "--parity" in said
    rerun = answers(losses(base, [0.87, 1.69, 1.16], 3))
    assert pd.isna(rerun.loc["amp", "learning_answer"]) and "learn" not in rerun.loc["amp", "verdict"]
    replayed = answers(losses([1.0] * 3, [1.7] * 3, 3))
    assert pd.isna(replayed.loc["amp", "learning_answer"]) and "learn" not in replayed.loc["amp", "verdict"]
    better = answers(losses(base, [0.3, 0.2, 0.4], 3))
    assert better.loc["amp", "learning_answer"] == "better"


def test_the_recipe_is_read_against_its_own_ceiling_where_it_ran():
    """all:no-ddp and it over the GPU's decode are read against all-synthetic (the same recipe with no loading); amp
    against amp-synthetic; the answer says how near the recipe's rows come to their limit."""
    rates = {"amp-synthetic": 300.0, "all-synthetic": 500.0, "baseline": 100.0, "amp": 150.0, "all:no-ddp": 400.0,
             "all:no-ddp+nvjpeg": 450.0}  # fmt: skip
    rows = []
    for repeat in (1, 2):
        for variant, rate in rates.items():
            amp = None if variant == "baseline" else "bf16"
            dataset = "synthetic" if variant.endswith("synthetic") else "generated"
            rows.append(dict(workload="imagenet", kind="train", variant=variant, status="ok", busy=False,
                             samples_per_s=rate * (1 + 0.01 * repeat), repeat=repeat, run=f"{variant}-{repeat}",
                             dataset=dataset, amp_dtype=amp, global_batch_size=256, device="cuda"))  # fmt: skip
    summary = answers(pd.DataFrame(rows))
    assert summary.loc["all:no-ddp", "ceiling"] == "all-synthetic" == summary.loc["all:no-ddp+nvjpeg", "ceiling"]
    assert summary.loc["all:no-ddp", "ceiling_pct"] == pytest.approx(80.0)
    assert summary.loc["amp", "ceiling"] == "amp-synthetic" and summary.loc["amp", "ceiling_pct"] == pytest.approx(50)
    said = markdown.markdown(summary.reset_index(), {"imagenet": "imagenet"}, "now")
    assert "the recipe's rows reach all:no-ddp 80%, all:no-ddp+nvjpeg 90% of it" in said
    assert "as the whole recipe (mixed precision, channels_last, compiled)" in said


def test_a_slow_rows_loss_is_read_only_where_it_trained_the_baselines_steps():
    """A later round's run of a slow row times fewer steps (speed.Bench.sized): its last loss is of another run, left
    out of the learning check; the rounds at the baseline's steps are read."""
    rows = losses([1.0, 1.1, 0.9], [2.0, 2.2, 1.8], 3)
    rows["command"] = [f"train.py --steps {30 if v == 'baseline' or r == 0 else 10}"
                       for v, r in zip(rows["variant"], rows["repeat"])]  # fmt: skip
    kept = intervals.at_reference_steps(rows, "baseline")
    assert set(kept.loc[kept["variant"] == "amp", "repeat"]) == {0}
    assert len(kept[kept["variant"] == "baseline"]) == 3


def beside_bench(effect, rounds, seed, row_noise=0.05, drift=0.03, noise=0.05):
    """Rows of runs.csv laid out as a CPU bench lays them out (the baseline beside every other row: B x1 x2 B row x3 B
    x4 x5 B), on a machine whose speed wanders (a random walk, sd `drift` a run) and whose runs scatter (lognormal,
    sd `noise`; the row's own `row_noise`), as the 2-core AVX2 EPYC's did (2026-11-29: its baseline runs read against
    their neighbours scattered by 0.07 to 0.08); ten seconds a run."""
    rng, rows, t, speed = random.Random(seed), [], 0, 1.0
    for r in range(1, rounds + 1):
        for variant in ["baseline", "x1", "x2", "baseline", "row", "x3", "baseline", "x4", "x5", "baseline"]:
            speed *= math.exp(rng.gauss(0, drift))
            rate = 100 * speed * (effect if variant == "row" else 1.0)
            rate *= math.exp(rng.gauss(0, row_noise if variant == "row" else noise))
            rows.append(dict(variant=variant, repeat=r, samples_per_s=rate, wall_s=0.0,
                             time_utc=pd.Timestamp("2026-11-29", tz="UTC") + pd.Timedelta(seconds=t)))  # fmt: skip
            t += 10
    return pd.DataFrame(rows)


@pytest.mark.slow
def test_the_machines_noise_settles_more_rows_in_few_rounds_and_its_intervals_still_cover():
    """200 made-up benches of 3 rounds on a machine like the AVX2 EPYC: a row 15% faster settles faster far more often
    with the machine's noise pooled than on its own 2 degrees of freedom; a row of no effect is still covered by 93% of
    its intervals or more (95% asked; the baselines' own scatter is a little wider than a row's, so it is about 98%),
    and by 90% or more where the row scatters three times as widely as the machine (read by its own spread then:
    pooled, about 87%)."""
    settled, covered, noisy_covered = {True: 0, False: 0}, 0, 0
    for seed in range(200):
        for effect, row_noise in (1.15, 0.05), (1.0, 0.05), (1.0, 0.15):
            runs = beside_bench(effect, 3, seed, row_noise=row_noise)
            ratios = intervals.paired(runs, "samples_per_s", "baseline")["row"]
            machine = intervals.noise(runs, "samples_per_s", "baseline")
            _, low, high = intervals.interval(ratios, noise=machine)
            if effect > 1:
                settled[True] += low > 1
                settled[False] += intervals.interval(ratios)[1] > 1
            elif row_noise == 0.05:
                covered += low <= 1 <= high
            else:
                noisy_covered += low <= 1 <= high
    assert settled[True] >= 1.25 * settled[False], settled
    assert covered >= 0.93 * 200 and noisy_covered >= 0.9 * 200, (covered, noisy_covered)


def test_a_row_beside_the_baseline_has_the_machines_noise_in_its_degrees_of_freedom():
    """A whole summary of a bench laid out as a CPU bench: the speed-up's degrees of freedom are the rounds less one
    and half of each baseline run between two others (2 a round here: 3 more), where the row is pooled with them."""
    runs = beside_bench(1.15, 3, seed=1)
    runs = runs.assign(kind="train", workload="small", status="ok", global_batch_size=64, dataset="generated",
                       busy=False, run=[f"{v}-{i}" for i, v in enumerate(runs["variant"])])  # fmt: skip
    row = answers(runs).loc["row"]
    assert row["rounds_paired"] == 3 and row["speedup_df"] == 2 + 3 * 2 / 2
    ratios = intervals.paired(runs.rename(columns={"samples_per_s": "rate"}), "rate", "baseline")["row"]
    machine = intervals.noise(runs.rename(columns={"samples_per_s": "rate"}), "rate", "baseline")
    assert row["speedup_df"] == intervals.degrees(ratios, machine)
    assert (row["speedup_low"], row["speedup_high"]) == pytest.approx(intervals.interval(ratios, noise=machine)[1:])


# ----------------------------------------------------------------------------- the margin rule (decide)


def test_an_answer_that_rests_on_busy_rounds_stays_open_and_says_so():
    """A row 1.3x faster in three rounds, two of them taken on a busy machine: with them it would be faster; without
    them one round is left, no interval: its answer rests on the busy rounds, so it stays open, and its verdict says
    why. With one busy round of four, the quiet three still call it faster: the answer holds, and says so too."""
    runs = made_up(dict(baseline=1.0, quick=1.3), rounds=3, noise=0.002)
    runs["busy"] = (runs["variant"] == "quick") & (runs["repeat"] > 1)
    row = answers(runs).loc["quick"]
    assert row.rounds_busy == 2 and row.quiet_answer == "unsettled" and row.speed_answer == "unsettled"
    assert row.busy_answer == "faster"
    assert "2 rounds read a run taken on a busy machine" in row.verdict and "so it stays open" in row.verdict
    runs = made_up(dict(baseline=1.0, quick=1.3), rounds=4, noise=0.002)
    runs["busy"] = (runs["variant"] == "baseline") & (runs["repeat"] == 4)  # a busy baseline counts for every row
    row = answers(runs).loc["quick"]
    assert row.rounds_busy == 1 and row.quiet_answer == "faster" == row.speed_answer
    assert "without them the answer is the same" in row.verdict
    kept_open = dict(speedup=1.19, speedup_low=1.09, speedup_high=1.30, rounds_paired=3, speed_answer="unsettled")
    assert rules.decide(1.09, 1.30, 2.0) == "faster"  # its interval alone would stop its rounds
    assert rules.needs_rounds(kept_open) == (True, "open")  # open for its busy rounds: it gets another
    quiet = answers(made_up(dict(baseline=1.0, quick=1.3), rounds=4, noise=0.002)).loc["quick"]
    assert quiet.rounds_busy == 0 and pd.isna(quiet.get("quiet_answer")) and "busy machine" not in quiet.verdict


SAVED = sorted(path.parent.name for path in (ROOT / "baseline").glob("*/runs.csv"))
# the folders whose files once drew a warning run in make test-fast; the rest in make test's slow tests
WARNED = ("cpu-2core-amd-epyc-avx2", "cpu-2core-intel-r-xeon-r-processor")


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in WARNED else pytest.mark.slow) for n in SAVED])
def test_every_saved_folder_summarizes_without_a_warning_about_its_files_or_from_a_library(name, tmp_path, capsys):
    """Every folder under baseline/ summarized again, every warning an error: pandas' "DataFrame is highly
    fragmented" PerformanceWarning ended every --summarize, fillna's Pandas4Warning a summary of schema version 1's
    rows, and the AVX2 EPYC's max_batch.csv (written before the table named its workload and model) was called "not
    a table the bench wrote": a user reads each as a fault in their own files."""
    import shutil
    import warnings

    folder = tmp_path / name
    shutil.copytree(ROOT / "baseline" / name, folder)
    runs = record.read_runs(folder / "runs.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = speed.write_outputs(folder, runs["bench_id"].iloc[-1], speed.saved_machine(folder, runs))
    assert summary is not None and (folder / "summary.md").exists()
    assert "warning" not in capsys.readouterr().err
    declared = set(schema.ROW_FIELDS) | {field for joins in modes.joined() for field in joins.fields}
    assert set(summary.columns) <= declared, "a column of the summary named in neither the schema nor a mode's Joins"


# Every rule an answer rests on, tried just inside and just outside each of its edges, as functions of numbers (no
# bench run), each test named by its rule in words: a threshold moved, widened or dropped fails one of them
# (tools/faults.py holds such edits: `python tools/faults.py --only edge`). The margin's edges are above.

HAIR = 1e-4  # a ratio this far either side of an edge


@pytest.mark.parametrize(
    "low, high, said",
    [
        (1 + HAIR, 1.2, "pays back"),
        (1 - HAIR, 1.2, "not settled"),
        (0.8, 1 - HAIR, "never"),
        (0.8, 1 + HAIR, "not settled"),
    ],
)
def test_a_compiled_row_pays_back_only_where_its_whole_interval_is_faster(low, high, said):
    row = dict(speedup=math.sqrt(low * high), speedup_low=low, speedup_high=high, compile_cold_s=10.0)
    base = dict(rate_median=1000.0, global_batch_size=100, first_step_s=0.0)  # a step of 100 ms
    assert summarize.payback(row, base)[0] == said


def test_compiles_steps_to_pay_back_are_its_compile_over_the_time_a_step_saves():
    """1.25x faster than a 100 ms step saves 20 ms a step: 10 s of compile less the eager first step's 1 s pays back
    after 450 steps; a hair more compile, 451."""
    row = dict(speedup=1.25, speedup_low=1.1, speedup_high=1.4, compile_cold_s=10.0, compile_warm_s=10.0 + 1e-3)
    base = dict(rate_median=1000.0, global_batch_size=100, first_step_s=1.0)
    assert summarize.payback(row, base) == ("pays back", 450, 451)
