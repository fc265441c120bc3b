"""bench/modes/tune_loader.py (--tune-loader): the grid of settings, the rule that picks the one to use, the pairing
with the bench's own settings."""

import pytest

from bench.modes import tune_loader
from bench.stages.statistics import rules
from helpers import fast_first, run


def row(flags, speedup=None, low=None, high=None, wait=0.3, ceiling=60.0, ceiling_low=55.0):
    answer_ = rules.classify(low, high) if low is not None else None
    return dict(flags=flags, speedup=speedup, speedup_low=low, speedup_high=high, answer=answer_,
                data_wait_frac=wait, ceiling_pct=ceiling, ceiling_low_pct=ceiling_low)  # fmt: skip


def test_the_grid_goes_from_no_workers_to_the_cores_in_steps_that_make_sense():
    assert tune_loader.counts(2) == [0, 1, 2] and tune_loader.counts(16) == [0, 1, 2, 4, 8, 16]
    assert tune_loader.counts(6) == [0, 1, 2, 4, 6]
    cpu = tune_loader.grid(2, gpu=False)
    assert cpu[0] == {"--workers": 0} and len(cpu) == 1 + 2 * 2  # 1 and 2 workers, each at prefetch 2 and 4
    assert {"--workers": 2, "--prefetch-factor": 4} in cpu
    gpu = tune_loader.grid(2, gpu=True)
    assert len(gpu) == 1 + 2 * 2 * 2 and {"--workers": 1, "--prefetch-factor": 2, "--pin-memory": "off"} in gpu
    assert tune_loader.workers_grid(4) == [{"--workers": 1}, {"--workers": 2}, {"--workers": 4}]
    assert tune_loader.flags_of({"--workers": 2, "--prefetch-factor": 4}) == "--workers 2 --prefetch-factor 4"
    # the bench's own settings (its --workers, the scripts' defaults) are not a candidate against themselves
    assert tune_loader.same({"--workers": 1, "--prefetch-factor": 2}, {"--workers": 1}, gpu=False)
    assert not tune_loader.same({"--workers": 1, "--prefetch-factor": 4}, {"--workers": 1}, gpu=False)
    assert tune_loader.same({"--workers": 0}, {"--workers": 0}, gpu=True)


def test_a_data_bound_baseline_is_told_the_fastest_setting_that_is_faster_with_its_flags():
    own = row("--workers 1 (the bench's own)", wait=0.4)
    candidates = [row("--workers 2 --prefetch-factor 2", 1.3, 1.2, 1.4), row("--workers 2 --prefetch-factor 4", 1.5,
                  1.35, 1.65), row("--workers 0", 0.6, 0.5, 0.7)]  # fmt: skip
    what, said = tune_loader.recommend(own, candidates)
    assert what == "use" and said.startswith("use --workers 2 --prefetch-factor 4: 1.50x the speed of the bench's")
    assert "(95% interval 1.35x to 1.65x)" in said and "waits for data 40% of its window" in said


def test_a_baseline_that_barely_waits_or_runs_at_its_ceiling_is_told_the_loader_is_not_the_limit():
    candidates = [row("--workers 2 --prefetch-factor 2", 1.01, 0.95, 1.07)]
    what, said = tune_loader.recommend(row("own", wait=0.01, ceiling=99.0, ceiling_low=97.0), candidates)
    assert what == "not the limit" and said.startswith("the loader is not the limit here (with the bench's own")
    assert "waits for data 1% of its window and trains at 99% of its ceiling" in said
    assert (
        tune_loader.recommend(row("own", wait=0.12, ceiling=98.0, ceiling_low=96.0), candidates)[0] == "not the limit"
    )
    what, said = tune_loader.recommend(row("own", wait=0.3), candidates)  # data-bound, and nothing tried is faster
    assert what == "keep" and "no setting tried trains measurably faster (--workers 2 --prefetch-factor 2 1.01x" in said


def test_each_setting_trained_is_paired_by_round_with_the_bench_own_and_with_the_ceiling():
    """Made-up records of two rounds, the second on a machine a fifth slower: the drift cancels in each pair."""
    records = []
    for repeat, drift in (1, 1.0), (2, 0.8):
        for setting, rate, wait in ("ceiling", 200.0, 0.0), ("own", 100.0, 0.4), ("w2-p2", 150.0, 0.1):
            records.append(dict(phase="train", setting=setting, variant="baseline", repeat=repeat, status="ok",
                                samples_per_s=rate * drift, data_wait_frac=wait, cpu_loader_cores=0.5,
                                cpu_model_cores=1.4))  # fmt: skip
    rows = {r["setting"]: r for r in tune_loader.training_rows(records, {"w2-p2": "--workers 2"}, "own")}
    assert set(rows) == {"own", "w2-p2"} and rows["w2-p2"]["flags"] == "--workers 2"
    assert rows["w2-p2"]["speedup"] == pytest.approx(1.5) and rows["w2-p2"]["answer"] == "faster"
    assert rows["own"]["ceiling_pct"] == pytest.approx(50.0) and rows["w2-p2"]["ceiling_pct"] == pytest.approx(75.0)
    assert rows["own"]["data_wait_frac"] == 0.4 and rows["own"]["runs"] == 2 and "speedup" not in rows["own"]


@pytest.mark.parametrize(
    "flags,message",
    fast_first(
        [
            (["--tune-loader", "--variants", "amp"], "--tune-loader sweeps the loader's settings of the baseline"),
            (["--tune-loader", "--loaders", "none"], "--tune-loader sweeps a loader: --loaders names none"),
            (["--tune-loader", "--loaders", "loader_dali"], "--tune-loader trains at the torchvision loader's"),
            (["--tune-loader", "--parity"], "are two modes: give one"),
            (["--tune-loader", "--workers", "-1"], "--workers must be >= 0"),
        ]
    ),
)
def test_bad_flags_are_one_line(flags, message, tiny_data, tmp_path):
    result = run("-m", "bench", "--data", tiny_data, "--out", tmp_path / "out", *flags)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "out" / "tune_loader.csv").exists()
