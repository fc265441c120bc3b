"""The workloads and the bench's plan: generated data made once and alike, the GPU plan printed anywhere,
a fixed evaluation sample, calibrated steps, and a bench that can be continued."""

import json
import os

import pytest

from bench import catalogue, data
from bench.stages import record
from helpers import build_loaders, digest, run, train


def test_a_workload_is_made_once_and_again_when_its_parameters_change(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "ROOT", str(tmp_path))
    monkeypatch.setitem(data.WORKLOADS, "tiny", dict(train=2, val=1, size=16, photo=False))
    folder = data.ensure("tiny")
    assert folder == str(tmp_path / "data" / "tiny")
    stamp = os.stat(os.path.join(folder, "generated.json")).st_mtime_ns
    assert data.ensure("tiny") == folder and os.stat(os.path.join(folder, "generated.json")).st_mtime_ns == stamp
    monkeypatch.setitem(data.WORKLOADS, "tiny", dict(train=3, val=1, size=16, photo=False))
    data.ensure("tiny")
    assert len(list((tmp_path / "data" / "tiny" / "train").rglob("*.jpg"))) == 30


@pytest.mark.slow
def test_photos_vary_in_size_and_are_read_at_224(tmp_path):
    out = tmp_path / "photos"
    result = run("-m", "bench.data", out, "--photo", "--train", 3, "--val", 1, "--processes", 2)
    assert result.returncode == 0, result.stderr
    from PIL import Image

    sizes = {Image.open(p).size for p in (out / "train").rglob("*.jpg")}
    assert len(sizes) > 10 and all(250 <= w <= 550 and 200 <= h <= 500 for w, h in sizes), sizes
    kb = sum(p.stat().st_size for p in (out / "train").rglob("*.jpg")) / 30 / 1024
    assert 40 < kb < 200, kb  # photographic detail: tens of KB a JPEG, not a flat few
    described = run("loader.py", "--data", out)
    assert "10 classes, 30 train / 10 val images, read at 224 px" in described.stdout


@pytest.mark.slow
def test_the_same_seed_gives_the_same_bytes_on_any_number_of_processes(tmp_path):
    one = tmp_path / "one"
    assert run("-m", "bench.data", one, "--photo", "--train", 2, "--val", 1, "--processes", 1).returncode == 0
    two = tmp_path / "two"
    assert run("-m", "bench.data", two, "--photo", "--train", 2, "--val", 1, "--processes", 2).returncode == 0
    assert digest(one) == digest(two)


def dry_run(*args):
    result = run("-m", "bench", "--dry-run", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_the_gpu_plan_prints_from_any_machine():
    plan = dry_run("--workload", "imagenet", "--gpus", 1, "--repeats", 1)
    header, *lines = plan.strip().splitlines()
    commands = [line for line in lines if not line.startswith(("estimate: ", "  "))]
    assert "imagenet: resnet50" in header and "(224 px, 10 classes)" in header
    # the steps from the saved GPU runs' step times (baseline/), or calibrated on the machine where there are none
    saved = any(line.strip().startswith("from saved runs: imagenet") for line in lines)
    assert saved and ", steps " in header and "steps auto" not in header
    cnn = [v for v in catalogue.TRAIN if v not in catalogue.TRANSFORMER_ONLY]  # a CNN's rows: fsdp, ... on vit's
    assert len(commands) == len(cnn) + len(catalogue.LOADERS)
    assert all("--device cuda" in c for c in commands if "--bench" not in c)
    assert any("--nproc-per-node 1 train_ddp.py" in c for c in commands)
    assert any("--nproc-per-node 1 train_all.py" in c for c in commands)
    assert any("--data synthetic:224:10" in c and "train_amp.py" in c for c in commands)
    assert all("--eval-samples 1000" in c for c in commands if "train" in c)
    none = dry_run("--workload", "imagenet", "--gpus", 1, "--repeats", 1, "--baseline-dir", "/nonexistent")
    assert "steps auto (calibrated on the machine before the first run)" in none.splitlines()[0]
    four = dry_run("--workload", "imagenet", "--gpus", 4, "--repeats", 1)
    assert "--nproc-per-node 4 train_ddp.py" in four
    both = dry_run("--gpus", 1, "--repeats", 2)  # a GPU's default: imagenet and vit, 2 repeats interleaved
    assert both.count("# imagenet: resnet50") == 1 and both.count("# vit: vit_b_16") == 1 and "# small" not in both
    assert both.count("train_dp.py") == 2 and both.count("train_fsdp.py") == 2  # dp on the CNN, fsdp on the ViT


@pytest.mark.slow
def test_the_cpu_plan_is_the_small_workload():
    plan = dry_run("--repeats", 1)
    assert plan.startswith("# small: shufflenet_v2_x0_5") and "global batch 64, steps 30" in plan
    assert "--eval-samples 500" in plan and "--data synthetic:32:10" in plan and "imagenet" not in plan


def test_a_fixed_evaluation_sample(tiny_data, tmp_path):
    result, m = train(
        "train.py", tiny_data, tmp_path / "m.json", "--steps", 3, "--warmup-steps", 1, "--eval-samples", 13
    )
    assert result.returncode == 0 and m["val_samples"] == 13, result.stderr
    import torch

    import loader
    import loader_dali

    batches = [build_loaders(module, tiny_data, 4, 0, eval_samples=13)[1] for module in
               (loader, loader_dali)]  # fmt: skip
    labels = [torch.cat([y for _, y in val]).tolist() for val in batches]
    assert labels[0] == labels[1] and len(labels[0]) == 13 and len(set(labels[0])) == 10  # spread over the classes


@pytest.mark.slow
def test_two_ddp_processes_evaluate_the_sample_once(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    cmd = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", 2, "train_ddp.py", "--data", tiny_data]
    cmd += ["--model", "shufflenet_v2_x0_5", "--steps", 3, "--warmup-steps", 1, "--batch-size", 16, "--workers", 0]
    result = run(*cmd, "--eval-samples", 13, "--no-progress", "--metrics-out", metrics)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(metrics.read_text())["val_samples"] == 13


QUICK = ["--steps", 3, "--warmup-steps", 1, "--batch-size", 16, "--workers", 0, "--eval-samples", 8]


def test_nothing_to_resume(tmp_path):
    result = run("-m", "bench", "--resume", "--out", tmp_path)
    assert result.returncode == 2 and "no bench 'last' to resume" in result.stderr


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


@pytest.mark.slow
@pytest.mark.parametrize("loader", ["torchvision", "dali"])
def test_both_loaders_train_on_photos_at_224(tmp_path, loader):
    photos = tmp_path / "photos"
    assert run("-m", "bench.data", photos, "--photo", "--train", 2, "--val", 1).returncode == 0
    args = ("--steps", 2, "--warmup-steps", 1, "--batch-size", 8, "--loader", loader, "--workers", 1)
    result, m = train("train.py", photos, tmp_path / "m.json", *args)
    assert result.returncode == 0, result.stderr
    assert m["image_size"] == 224 and m["dataset"] == "generated" and m["val_samples"] == 10 and m["loader"] == loader


@pytest.mark.slow
def test_the_first_round_evaluates_and_the_later_ones_time_the_speed_alone():
    """Every row's accuracy is its first round's (the verdict's check that it learns alike); a later round evaluates
    nothing (--eval-samples 0), and a GPU run's 3.5 s of evaluation goes to the rounds that settle its speed."""
    plan = dry_run("--variants", "baseline,amp", "--loaders", "none", "--repeats", 3)
    runs = [line.split() for line in plan.splitlines() if " train" in line and "--eval-samples" in line]
    evaluated = [run[run.index("--eval-samples") + 1] for run in runs]
    assert evaluated == ["500", "500", "0", "0", "0", "0"], plan
