"""Shared fixtures: tiny generated data sets, and running a script as a user would."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
# metrics fields every training script writes (DESIGN.md, "Metrics JSON")
SCHEMA = """script variant world_size device device_name model dataset image_size batch_size
global_batch_size steps_timed samples_per_s compute_samples_per_s step_time_ms_median
step_time_ms_p90 data_wait_frac epoch_time_s train_loss_final val_acc val_samples
peak_mem_allocated_mb peak_mem_reserved_mb peak_mem_allocated_mb_sum torch_version
torchvision_version cuda_version cudnn_version dali_version amp_dtype seed argv""".split()
SMALL_MODEL = "shufflenet_v2_x0_5"  # learns in seconds on a CPU; BN momentum 0.1, so eval works early


def run(*args, timeout=600, env=None, cwd=ROOT):
    """Run `python ARGS...` the way a user would, from the repository root; return CompletedProcess."""
    cmd = [PY, *map(str, args)]
    full_env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env)


def generate(out, train=12, val=4, size=16, seed=0):
    result = run("-m", "bench.data", out, "--train", train, "--val", val, "--size", size, "--seed", seed)
    assert result.returncode == 0, result.stderr
    return Path(out)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """10 classes x (12 train + 4 val) images of 16 px: enough to run every code path quickly."""
    return generate(tmp_path_factory.mktemp("data") / "tiny")


@pytest.fixture(scope="session")
def small_data(tmp_path_factory):
    """10 classes x (100 train + 20 val) images of 32 px: enough for a model to learn."""
    return generate(tmp_path_factory.mktemp("data") / "small", train=100, val=20, size=32)


LEARN = ("--epochs", 3, "--batch-size", 32)  # on small_data: enough for accuracy far above chance


@pytest.fixture(scope="session")
def baseline_small(small_data, tmp_path_factory):
    """The baseline's metrics after LEARN on small_data: what every variant is compared with."""
    result, metrics = train("train.py", small_data, tmp_path_factory.mktemp("baseline") / "m.json", *LEARN)
    assert result.returncode == 0, result.stderr
    return metrics


def train(script, data, metrics, *args, timeout=600, env=None):
    """Run a training script on data with the small model; return (CompletedProcess, metrics or None)."""
    cmd = [script, "--data", data, "--model", SMALL_MODEL, "--metrics-out", metrics, "--no-progress"]
    cmd += ["--batch-size", 16, "--workers", 1, *args]  # later flags win
    result = run(*cmd, timeout=timeout, env=env)
    written = json.loads(Path(metrics).read_text()) if Path(metrics).exists() else None
    return result, written
