"""bench/modes/parity.py (--parity): the band from the seeds, when a curve learns the same or worse, the twin check, its
flags and plan."""

import math

import pandas as pd
import pytest
from scipy import stats

from bench import modes
from bench.modes import parity, speed
from helpers import run

STEPS = [10, 20, 30, 40, 50, 60, 70, 80]


def curve(losses):
    return [[step, loss] for step, loss in zip(STEPS, losses)]


def seeds(spread=0.02):
    """Five baseline seeds whose loss falls from 2.0 to 0.6, each a little off the others (its log by up to spread),
    and whose final accuracy is 0.70 +- 0.01."""
    base = [2.0, 1.6, 1.3, 1.1, 0.95, 0.8, 0.7, 0.6]
    offsets = [-2, -1, 0, 1, 2]
    return [dict(variant="baseline", status="ok", loss_curve=curve([b * math.exp(spread * o / 2) for b in base]),
                 val_acc=0.70 + 0.005 * o, diverged_step=None) for o in offsets]  # fmt: skip


def technique(losses=None, val_acc=0.70, **more):
    losses = losses or [2.0, 1.6, 1.3, 1.1, 0.95, 0.8, 0.7, 0.6]
    return dict(variant="amp", status="ok", loss_curve=curve(losses), val_acc=val_acc, diverged_step=None) | more


def test_the_band_is_a_prediction_interval_for_one_more_seed():
    mean, low, high = parity.band([1.0, 2.0, 3.0])
    half = stats.t.ppf(0.975, 2) * 1.0 * math.sqrt(1 + 1 / 3)
    assert mean == 2.0 and low == pytest.approx(2.0 - half) and high == pytest.approx(2.0 + half)
    assert all(math.isnan(v) for v in parity.band([1.0]))  # one seed: no spread, no band
    bands = parity.loss_band([curve([1.0] * 8), curve([math.e] * 8)])  # the log's band, taken back: geometric
    assert bands[10][0] == pytest.approx(math.exp(0.5)) and bands[10][1] > 0  # a loss's band stays positive


def test_a_technique_on_the_baselines_curve_learns_the_same():
    row = parity.verdict(technique(), seeds())
    assert row["verdict"] == "learns the same" and row["loss_vs_baseline"] == pytest.approx(1.0, abs=0.01)
    assert parity.line(row).startswith("amp: learns the same: its last loss 0.600, 1.00x the baseline's mean")


def test_a_curve_that_leaves_the_band_for_good_learns_worse_from_that_step_and_by_how_much():
    worse = [2.0, 1.6, 1.3, 1.1, 1.2, 1.1, 1.0, 0.9]  # above the band from step 50 on
    row = parity.verdict(technique(worse), seeds())
    assert (row["verdict"], row["from_step"]) == ("learns worse", 50) and row["loss_vs_baseline"] == pytest.approx(1.5)
    assert "learns worse from step 50: its last loss 0.900, 1.50x the baseline's mean" in parity.line(row)
    better = [2.0, 1.6, 1.3, 1.1, 0.95, 0.6, 0.5, 0.4]
    row = parity.verdict(technique(better, val_acc=0.70), seeds())
    assert (row["verdict"], row["from_step"]) == ("learns better", 60)


def test_a_passing_excursion_or_a_short_tail_is_not_a_verdict():
    excursion = [2.0, 1.6, 2.6, 2.2, 0.95, 0.8, 0.7, 0.6]  # out and back in
    assert parity.verdict(technique(excursion), seeds())["verdict"] == "learns the same"
    tail = [2.0, 1.6, 1.3, 1.1, 0.95, 0.8, 0.9, 0.8]  # out at the last two points only: fewer than MIN_POINTS
    assert parity.MIN_POINTS == 3 and parity.verdict(technique(tail), seeds())["verdict"] == "learns the same"


def test_the_band_comes_from_the_seeds_not_from_a_tolerance():
    """The same curve, 10% above the baseline's: worse against seeds that agree, the same against seeds that spread."""
    above = [loss * 1.1 for loss in [2.0, 1.6, 1.3, 1.1, 0.95, 0.8, 0.7, 0.6]]
    assert parity.verdict(technique(above), seeds(spread=0.02))["verdict"] == "learns worse"
    assert parity.verdict(technique(above), seeds(spread=0.2))["verdict"] == "learns the same"


def test_an_accuracy_below_its_band_learns_worse_and_a_diverged_or_failed_run_says_so():
    row = parity.verdict(technique(val_acc=0.55), seeds())
    assert row["verdict"] == "learns worse" and pd.isna(row.get("from_step"))
    assert "final accuracy 0.550 (band 0." in parity.line(row)
    row = parity.verdict(technique(diverged_step=37), seeds())
    assert parity.line(row) == "amp: diverged: its loss was NaN or inf from step 37"
    row = parity.verdict(technique(skipped_steps=4, steps=80), seeds())  # fp16: its scaler's skipped updates
    assert row["verdict"] == "learns the same" and row["skipped_steps"] == 4
    assert "its fp16 scaler skipped the update of 4 of its 80 steps (inf or NaN in the gradients)" in parity.line(row)
    assert "scaler" not in parity.line(parity.verdict(technique(), seeds()))  # bf16, fp32: no scaler, not said
    row = parity.verdict(technique(status="failed", error="boom"), seeds())
    assert parity.line(row) == "amp: failed: boom"


def test_a_twin_must_follow_its_twins_curve_at_the_same_seed_not_merely_the_band():
    """FSDP computes DDP's run: at the same seed its curve must be DDP's. A curve inside the band but as far from its
    twin's as another seed's is not the same run; one a rounding away is; the machine's own nondeterminism (the
    baseline run twice at one seed) widens the limit where it is larger."""
    spread = 0.2
    band_seeds = [dict(s, seed=i) for i, s in enumerate(seeds(spread))]
    typical = parity.twin_check(technique(), technique(), band_seeds)[1]
    assert typical == pytest.approx(spread, rel=1e-6)  # the median distance of the five seeds' pairs
    ddp = technique(variant="ddp", seed=0)
    losses = [loss for _, loss in ddp["loss_curve"]]
    rounding = technique([x * 1.0001 for x in losses], variant="fsdp", seed=0)
    row = parity.verdict(rounding, band_seeds, ddp)
    assert row["verdict"] == "learns the same" and row["twin"] == "ddp" and row["twin_distance"] < 0.001
    apart = technique([x * math.exp(0.6 * typical) for x in losses], variant="fsdp", seed=0)  # inside the band
    row = parity.verdict(apart, band_seeds, ddp)
    assert row["verdict"] == "not the same run" and row["twin_distance"] == pytest.approx(0.6 * typical)
    assert parity.line(row).startswith("fsdp: not the same run as ddp: at the same seed its curve is 0.120 from")
    noisy = dict(band_seeds[0], loss_curve=curve([x * math.exp(0.4 * typical) for x in losses]))  # seed 0 again
    assert parity.verdict(apart, band_seeds, ddp, again=noisy)["verdict"] == "learns the same"
    assert "twin" not in parity.verdict(apart, band_seeds)  # no twin ran: no check


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--seeds", "3"], "--seeds goes with --parity"),
        (["--parity", "--seeds", "1"], "--seeds 1: 2 to 20"),
        (["--parity", "--seeds", "x"], "invalid int value: 'x'"),
        (["--parity", "--steps", "auto"], "--parity trains a fixed number of steps: give --steps N"),
        (["--parity", "--variants", "amp,compile"], "--parity compares techniques with the baseline"),
        (["--parity", "--variants", "baseline"], "--parity compares techniques with the baseline"),
        (["--parity", "--steps", "5", "--warmup-steps", "5"], "--warmup-steps 5 leaves none of the 5 steps"),
        (["--parity", "--to-accuracy", "0.5"], "are two modes: give one"),
    ],
)
def test_bad_flags_are_one_line(flags, words, tiny_data, tmp_path):
    result = run("-m", "bench", *flags, "--data", tiny_data, "--dry-run", "--out", tmp_path / "o")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and words in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_the_plan_and_its_time_without_running(tmp_path):
    result = run("-m", "bench", "--parity", "--dry-run", "--out", tmp_path / "o")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("parity: the baseline at 5 seeds (the first twice: the twins' check) and 10 techniques")
    assert " 150 steps each, about " in lines[0]
    seeds = [line for line in lines if line.startswith("  baseline-seed")]
    assert [line.split("--seed ")[1].split()[0] for line in seeds] == ["0", "1", "2", "3", "4", "0"]
    assert seeds[-1].startswith("  baseline-seed0-again: ")
    twinless = run("-m", "bench", "--parity", "--dry-run", "--variants", "baseline,amp", "--out", tmp_path / "o")
    assert twinless.stdout.startswith("parity: the baseline at 5 seeds and 1 technique,")  # no twin: seed 0 once
    assert all("--steps 150" in line and "--model examples/smallnet.py:tiny" in line for line in lines[1:])


def test_an_explicit_zero_is_the_number_given_not_the_default(tmp_path):
    """--warmup-steps 0 is 0 warm-up steps (a falsy value once fell back to the mode's default of 5, and --steps 1
    was refused for warm-up steps nobody gave)."""
    result = run("-m", "bench", "--parity", "--steps", 1, "--warmup-steps", 0, "--dry-run", "--out", tmp_path / "o")
    assert result.returncode == 0, result.stderr
    assert all("--warmup-steps 0" in line for line in result.stdout.splitlines()[1:] if line.startswith("  "))


def test_the_speed_answer_says_faster_but_learns_worse_where_parity_found_it(tmp_path, capsys):
    """A --parity run in the results folder: its verdicts join the speed bench's rows by variant; a row that is
    faster but learns worse is listed first, apart from those that pay; the verdict and the table say it too."""
    from bench.outputs import headline, markdown
    from helpers import STEADY, runs_of

    fast = [(rate * 1.5, {}) for rate, _ in STEADY]
    runs = runs_of({"baseline": STEADY, "amp": fast, "compile": fast})
    (tmp_path / "parity.csv").write_text("variant,verdict,from_step\namp,learns worse,60\ncompile,learns the same,\n")
    summary = speed.summary_of(runs, tmp_path).set_index("variant")
    assert summary.loc["amp", "parity_verdict"] == "learns worse" and summary.loc["amp", "parity_from_step"] == 60
    assert "in --parity it learns worse from step 60 than the baseline over its seeds" in summary.loc["amp", "verdict"]
    assert "in --parity it learns the same as the baseline" in summary.loc["compile", "verdict"]
    said = headline.items(summary.reset_index(), modes.joined())
    assert [label for label, _ in said][:2] == ["Faster, but learns worse", "Pays"]
    assert said[0][1].startswith("amp 1.50x") and "compile" in said[1][1] and "amp" not in said[1][1]
    assert parity.cell(summary.loc["amp"]) == "worse from step 60"
    assert parity.cell(summary.loc["compile"]) == "the same" and parity.cell(summary.loc["baseline"]) == ""
    cells = dict(markdown.train_columns(summary.reset_index(), modes.joined()))
    assert cells["learns (--parity)"] is parity.cell and "learns (--parity)" not in dict(
        markdown.train_columns(summary.reset_index())
    )
    (tmp_path / "parity.csv").write_text("not,a,parity table\n1,2,3\n")
    again = speed.summary_of(runs, tmp_path)
    assert "parity_verdict" not in again and "goes on without --parity's verdicts" in capsys.readouterr().err
    assert "parity_verdict" not in speed.summary_of(runs, tmp_path / "none") and not capsys.readouterr().err
