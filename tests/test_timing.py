"""The timing measures what it claims, checked against what the script does not measure itself:
a known delay in the loader, the epochs a run crosses, data already on the device, a busy machine."""

import json
import subprocess

import pandas as pd
import pytest

from helpers import PY, ROOT, SMALL_MODEL, fast_first, run, train

# tiny_data: 120 training images, batch 16, the last partial batch dropped: 7 steps an epoch
STEPS = ("--steps", 20, "--batch-size", 16, "--workers", 0)


def slowed(tmp_path, data, train_delay, eval_delay, *args, script="train.py"):
    metrics = tmp_path / "m.json"
    cmd = ["tests/slow_probe.py", script, train_delay, eval_delay, "--data", data, "--model", SMALL_MODEL]
    result = run(*cmd, "--no-progress", "--metrics-out", metrics, *STEPS, *args)
    assert result.returncode == 0, result.stderr
    return json.loads(metrics.read_text())


@pytest.mark.slow
def test_a_known_delay_per_batch_is_the_data_wait(tiny_data, tmp_path):
    delay = 0.1
    m = slowed(tmp_path, tiny_data, delay, 0, "--warmup-steps", 2)
    assert m["steps_timed"] == 18
    waited = m["data_wait_frac"] * m["window_s"]
    assert 18 * delay <= waited <= 18 * delay * 1.3 + 0.3, waited  # the delay, and the loader's own little time
    starved = m["starved_frac"] * m["window_s"]  # on a CPU, from host clocks: the same wait seen from the step
    assert 18 * delay <= starved <= 18 * delay * 1.3 + 0.3, starved
    # the compute rate leaves the wait out: it is what the same steps take with the data ready
    compute_s = 18 * 16 / m["compute_samples_per_s"]
    assert compute_s == pytest.approx(m["window_s"] - starved, rel=1e-6)


@pytest.mark.slow
def test_epoch_starts_inside_the_window_are_counted_exactly(tiny_data, tmp_path):
    # steps 1-2 warm up; epochs begin at steps 1, 8 and 15: two of them in the window
    result, m = train("train.py", tiny_data, tmp_path / "a.json", *STEPS, "--warmup-steps", 2)
    assert result.returncode == 0, result.stderr
    assert m["epoch_starts_timed"] == 2 and m["eval_pauses"] == 2  # the epochs ended at steps 7 and 14
    result, m = train("train.py", tiny_data, tmp_path / "b.json", *STEPS, "--warmup-steps", 0)
    assert result.returncode == 0, result.stderr
    assert m["epoch_starts_timed"] == 3 and m["steps_timed"] == 20
    result, m = train("train.py", tiny_data, tmp_path / "c.json", *STEPS, "--warmup-steps", 8)
    assert m["epoch_starts_timed"] == 1 and m["eval_pauses"] == 1


@pytest.mark.slow
def test_evaluation_is_left_out_of_the_window(tiny_data, tmp_path):
    """3 validation batches of 1 s each, after each of the 2 epochs that end inside the window: 6 s paused."""
    m = slowed(tmp_path, tiny_data, 0, 1.0, "--warmup-steps", 2)
    assert m["eval_pauses"] == 2
    assert m["window_s"] < 3, m["window_s"]  # 18 steps of a few tens of ms, and none of the 6 s of evaluation
    assert m["data_wait_frac"] < 0.5


@pytest.mark.slow
def test_loader_bench_counts_its_epoch_starts(tiny_data, tmp_path):
    # batches 1-5 warm up, 6-25 are timed; epochs begin at batches 1, 8, 15 and 22
    for loader in "loader.py", "loader_dali.py":
        out = tmp_path / f"{loader}.json"
        cmd = (loader, "--data", tiny_data, "--bench", "--batch-size", 16, "--steps", 20, "--workers", 0)
        result = run(*cmd, "--metrics-out", out)
        assert result.returncode == 0, result.stderr
        m = json.loads(out.read_text())
        assert m["epoch_starts_timed"] == 3 and m["steps_timed"] == 20, (loader, m)
        assert "3 epoch starts" in result.stdout


@pytest.mark.parametrize("script", fast_first(["train.py", "train_amp.py"]))
def test_synthetic_data_trains_with_no_data_wait(tmp_path, script):
    result, m = train(script, "synthetic:24:7", tmp_path / "m.json", "--steps", 30, "--warmup-steps", 3)
    assert result.returncode == 0, result.stderr
    assert m["dataset"] == "synthetic" and m["loader"] == "synthetic"
    assert m["image_size"] == 24 and m["num_classes"] == 7 and m["steps_timed"] == 27
    assert m["data_wait_frac"] < 0.005 and m["epoch_starts_timed"] == 0
    assert m["train_loss_final"] < 1.0  # the one batch it sees again and again is learnt (ln 7 = 1.95 at chance)
    assert m["val_samples"] == 256  # synthetic validation: 256 images, the one batch again


def test_synthetic_loader_bench(tmp_path):
    out = tmp_path / "m.json"
    result = run("loader.py", "--data", "synthetic", "--bench", "--steps", 10, "--metrics-out", out)
    assert result.returncode == 0, result.stderr
    m = json.loads(out.read_text())
    assert m["dataset"] == "synthetic" and m["image_size"] == 32 and m["num_classes"] == 10 and m["samples_per_s"] > 0


@pytest.mark.parametrize("spec", fast_first(["synthetic:0", "synthetic:32:1", "synthetic:big", "synthetic:32:10:3"]))
def test_synthetic_spec_that_makes_no_sense(tmp_path, spec):
    result, _ = train("train.py", spec, tmp_path / "m.json", "--steps", 3)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert spec in result.stderr and "synthetic[:PX[:N]]" in result.stderr


BENCH = ["--variants", "baseline", "--loaders", "none", "--repeats", 1, "--steps", 40, "--warmup-steps", 2]
BENCH += ["--batch-size", 16, "--workers", 0]


@pytest.mark.slow
def test_a_bench_beside_a_cpu_hog_is_flagged_busy(tiny_data, tmp_path):
    quiet = run("-m", "bench", "--data", tiny_data, "--out", tmp_path / "quiet", *BENCH)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    row = pd.read_csv(tmp_path / "quiet" / "runs.csv").iloc[0]
    assert not row["busy"] and row["other_cpu_frac"] < 0.10, row[["other_cpu_frac", "busy_reason"]]
    assert "busy during" not in (tmp_path / "quiet" / "summary.md").read_text()
    hog = subprocess.Popen([PY, "-c", "while True: pass"], cwd=ROOT)
    try:
        loud = run("-m", "bench", "--data", tiny_data, "--out", tmp_path / "loud", *BENCH)
    finally:
        hog.kill()
    assert loud.returncode == 0, loud.stdout + loud.stderr
    row = pd.read_csv(tmp_path / "loud" / "runs.csv").iloc[0]
    assert row["busy"] and row["other_cpu_frac"] > 0.2 and "other processes used" in row["busy_reason"]
    assert "BUSY: other processes used" in loud.stdout
    assert "busy during 1 of 1 runs" in (tmp_path / "loud" / "summary.md").read_text()


def test_a_run_records_its_start_and_each_warm_up_step(tiny_data, tmp_path):
    """The seconds before the meter (the interpreter, the imports: start_s) and each warm-up step, the first one
    first_step_s: where a run's time outside its window goes, step by step."""
    result, m = train("train.py", tiny_data, tmp_path / "m.json", "--steps", 8, "--warmup-steps", 4)
    assert result.returncode == 0, result.stderr
    assert 0 < m["start_s"] < 600 and len(m["warmup_step_ms"]) == 4 and all(ms > 0 for ms in m["warmup_step_ms"])
    assert m["warmup_step_ms"][0] == pytest.approx(1e3 * m["first_step_s"])
    assert sum(m["warmup_step_ms"]) / 1e3 <= m["warmup_s"] and m["written_unix_s"] > 0
