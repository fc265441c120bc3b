"""A batch that does not fit in memory ends with one line saying so; the bench records it and goes on.

Simulated on a CPU by a limit on the address space: torch and ResNet-50 fit in it, the activations of
32 images of 256 px do not.
"""

import pandas as pd
import pytest

from helpers import check_clean_failure, generate, run

LIMIT = 6 * 2**30
TOO_BIG = ("--model", "resnet50", "--batch-size", 32, "--steps", 2, "--warmup-steps", 1, "--workers", 0)


@pytest.fixture(scope="module")
def big_data(tmp_path_factory):
    """10 classes x (4 train + 1 val) images of 256 px."""
    return generate(tmp_path_factory.mktemp("data") / "big", train=4, val=1, size=256)


@pytest.mark.slow
def test_a_batch_that_does_not_fit(big_data, tmp_path):
    metrics = tmp_path / "m.json"
    cmd = ("train.py", "--data", big_data, *TOO_BIG, "--no-progress", "--metrics-out", metrics)
    result = run(*cmd, memory_limit=LIMIT)
    check_clean_failure(result, metrics, "out of memory", "try a smaller --batch-size")


@pytest.mark.slow
def test_the_bench_records_it_and_goes_on(big_data, tmp_path):
    out = tmp_path / "results"
    args = ("--variants", "baseline", "--loaders", "loader", "--repeats", 1, "--loader-steps", 2)
    result = run("-m", "bench", "--data", big_data, "--out", out, *TOO_BIG, *args, memory_limit=LIMIT)
    runs = pd.read_csv(out / "runs.csv").set_index("variant")
    assert runs.loc["baseline", "status"] == "failed", result.stdout + result.stderr
    assert "out of memory, try a smaller --batch-size" in runs.loc["baseline", "error"]
    assert runs.loc["loader", "status"] == "ok" and runs.loc["loader", "samples_per_s"] > 0
    assert "| loader |" in (out / "summary.md").read_text()
