"""train.py and the loaders run as a user runs them, on tiny generated data."""

import json
import math

import pytest

from bench import schema
from helpers import SMALL_MODEL, run, train


@pytest.mark.torches
def test_train_writes_metrics(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, m = train("train.py", tiny_data, metrics, "--steps", 6, "--warmup-steps", 2, "--batch-size", 16)
    assert result.returncode == 0, result.stderr
    assert set(m) == schema.written_by("train.py"), set(m) ^ schema.written_by("train.py")
    assert m["script"] == "train.py" and m["variant"] == "baseline" and m["world_size"] == 1
    assert m["model"] == SMALL_MODEL and m["dataset"] == "generated" and m["image_size"] == 16
    assert m["batch_size"] == m["global_batch_size"] == 16 and m["steps_timed"] == 4
    assert m["device"] == "cpu" and m["peak_mem_allocated_mib"] is None and m["amp_dtype"] is None
    assert m["samples_per_s"] > 0 and m["compute_samples_per_s"] >= m["samples_per_s"]
    assert 0 <= m["data_wait_frac"] < 1
    assert 0 < m["step_time_median_ms"] <= m["step_time_p90_ms"]
    assert math.isfinite(m["train_loss_final"]) and m["train_loss_final"] > 0
    assert 0 <= m["val_acc"] <= 1
    assert m["val_samples"] == 40  # the whole validation set, once
    assert m["argv"][0].endswith("train.py")
    assert not list(tmp_path.glob("*.tmp")), "temporary metrics file left behind"
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("train.py: "))  # the summary: a heading, then
    names = ["setup", "speed", "timed", "data", "result", "memory", "cores"]  # cores: a CPU's
    assert [line.split()[0] for line in lines[at + 1 : at + 8]] == names
    assert [line for line in lines if "samples/s" in line] == [lines[at + 2]]
    assert f"first step {m['first_step_s']:.2f} s" in lines[at + 2] and m["first_step_s"] > 0
    assert "on 40 of 40 validation images" in lines[at + 5]


@pytest.mark.torches
def test_epochs_cover_the_training_set(tiny_data, tmp_path):
    # 120 training images, batch 16, last partial batch dropped: 7 steps an epoch
    result, m = train("train.py", tiny_data, tmp_path / "m.json", "--epochs", 2, "--batch-size", 16)
    assert result.returncode == 0, result.stderr
    assert m["steps_timed"] == 2 * 7 - 5  # default --warmup-steps 5
    assert [line.split(":")[0] for line in result.stdout.splitlines() if line.startswith("epoch")] == [
        "epoch 1/2",
        "epoch 2/2",
    ]


@pytest.mark.slow
def test_baseline_learns(baseline_small):
    """Far above chance (0.1) on the generated data: the data, the loop and evaluation all work."""
    assert baseline_small["val_acc"] >= 0.4  # LEARN's tiny model: 0.885 here
    assert baseline_small["val_samples"] == 200


@pytest.mark.slow
def test_same_seed_same_result(tiny_data, tmp_path):
    args = ("--steps", 4, "--warmup-steps", 1, "--batch-size", 16, "--workers", 0)
    _, a = train("train.py", tiny_data, tmp_path / "a.json", *args)
    _, b = train("train.py", tiny_data, tmp_path / "b.json", *args)
    assert a["train_loss_final"] == b["train_loss_final"] and a["val_acc"] == b["val_acc"]


@pytest.mark.parametrize("script,loader", [("loader.py", "torchvision"), ("loader_dali.py", "dali")])
def test_loader_bench_reports_a_rate(tiny_data, tmp_path, script, loader):
    out = tmp_path / "loader.json"
    cmd = (script, "--data", tiny_data, "--bench", "--batch-size", 16, "--steps", 10, "--workers", 1)
    result = run(*cmd, "--metrics-out", out)
    assert result.returncode == 0, result.stderr
    assert f"images/s ({loader}, generated 16 px" in result.stdout
    m = json.loads(out.read_text())
    assert m["samples_per_s"] > 0 and m["loader"] == loader and m["steps_timed"] == 10
    assert bool(m["dali_version"]) == (loader == "dali")


def test_loader_describes_the_data(tiny_data):
    result = run("loader.py", "--data", tiny_data)
    assert result.returncode == 0, result.stderr
    assert "10 classes, 120 train / 40 val images" in result.stdout
