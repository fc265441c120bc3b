"""Bad input ends with exit code 2, one line on stderr naming the problem, no traceback, nothing written."""

import shutil

import pytest
from conftest import run, train


def check_clean_failure(result, metrics, *words):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert str(word) in lines[0], lines[0]
    assert not metrics.exists() and not metrics.with_name(metrics.name + ".tmp").exists()


@pytest.fixture
def data(tiny_data, tmp_path):
    """A private copy of the tiny data set, free to break."""
    return shutil.copytree(tiny_data, tmp_path / "data")


def test_missing_data_folder(tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", tmp_path / "nowhere", metrics)
    check_clean_failure(result, metrics, "nowhere", "does not exist")


def test_folder_with_no_images(tmp_path):
    (tmp_path / "empty").mkdir()
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", tmp_path / "empty", metrics)
    check_clean_failure(result, metrics, "empty", "neither")


def test_class_folders_with_no_images(data, tmp_path):
    for image in (data / "train" / "03_rings_warm").iterdir():
        image.unlink()
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", data, metrics)
    check_clean_failure(result, metrics, "03_rings_warm")


def test_val_folder_missing(data, tmp_path):
    shutil.rmtree(data / "val")
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", data, metrics)
    check_clean_failure(result, metrics, "val", "missing")


def test_train_and_val_with_different_classes(data, tmp_path):
    (data / "val" / "09_dots_cool").rename(data / "val" / "10_other")
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", data, metrics)
    check_clean_failure(result, metrics, "different classes", "09_dots_cool", "10_other")


@pytest.mark.parametrize("workers", [0, 2])
def test_corrupt_image_is_named(data, tmp_path, workers):
    bad = data / "train" / "05_hstripes_cool" / "00003.jpg"
    bad.write_bytes(bad.read_bytes()[:200])  # truncated
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", data, metrics, "--epochs", 1, "--batch-size", 8, "--workers", workers)
    check_clean_failure(result, metrics, bad, "cannot read image")


def test_unknown_model(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", tiny_data, metrics, "--model", "resnet19")
    check_clean_failure(result, metrics, "resnet19", "unknown model")


def test_cuda_asked_for_where_none_exists(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", tiny_data, metrics, "--device", "cuda", env={"CUDA_VISIBLE_DEVICES": ""})
    check_clean_failure(result, metrics, "--device cuda", "no CUDA GPU")


def test_batch_larger_than_the_training_set(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", tiny_data, metrics, "--batch-size", 121)
    check_clean_failure(result, metrics, "--batch-size 121", "120 images")


def test_metrics_path_that_cannot_be_written(tiny_data, tmp_path):
    metrics = tmp_path / "no" / "such" / "folder" / "m.json"
    result, _ = train("train.py", tiny_data, metrics)
    check_clean_failure(result, metrics, metrics, "cannot write metrics")


def test_unknown_loader(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", tiny_data, metrics, "--loader", "nosuch")
    check_clean_failure(result, metrics, "--loader nosuch")


def test_warmup_longer_than_the_run(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", tiny_data, metrics, "--steps", 3, "--warmup-steps", 3)
    check_clean_failure(result, metrics, "--warmup-steps 3")


def test_loader_bench_on_missing_data(tmp_path):
    result = run("loader.py", "--data", tmp_path / "nowhere", "--bench")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "does not exist" in result.stderr


def test_amp_fp16_on_a_cpu(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train_amp.py", tiny_data, metrics, "--amp-dtype", "fp16", "--device", "cpu")
    check_clean_failure(result, metrics, "fp16", "CUDA")


def test_amp_unknown_dtype(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train_amp.py", tiny_data, metrics, "--amp-dtype", "fp8")
    check_clean_failure(result, metrics, "--amp-dtype", "fp8")
