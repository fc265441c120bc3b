"""bench/modes/to_accuracy.py (--to-accuracy): a target read as a share, the time to it read from the curve, its flags
and its plan without running."""

import pytest

from bench.modes import to_accuracy
from helpers import check_clean_failure, fast_first, run, train


@pytest.mark.parametrize("value", fast_first(["0", "1.5", "nan", "abc"]))
def test_a_target_that_is_no_share_is_one_line(script, tiny_data, tmp_path, value):
    metrics = tmp_path / "m.json"
    result, _ = train(script[0], tiny_data, metrics, *script[1:], "--target-accuracy", value)
    check_clean_failure(result, metrics, "--target-accuracy")


def test_the_time_to_target_is_read_from_the_curve():
    points = [dict(epoch=e, step=10 * e, val_acc=a, train_s=5.0 * e, wall_s=6.0 * e) for e, a in [(1, 0.4), (2, 0.8)]]
    assert to_accuracy.time_to_target(dict(val_curve=points), 0.7) == (True, 2, 10.0, 12.0, 0.8, 0.8)
    assert to_accuracy.time_to_target(dict(val_curve=points), 0.9) == (False, 2, None, None, 0.8, 0.8)
    assert to_accuracy.time_to_target(dict(val_curve=[]), 0.9)[0] is False


@pytest.mark.parametrize(
    "flags,words",
    fast_first(
        [
            (["--to-accuracy", "0"], "--to-accuracy 0: a share of the validation images"),
            (["--to-accuracy", "2"], "--to-accuracy 2: a share"),
            (["--to-accuracy", "x"], "invalid float value: 'x'"),
            (["--max-epochs", "3"], "--max-epochs goes with --to-accuracy"),
            (["--to-accuracy", "0.5", "--max-epochs", "0"], "--max-epochs 0: 1 or more"),
            (["--to-accuracy", "0.5", "--summarize"], "are two modes: give one"),
            (["--to-accuracy", "0.5", "--variants", "synthetic"], "--to-accuracy trains training variants"),
        ]
    ),
)
def test_bad_flags_are_one_line(flags, words, tiny_data, tmp_path):
    result = run("-m", "bench", "--data", tiny_data, "--out", tmp_path / "out", "--loaders", "none", *flags)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and words in result.stderr, result.stderr
    assert not (tmp_path / "out" / "to_accuracy.csv").exists()


@pytest.mark.slow
def test_the_plan_and_its_time_without_running(tmp_path):
    result = run("-m", "bench", "--to-accuracy", 0.8, "--dry-run", "--loaders", "none", "--out", tmp_path / "o")
    assert result.returncode == 0, result.stderr
    assert "to accuracy 0.8: " in result.stdout and "--target-accuracy 0.8" in result.stdout
    assert "data/hard" in result.stdout and not (tmp_path / "o").exists()


def test_an_explicit_zero_warm_up_is_zero(tmp_path):
    """--warmup-steps 0 reaches every run as 0 (a falsy value once fell back to the mode's default)."""
    result = run("-m", "bench", "--to-accuracy", 0.5, "--warmup-steps", 0, "--dry-run", "--out", tmp_path / "o")
    assert result.returncode == 0, result.stderr
    commands = [line for line in result.stdout.splitlines() if line.startswith("  ")]
    assert commands and all("--warmup-steps 0" in line for line in commands), result.stdout
