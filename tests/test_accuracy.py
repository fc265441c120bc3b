"""Time to accuracy: --target-accuracy stops a script at the first evaluation that reaches it; python -m bench
--to-accuracy ACC trains each variant until it gets there, or says plainly that it did not; the hard generated data
(bench/data.py's difficulty) has classes that overlap, so that accuracy climbs over epochs."""

import json

import pandas as pd
import pytest

from bench import data
from bench.modes import accuracy
from helpers import TINY_MODEL, check_clean_failure, fast_first, run, train


@pytest.mark.parametrize("value", fast_first(["0", "1.5", "nan", "abc"]))
def test_a_target_that_is_no_share_is_one_line(script, tiny_data, tmp_path, value):
    metrics = tmp_path / "m.json"
    result, _ = train(script[0], tiny_data, metrics, *script[1:], "--target-accuracy", value)
    check_clean_failure(result, metrics, "--target-accuracy")


def test_the_time_to_target_is_read_from_the_curve():
    points = [dict(epoch=e, step=10 * e, val_acc=a, train_s=5.0 * e, wall_s=6.0 * e) for e, a in [(1, 0.4), (2, 0.8)]]
    assert accuracy.time_to_target(dict(val_curve=points), 0.7) == (True, 2, 10.0, 12.0, 0.8, 0.8)
    assert accuracy.time_to_target(dict(val_curve=points), 0.9) == (False, 2, None, None, 0.8, 0.8)
    assert accuracy.time_to_target(dict(val_curve=[]), 0.9)[0] is False


@pytest.mark.slow
def test_the_mode_times_each_variant_to_the_target_and_says_which_did_not_get_there(small_data, tiny_data, tmp_path):
    flags = ("--model", TINY_MODEL, "--batch-size", 64, "--loaders", "none", "--workers", 1)  # any model beats 2%
    out = tmp_path / "reached"
    reach = run("-m", "bench", "--to-accuracy", 0.02, "--max-epochs", 2, "--data", small_data, "--out", out,
                "--variants", "baseline,channels_last", *flags)  # fmt: skip
    assert reach.returncode == 0, reach.stdout + reach.stderr
    table = pd.read_csv(out / "accuracy.csv").set_index("variant")
    assert table["reached"].all() and (table["epochs"] == 1).all()  # any model beats 2% on 10 classes
    assert table.loc["baseline", "speedup"] == 1.0 and table.loc["channels_last", "speedup"] > 0
    assert (table["train_s"] < table["wall_s"]).all()
    assert (out / "accuracy_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    logs = next((out / "logs").iterdir()) / "to-accuracy"
    assert len(json.loads((logs / "baseline-1.json").read_text())["val_curve"]) == 1  # it stopped there
    out = tmp_path / "not"
    never = run("-m", "bench", "--to-accuracy", 1.0, "--max-epochs", 1, "--data", tiny_data, "--out", out,
                "--variants", "baseline", *flags[:2], "--batch-size", 16, "--loaders", "none")  # fmt: skip
    assert never.returncode == 0, never.stdout + never.stderr
    row = pd.read_csv(out / "accuracy.csv").iloc[0]
    assert not row["reached"] and row["epochs"] == 1 and pd.isna(row["train_s"])
    assert "baseline: did NOT reach 1 in 1 epochs" in (out / "accuracy.md").read_text()


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
    assert not (tmp_path / "out" / "accuracy.csv").exists()


@pytest.mark.slow
def test_the_plan_and_its_time_without_running(tmp_path):
    result = run("-m", "bench", "--to-accuracy", 0.8, "--dry-run", "--loaders", "none", "--out", tmp_path / "o")
    assert result.returncode == 0, result.stderr
    assert "to accuracy 0.8: " in result.stdout and "--target-accuracy 0.8" in result.stdout
    assert "data/hard" in result.stdout and not (tmp_path / "o").exists()


def test_the_hard_data_overlaps_and_the_old_folders_stay_valid(tmp_path):
    assert "difficulty" not in data.parameters(**{k: v for k, v in data.WORKLOADS["small"].items()}, seed=0)
    made = {}
    for name, difficulty in ("easy", 0.0), ("hard", 0.8), ("hard-again", 0.8):
        data.generate(tmp_path / name, 2, 1, 32, difficulty=difficulty, processes=1)
        made[name] = (tmp_path / name / "train" / data.CLASSES[0] / "00000.jpg").read_bytes()
    assert made["hard"] == made["hard-again"] and made["hard"] != made["easy"]
    assert json.loads((tmp_path / "hard" / "generated.json").read_text())["difficulty"] == 0.8
    for flags in (["--difficulty", "1.5"], ["--difficulty", "0.5", "--photo"]):
        result = run("-m", "bench.data", tmp_path / "bad", "--train", 1, "--val", 1, *flags)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and "--difficulty" in result.stderr
