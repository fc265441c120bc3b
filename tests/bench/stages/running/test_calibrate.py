"""bench/stages/running/calibrate.py: calibration runs as a row runs, gives DDP rows their window, and a hung one ends
the bench in one line."""

import json
from dataclasses import replace

import pytest

from bench import BenchError, cli
from bench.stages import cost
from bench.stages.planning import build, plan, planned
from bench.stages.records import record
from bench.stages.running import calibrate, launch
from helpers import run


def test_calibration_gives_the_ddp_rows_their_window_too(monkeypatch, tmp_path):
    """With N GPUs the DDP rows split each step N ways: the steps are enough for them to time WINDOW_S too. The
    warm-up is cut to WARMUP_STEADY where the calibration's steps were steady after it, and kept where not."""
    step_ms, p90_ms = 20.0, 21.0

    def probe(run, log_dir, timeout, stop, *args):
        assert run.cmd[run.cmd.index("--warmup-steps") + 1] == str(calibrate.WARMUP_STEADY)
        return dict(status="ok", step_time_median_ms=step_ms, step_time_p90_ms=p90_ms)

    monkeypatch.setattr(launch, "launch", probe)
    info = dict(image_size=32, classes=list(range(10)))
    for variants, nproc, split in (["baseline", "ddp"], 4, 4), (["baseline", "amp"], 4, 1), (["all"], 8, 8):
        chosen = planned.Work(
            model="resnet18", batch_size=256, steps="auto", warmup_steps=20, eval_samples=10, seed=0, timeout=900
        )
        steps = calibrate.steps("data", info, chosen, 8, variants, tmp_path, nproc)
        warmup = chosen.warmup_steps
        assert warmup == calibrate.WARMUP_STEADY  # steady: p90 within 10% of the median
        assert (steps - warmup) * step_ms / 1e3 / split >= cost.WINDOW_S, (variants, steps)
        assert (steps - warmup - 1) * step_ms / 1e3 / split < cost.WINDOW_S
    chosen = planned.Work(
        model="resnet18", batch_size=256, steps="auto", warmup_steps=20, eval_samples=10, seed=0, timeout=900
    )
    assert calibrate.steps("data", info, chosen, 0, ["ddp"], tmp_path, 2) == 10 + 350  # CPU processes share cores
    p90_ms = 30.0  # not steady after 10 steps: the full warm-up
    chosen = planned.Work(
        model="resnet18", batch_size=256, steps="auto", warmup_steps=20, eval_samples=10, seed=0, timeout=900
    )
    assert calibrate.steps("data", info, chosen, 1, ["amp"], tmp_path, 1) == 20 + 350 and chosen.warmup_steps == 20


@pytest.mark.parametrize(
    "variants,expected",
    [
        (["baseline", "amp", "amp-synthetic"], "amp-synthetic"),  # the fastest: the mixed-precision ceiling
        (["compile", "all", "baseline"], "baseline"),  # no ceiling: not a compiled row, whose compile would be cold
        (["all", "ddp"], "ddp"),  # --scaling's rows
        (["all"], "all"),  # only compiled rows: the first
    ],
)
def test_the_calibration_runs_as_a_row_runs(monkeypatch, tmp_path, variants, expected):
    """It calibrates on the row named above, with the loader workers a one-process row gets (not one), under the
    run time limit, writing its log beside the rows' (the log folder made if need be)."""
    calls = []

    def probe(run, log_dir, timeout, stop, *args):
        calls.append((run, log_dir, timeout))
        return dict(status="ok", step_time_median_ms=10.0, step_time_p90_ms=10.5)

    monkeypatch.setattr(launch, "launch", probe)
    chosen = planned.Work(
        model="resnet18", batch_size=256, steps="auto", warmup_steps=20, eval_samples=10, seed=0, timeout=77
    )
    info = dict(image_size=32, classes=list(range(10)))
    calibrate.steps("data", info, chosen, 1, variants, tmp_path / "logs" / "bench", 1, cores=16)
    ((run, log_dir, timeout),) = calls
    assert run.variant == expected and timeout == 77 and log_dir == tmp_path / "logs" / "bench" and log_dir.is_dir()
    assert run.cmd[run.cmd.index("--workers") + 1] == str(build.default_workers(16, 1, True)) == "15"
    calls.clear()
    calibrate.steps("data", info, replace(chosen), 1, variants, tmp_path / "logs" / "bench", 1, workers=3, cores=16)
    assert calls[0][0].cmd[calls[0][0].cmd.index("--workers") + 1] == "3"  # --workers, as every row


def test_the_planner_launches_nothing_it_asks_the_calibration_it_is_given(monkeypatch, tiny_data, tmp_path):
    """Steps auto (a GPU plan) are the calibration's: make_plan calls the one it is given, once a workload, with the
    work and the window it fitted; a mode that gives none is told to give --steps (no run is launched from plan.py)."""
    monkeypatch.setattr(launch, "launch", lambda *a, **k: pytest.fail("the planner launched a run"))
    argv = ["--data", str(tiny_data), "--variants", "baseline,amp", "--loaders", "none", "--repeats", "1"]
    config = cli.parse_args([*argv, "--batch-size", "8"])
    asked = []

    def steps(path, info, chosen, gpu_count, variants, log, nproc, window_s, workers, cores):
        asked.append((chosen.warmup_steps, variants, window_s))
        return chosen.warmup_steps + 123

    runs, works, _ = plan.make_plan(config, 1, 2, tmp_path, calibrate=steps)
    assert asked == [(20, ["baseline", "amp"], cost.WINDOW_S)] and works["custom"].steps == 143
    assert {r.cmd[r.cmd.index("--steps") + 1] for r in runs} == {"143"}
    with pytest.raises(BenchError, match="--steps auto: this mode plans no calibration run; give --steps N"):
        plan.make_plan(config, 1, 2, tmp_path)


def test_a_calibration_that_hangs_ends_the_bench_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(launch, "launch", lambda run, *a: dict(status="failed", error="timed out after 77 s"))
    chosen = planned.Work(
        model="resnet18", batch_size=256, steps="auto", warmup_steps=20, eval_samples=10, seed=0, timeout=77
    )
    info = dict(image_size=32, classes=list(range(10)))
    with pytest.raises(BenchError, match=r"calibration \(baseline\) failed: timed out after 77 s \(its log: .*"
                       r"calibration-baseline-0.log\)"):  # fmt: skip
        calibrate.steps("data", info, chosen, 1, ["baseline", "ddp"], tmp_path, 8)


@pytest.mark.slow
def test_auto_steps_are_calibrated_for_a_window_of_seconds(tiny_data, tmp_path):
    out = tmp_path / "results"
    args = ("--data", tiny_data, "--out", out, "--variants", "synthetic", "--loaders", "none", "--repeats", 1)
    result = run("-m", "bench", *args, "--steps", "auto", "--warmup-steps", 2, "--batch-size", 8, "--workers", 0)
    assert result.returncode == 0, result.stdout + result.stderr
    calibrated = [line for line in result.stdout.splitlines() if line.startswith("calibrated: ")]
    assert calibrated and "synthetic takes" in calibrated[0]
    timed = int(calibrated[0].split(": ")[-1].split()[0])
    row = record.read_runs(out / "runs.csv").iloc[0]
    assert row["steps_timed"] == timed >= 50
    assert row["window_s"] > 3, row["window_s"]  # about 7 s, on a machine whose speed wanders
    (plan,) = (out / "logs").glob("*/plan.json")
    assert json.loads(plan.read_text())["works"]["custom"]["steps"] == timed + 2
