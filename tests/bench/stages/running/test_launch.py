"""bench/stages/running/launch.py: a run becomes a row (or a failed row with its reason), a hung run ends with its whole
tree, the warm-up its steps needed."""

import json
import sys
import threading

import psutil
import pytest

from bench.stages.planning import planned
from bench.stages.planning.planned import Run
from bench.stages.running.launch import launch
from helpers import fast_first


def fake_run(tmp_path, code, kind="train"):
    """A Run whose command is a Python snippet; it gets --metrics-out PATH like a real script."""
    script = tmp_path / "fake.py"
    script.write_text("import json, sys, time\npath = sys.argv[sys.argv.index('--metrics-out') + 1]\n" + code)
    return Run("fake-1", "fake", kind, 1, 1, [sys.executable, str(script)])


HANG = """import subprocess, time
child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])  # a rank, a loader worker
open(path + '.pid', 'w').write(str(child.pid))
time.sleep(300)  # deadlocked: never returns
"""


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


@pytest.mark.parametrize(
    "code,error",
    fast_first(
        [
            ("print('train.py: error: something named'); sys.exit(2)", "train.py: error: something named"),
            ("raise RuntimeError('boom')", "RuntimeError: boom"),
            ("time.sleep(60)", "timed out after 3 s"),
            ("open(path, 'w').write('{not json')", "no readable metrics"),
            ("json.dump({'samples_per_s': float('nan')}, open(path, 'w'))", "samples_per_s"),
            ("json.dump({'samples_per_s': 5, 'steps_timed': 2}, open(path, 'w'))", "compute_samples_per_s"),
            ("pass", "no readable metrics"),
        ]
    ),
)
def test_a_bad_run_becomes_a_failed_row(tmp_path, code, error):
    row = launch(fake_run(tmp_path, code), tmp_path, timeout=3, stop=threading.Event())
    assert row["status"] == "failed" and error in row["error"], row["error"]


def test_a_good_run_becomes_a_row_with_its_metrics(tmp_path):
    code = "json.dump({'samples_per_s': 123.0, 'argv': ['x']}, open(path, 'w'))"
    row = launch(fake_run(tmp_path, code, kind="loader"), tmp_path, timeout=30, stop=threading.Event())
    assert row["status"] == "ok" and row["samples_per_s"] == 123.0 and row["error"] is None
    assert row["wall_s"] > 0 and row["runner_cpu_s"] >= 0 and row["memory_samples"] >= 1


@pytest.mark.slow
def test_a_hung_run_is_ended_with_its_whole_tree_and_recorded_as_timed_out(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text("import json, sys, time\npath = sys.argv[sys.argv.index('--metrics-out') + 1]\n" + HANG)
    run_ = Run("hang-1", "hang", "train", 1, 1, [sys.executable, str(script)])
    row = launch(run_, tmp_path, timeout=5, stop=threading.Event())
    assert row["status"] == "failed" and "timed out after 5 s" in row["error"]
    child = int(next(tmp_path.rglob("*.pid")).read_text())
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_a_rows_exit_and_the_warm_up_its_steps_needed(tmp_path):
    script = tmp_path / "made_up.py"
    script.write_text(SCRIPT)
    run = planned.Run("made-up-1", "baseline", "train", 1, 1, [sys.executable, str(script)])
    row = launch(run, tmp_path, 60, threading.Event())
    assert row["status"] == "ok", row["error"]
    assert 0.5 <= row["exit_s"] < row["wall_s"] and row["start_s"] == 0.4
    assert row["other_s"] == pytest.approx(row["wall_s"] - 0.6)  # its start and its exit are in it
    assert row["warmup_steady_steps"] == 4  # 3 steps to steady, then the counting step
    record = json.loads((tmp_path / "made-up-1.json").read_text())
    assert "written_unix_s" in record and "warmup_step_ms" not in row  # the record's, not a column
