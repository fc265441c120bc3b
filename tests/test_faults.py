"""When things break around a bench: two benches on one results folder, a bench killed while it holds the folder."""

import os
import signal
import subprocess

import pytest

from helpers import PY, ROOT, run

HOLD = """import sys, time
sys.path.insert(0, '.')
from pathlib import Path
from bench import runner
held = runner.lock(Path(sys.argv[1]))  # kept: a lock that is collected is released
print('held', flush=True)
time.sleep(300)
"""


@pytest.fixture
def holder(tmp_path):
    """A process that holds the results folder's lock as a running bench does: (folder, process)."""
    out = tmp_path / "results"
    out.mkdir()
    process = subprocess.Popen([PY, "-c", HOLD, str(out)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    yield out, process
    process.kill()
    process.wait()


@pytest.mark.parametrize(
    "mode", [[], ["--resume"], ["--summarize"], ["--save-baseline", "x"]]
)
def test_a_second_bench_on_the_same_results_is_refused_in_one_line(holder, mode, tmp_path):
    out, _ = holder
    result = run("-m", "bench", "--out", out, "--baseline-dir", tmp_path / "saved", "--variants", "baseline", *mode)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"bench: error: another bench is using {out}") and "Traceback" not in result.stderr
    assert sorted(p.name for p in out.iterdir()) == [".bench.lock"]  # nothing written


def test_a_lock_left_by_a_killed_bench_blocks_nothing(holder):
    out, process = holder
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert (out / ".bench.lock").exists()  # the file stays; the kernel's lock went with the process
    result = run("-m", "bench", "--summarize", "--out", out)
    assert result.returncode == 2 and "no " in result.stderr and "runs.csv: run the bench first" in result.stderr
    assert "another bench" not in result.stderr


def test_a_dry_run_takes_no_lock(holder):
    out, _ = holder
    result = run("-m", "bench", "--out", out, "--dry-run", "--variants", "baseline", "--loaders", "none")
    assert result.returncode == 0, result.stderr
    assert "train.py --data" in result.stdout  # the plan, printed while another bench holds the folder
