"""The learning curves: every training run records its training loss (a mean per 10 steps) and its validation
accuracy at each evaluation; --tensorboard writes the same scalars; the bench gathers a bench's curves into
curves.json (kept by a saved baseline) and draws curves.png, which the report shows."""

import json

import pandas as pd
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from bench.outputs import plots
from bench.stages import baseline
from helpers import run, train

# tiny_data has 120 training images: batch 10 is 12 steps an epoch, 2 epochs 24 steps
EPOCHS = ("--epochs", 2, "--batch-size", 10, "--warmup-steps", 2, "--eval-samples", 20)


@pytest.fixture(scope="module")
def two_epochs(tiny_data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("curves")
    result, metrics = train("train.py", tiny_data, folder / "m.json", *EPOCHS, "--tensorboard", folder / "tb")
    assert result.returncode == 0, result.stderr
    return metrics, folder / "tb"


def test_a_run_has_a_loss_point_per_ten_steps_and_an_accuracy_point_per_evaluation(two_epochs):
    m, _ = two_epochs
    assert [step for step, _ in m["loss_curve"]] == [10, 20, 24]  # the last interval is the 4 steps left
    assert m["loss_curve"][0][1] == pytest.approx(m["train_loss_first"])  # the mean of the first 10 steps
    assert [(p["epoch"], p["step"]) for p in m["val_curve"]] == [(1, 12), (2, 24)]
    assert m["val_curve"][-1]["val_acc"] == m["val_acc"]
    train_s = [p["train_s"] for p in m["val_curve"]]
    assert 0 < train_s[0] < train_s[1] and all(p["train_s"] < p["wall_s"] for p in m["val_curve"])
    # the training time to the end is the warm-up and the window: evaluations and setup are left out
    assert train_s[1] == pytest.approx(m["warmup_s"] + m["window_s"], abs=1.0)
    assert m["val_curve"][1]["wall_s"] >= m["setup_s"] + m["warmup_s"] + m["window_s"] + m["eval_s"] - 0.1


def test_tensorboard_holds_the_same_curves_and_the_speed(two_epochs):
    m, folder = two_epochs
    events = EventAccumulator(str(folder))
    events.Reload()
    loss = [(e.step, e.value) for e in events.Scalars("train/loss")]
    assert [s for s, _ in loss] == [s for s, _ in m["loss_curve"]]
    assert [v for _, v in loss] == pytest.approx([v for _, v in m["loss_curve"]], rel=1e-6)
    accuracy = [(e.step, e.value) for e in events.Scalars("val/accuracy")]
    assert accuracy == [(p["step"], pytest.approx(p["val_acc"])) for p in m["val_curve"]]
    (speed,) = events.Scalars("train/samples_per_s")
    assert speed.step == 24 and speed.value == pytest.approx(m["samples_per_s"], rel=1e-6)


def fake_bench(out, bench_id="b1", variants=("baseline", "amp"), repeats=(1, 2)):
    """runs.csv rows and metrics files of a bench that trained each variant, loss curves made up."""
    rows, logs = [], out / "logs" / bench_id
    logs.mkdir(parents=True)
    for variant in variants:
        for repeat in repeats:
            name = f"{variant}-{repeat}"
            rows.append(dict(bench_id=bench_id, run=name, variant=variant, kind="train", status="ok"))
            rows[-1].update(workload="small", repeat=repeat)
            loss = [[10, 2.0 - repeat / 10], [20, 1.5], [25, 1.2]]
            val = [dict(epoch=1, step=25, val_acc=0.3 * repeat, train_s=1.0, wall_s=2.0)]
            (logs / f"{name}.json").write_text(json.dumps(dict(loss_curve=loss, val_curve=val)))
    rows.append(dict(bench_id=bench_id, run="loader-1", variant="loader", kind="loader", status="ok", repeat=1))
    return pd.DataFrame(rows)


def test_the_bench_gathers_each_runs_curves_and_draws_the_first_round(tmp_path, capsys):
    runs = fake_bench(tmp_path)
    (tmp_path / "logs" / "b1" / "amp-2.json").write_text("{torn")  # a run whose metrics cannot be read: left out
    found = plots.gather_curves(tmp_path, "b1", runs)
    assert sorted(found) == ["amp-1", "baseline-1", "baseline-2"]
    said = capsys.readouterr().err  # and named, once, whoever reads it next (the profiles do)
    assert f"warning: {tmp_path}/logs/b1/amp-2.json does not read (" in said
    assert "run amp-2's curve and profile are left out" in said
    plots.gather_curves(tmp_path, "b1", runs)
    assert capsys.readouterr().err == ""
    assert json.loads((tmp_path / plots.FILE).read_text()) == dict(bench_id="b1", runs=found)
    assert {v: r["repeat"] for v, r in plots.first_rounds(found, "small").items()} == dict(baseline=1, amp=1)
    plots.plot_curves(found, tmp_path / "curves.png", {"small": "a machine"})
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_saved_baseline_keeps_its_curves_and_stale_ones_go(tmp_path):
    results = tmp_path / "results"
    runs = fake_bench(results)
    found = plots.gather_curves(results, "b1", runs)
    plots.plot_curves(found, results / "curves.png", {"small": "a machine"})
    runs.to_csv(results / "runs.csv", index=False)
    folder = baseline.save(results, "machine", {"machine_class": "machine"}, tmp_path / "baseline")
    assert (folder / "curves.png").exists()
    assert plots.gather_curves(folder, "b1", runs) == found  # no logs there: curves.json is what is left
    assert plots.gather_curves(folder, "b2", runs.assign(bench_id="b2")) is None  # another bench's: removed
    assert not (folder / plots.FILE).exists() and not (folder / "curves.png").exists()


def test_the_bench_names_tensorboard_out_of_place(tmp_path):
    result = run("-m", "bench", "--summarize", "--tensorboard", "--out", tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--tensorboard goes with a bench or --resume, not --summarize" in result.stderr
