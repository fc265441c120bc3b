"""bench/modes/scaling.py (--scaling): speed-up paired by round, efficiency per process, its flags and a GPU cluster's
plan."""

import math
import os

import pandas as pd
import pytest

from bench.modes import scaling
from bench.stages import cost
from helpers import fast_first, run

INFO = dict(gpu_count=0, cpu_model="a test CPU", cpu_cores=2)


def rows(rates, mode_batch=64):
    """Rows as launch() makes them, for {(variant, processes): [samples/s per round]} (None: a failed run)."""
    made = []
    for (variant, n), per_round in rates.items():
        for repeat, rate in enumerate(per_round, 1):
            ok = rate is not None
            made.append(dict(variant=variant, processes=n, repeat=repeat, global_batch=mode_batch * n,
                             status="ok" if ok else "failed", samples_per_s=rate if ok else None,
                             error=None if ok else "boom", peak_host_mem_mib=1000.0 * n if ok else None,
                             nvml_peak_mib=None))  # fmt: skip
    return made


CORES = len(os.sched_getaffinity(0))


def test_speedup_is_paired_by_round_and_efficiency_is_speedup_per_process(tmp_path):
    table = scaling.table_of(rows({("ddp", 1): [100, 120, 110], ("ddp", 2): [150, 180, 165]}), "weak")
    one, two = table.to_dict("records")
    assert one["answer"] == "reference" and one["speedup"] == pytest.approx(1.0)
    assert two["speedup"] == pytest.approx(1.5) and two["efficiency"] == pytest.approx(0.75)  # 1.5x on 2
    assert two["speedup_low"] == pytest.approx(1.5) and two["answer"] == "faster"  # the same ratio each round
    assert two["samples_per_s"] == 165 and two["samples_per_s_min"] == 150 and two["samples_per_s_max"] == 180
    assert two["memory_per_process_mib"] == pytest.approx(1000) and two["global_batch"] == 128
    noisy = scaling.table_of(rows({("ddp", 1): [100, 100, 100], ("ddp", 2): [80, 130, 100]}), "weak")
    assert noisy.iloc[1]["answer"] == "unsettled" and noisy.iloc[1]["speedup_low"] < 1 < noisy.iloc[1]["speedup_high"]
    slower = scaling.table_of(rows({("ddp", 1): [100, 102, 98], ("ddp", 2): [60, 61, 59]}), "weak")
    assert slower.iloc[1]["answer"] == "slower" and slower.iloc[1]["efficiency"] == pytest.approx(0.3, abs=0.01)
    failed = scaling.table_of(rows({("ddp", 1): [100, 100], ("ddp", 2): [None, None]}), "weak")
    assert failed.iloc[1]["rounds_ok"] == 0 and failed.iloc[1]["error"] == "boom"
    assert math.isnan(failed.iloc[1]["speedup"])
    scaling.write(tmp_path, table, INFO, 60.0, 3, 3)
    text = (tmp_path / "scaling.md").read_text()
    assert text.startswith("### Scaling (weak): CPU only: a test CPU") and "share its 2 cores" in text
    assert "| ddp | 2 | 128 | 165.0 | 1.50x | 1.50x to 1.50x | 75% | 1,000 |" in text
    assert "ddp x2: 165.0 samples/s, 1.50x the reference" in text and "75% efficiency: faster" in text
    assert (tmp_path / "scaling.png").read_bytes().startswith(b"\x89PNG")
    assert list(pd.read_csv(tmp_path / "scaling.csv")["processes"]) == [1, 2]


@pytest.mark.parametrize(
    "flags,words",
    fast_first(
        [
            (["--scaling", "0,2"], "--scaling 0,2: process counts of 1 or more"),
            (["--scaling", "1,x"], "--scaling 1,x: process counts, comma-separated"),
            (["--scaling", "1,1"], "--scaling 1,1: each count once"),
            (["--scaling-mode", "strong"], "--scaling-mode goes with --scaling"),
            (["--scaling", "1,2", "--scaling-mode", "fast"], "invalid choice: 'fast'"),
            (["--scaling", "1,2", "--variants", "baseline,amp"], "--variants names none of them"),
            (["--scaling", "1,2", "--summarize"], "are two modes: give one"),
            (["--scaling", "1,2", "--workload", "all"], "--scaling runs one workload"),
            (["--scaling", f"1,{CORES + 1}"], f"--scaling {CORES + 1}: {CORES} CPU cores here"),
            (["--scaling", "1,2", "--scaling-mode", "strong", "--batch-size", "15"], "it does not divide by 2"),
        ]
    ),
)
def test_bad_flags_are_one_line(flags, words, tiny_data, tmp_path):
    data = [] if "--workload" in flags else ["--data", tiny_data]
    result = run("-m", "bench", *data, "--out", tmp_path / "out", "--loaders", "none", *flags)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and words in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out" / "scaling.csv").exists()


@pytest.mark.slow
def test_a_gpu_cluster_plan_shows_every_count_and_its_batch(tmp_path):
    result = run("-m", "bench", "--scaling", "1,2,4,8", "--dry-run", "--gpus", 8, "--out", tmp_path / "o")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("scaling (weak): 24 runs, about ")  # ddp and all, 4 counts, 3 rounds
    # train_all.py compiles cold once at each count (each has its own cache): in the estimate, and said
    assert f" min (4 cold compiles of about {cost.COST_S['gpu']['cold']:.0f} s each in it):" in result.stdout
    for n in 1, 2, 4, 8:
        assert f"ddp x{n}: " in result.stdout and f"--nproc-per-node {n} train_ddp.py" in result.stdout
        assert f"--nproc-per-node {n} train_all.py --data" in result.stdout
        assert f"--batch-size {256 * n} " in result.stdout  # weak: each process keeps resnet18's 256
    strong = run("-m", "bench", "--scaling", "1,2,4", "--scaling-mode", "strong", "--dry-run", "--gpus", 4,
                 "--variants", "ddp", "--out", tmp_path / "o")  # fmt: skip
    assert strong.returncode == 0, strong.stderr
    assert strong.stdout.count("--batch-size 256 ") == 9 and "scaling (strong): 9 runs" in strong.stdout
    assert "cold compiles" not in strong.stdout.splitlines()[0]  # ddp alone compiles nothing
    over = run("-m", "bench", "--scaling", "1,16", "--dry-run", "--gpus", 8, "--out", tmp_path / "o")
    assert over.returncode == 2 and "one process per GPU, and this machine has 8 GPU(s)" in over.stderr
