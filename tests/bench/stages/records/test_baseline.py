"""bench/stages/records/baseline.py: a saved baseline compared by ratio, kept with its curves, a damaged one named (a
mode's tables kept beside it: tests/bench/modes/test_saved.py)."""

import json

import pandas as pd
import pytest

from bench import BenchError
from bench.outputs import plots
from bench.stages.records import baseline
from helpers import fake_bench


def test_baseline_comparison_reports_the_right_ratios(tmp_path):
    work = dict(
        device="cuda", model="resnet18", dataset="generated", image_size=32, global_batch_size=256, steps_timed=100
    )
    saved = pd.DataFrame(
        [
            dict(kind="train", variant="baseline", rate_median=1000.0, nvml_peak_mib=2000.0, **work),
            dict(kind="train", variant="amp", rate_median=2000.0, nvml_peak_mib=1500.0, **work),
        ]
    )
    now = saved.copy()
    now["rate_median"] = [1100.0, 1500.0]
    now["nvml_peak_mib"] = [1000.0, 1500.0]
    saved.to_csv(tmp_path / "summary.csv", index=False)
    (tmp_path / "machine.json").write_text(json.dumps({}))
    lines = baseline.compare(now, baseline.load(".", baseline_dir=tmp_path))
    assert lines == [
        "baseline: 1,100.0 samples/s, +10.0% against 1,000.0, GPU memory (NVML) 0.50x",
        "amp: 1,500.0 samples/s, -25.0% against 2,000.0, GPU memory (NVML) 1.00x",
    ]
    other_work = now.assign(global_batch_size=512)
    assert baseline.compare(other_work, saved) == []


def test_a_saved_baseline_keeps_its_curves_and_stale_ones_go(tmp_path):
    results = tmp_path / "results"
    runs = fake_bench(results)
    found = plots.gather_curves(results, "b1", runs)
    plots.plot_curves(found, results / "curves.png", {"small": "a machine"})
    runs.to_csv(results / "runs.csv", index=False)
    folder = baseline.save(results, "machine", {"machine_class": "machine"}, baseline.OUTPUTS, tmp_path / "baseline")
    assert (folder / "curves.png").exists()
    assert plots.gather_curves(folder, "b1", runs) == found  # no logs there: curves.json is what is left
    assert plots.gather_curves(folder, "b2", runs.assign(bench_id="b2")) is None  # another bench's: removed
    assert not (folder / plots.FILE).exists() and not (folder / "curves.png").exists()


def test_a_damaged_saved_baseline_is_named(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "summary.csv").write_bytes(b"variant,workload\nbaseline\n")
    with pytest.raises(BenchError, match=r"summary.csv: line 2 is damaged"):
        baseline.load("m", tmp_path)
