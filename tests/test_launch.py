"""bench/stages/launch.py: a run launched as the bench launches it, and what its row says of the seconds outside its
timed window: its start (the script's start_s), its exit (exit_s) and the warm-up its steps needed."""

import json
import sys
import threading

import pytest

from bench.stages import launch, plan

# a made-up training script: its record written, then half a second before it exits (its exit_s), its warm-up steady
# after 3 steps (the last, which counts the FLOPs, slow as always)
SCRIPT = """import json, sys, time
out = sys.argv[sys.argv.index("--metrics-out") + 1]
metrics = dict(samples_per_s=100.0, compute_samples_per_s=100.0, steps_timed=4, setup_s=0.1, warmup_s=0.2, window_s=0.3,
               eval_s=0.0, start_s=0.4, step_time_median_ms=100.0,
               warmup_step_ms=[900.0, 300.0, 150.0, 105.0, 100.0, 500.0])
metrics["written_unix_s"] = time.time()
json.dump(metrics, open(out, "w"))
time.sleep(0.5)
"""


def test_a_rows_exit_and_the_warm_up_its_steps_needed(tmp_path):
    script = tmp_path / "made_up.py"
    script.write_text(SCRIPT)
    run = plan.Run("made-up-1", "baseline", "train", 1, 1, [sys.executable, str(script)])
    row = launch.launch(run, tmp_path, 60, threading.Event())
    assert row["status"] == "ok", row["error"]
    assert 0.5 <= row["exit_s"] < row["wall_s"] and row["start_s"] == 0.4
    assert row["other_s"] == pytest.approx(row["wall_s"] - 0.6)  # its start and its exit are in it
    assert row["warmup_steady_steps"] == 4  # 3 steps to steady, then the counting step
    record = json.loads((tmp_path / "made-up-1.json").read_text())
    assert "written_unix_s" in record and "warmup_step_ms" not in row  # the record's, not a column
