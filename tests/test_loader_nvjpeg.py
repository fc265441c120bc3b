"""loader_nvjpeg.py: the same contract and batches as loader.py, the files' bytes read by the loading processes and
decoded, cropped and normalised on the device (the CPU here: the same code), a damaged file named, what it cannot
read refused in one line, its thread gone when training stops inside an epoch."""

import importlib
import shutil
import sys
import threading

import pytest
import torch

from bench import data, schema
from helpers import LEARN, ROOT, build_loaders, fast_first, run, train


@pytest.fixture(scope="session")
def loaders():
    """(loader, loader_nvjpeg) imported from the repository root, as train.py imports them."""
    sys.path.insert(0, str(ROOT))
    return importlib.import_module("loader"), importlib.import_module("loader_nvjpeg")


def epoch(loader):
    images, labels = zip(*loader)
    return torch.cat(images), torch.cat(labels)


@pytest.mark.torches
def test_the_same_contract_and_batches_as_loader_py(loaders, tiny_data):
    base, nvjpeg = loaders
    train_base, val_base, info_base = build_loaders(base, tiny_data, 16)
    train_jpeg, val_jpeg, info_jpeg = build_loaders(nvjpeg, tiny_data, 16)
    assert info_jpeg._fields == info_base._fields and type(info_jpeg).__name__ == "DataInfo"
    assert info_jpeg.loader == "nvjpeg" and info_jpeg._replace(loader="") == info_base._replace(loader="")
    assert len(train_jpeg) == len(train_base) == 120 // 16 and len(val_jpeg) == len(val_base) == 3
    for images, labels in train_jpeg:
        assert images.shape == (16, 3, 16, 16) and images.dtype == torch.float32 and images.device.type == "cpu"
        assert labels.shape == (16,) and labels.dtype == torch.int64
    images_base, labels_base = epoch(train_base)
    images_jpeg, labels_jpeg = epoch(train_jpeg)
    assert images_jpeg.shape == images_base.shape and set(labels_jpeg.tolist()) == set(labels_base.tolist())
    assert abs(images_jpeg.mean() - images_base.mean()) < 0.2 and abs(images_jpeg.std() - images_base.std()) < 0.2
    # validation has no randomness: the same images in the same order, their values as loader.py's up to the
    # rounding of a resize in floats (loader.py's resizes uint8)
    images_base, labels_base = epoch(val_base)
    images_jpeg, labels_jpeg = epoch(val_jpeg)
    assert torch.equal(labels_jpeg, labels_base)
    assert (images_jpeg - images_base).abs().max() < 0.05, (images_jpeg - images_base).abs().max()


@pytest.mark.slow
def test_photos_are_cropped_to_224_on_the_device(loaders, tmp_path):
    """Photos of varied sizes decoded in one batch, each cropped and resized alone, batched at 224 px."""
    _, nvjpeg = loaders
    photos = tmp_path / "photos"
    data.generate(photos, 2, 1, 400, photo=True, processes=1)
    train_loader, val_loader, info = build_loaders(nvjpeg, photos, 4, eval_samples=4)
    images, labels = next(iter(train_loader))
    assert info.image_size == 224 and images.shape == (4, 3, 224, 224) and labels.shape == (4,)
    images, _ = next(iter(val_loader))
    assert images.shape == (4, 3, 224, 224) and -3 < images.min() < images.max() < 3


def test_a_stop_inside_an_epoch_leaves_no_thread(loaders, tiny_data):
    """Training stops at its last step, inside an epoch: the thread decoding ahead ends with the iteration."""
    _, nvjpeg = loaders
    train_loader, _, _ = build_loaders(nvjpeg, tiny_data, 4)
    for _ in range(3):  # three epochs begun, each left after 2 of its batches
        for step, _ in enumerate(train_loader):
            assert [t.name for t in threading.enumerate()].count("nvjpeg-decode") == 1
            if step == 1:
                break
    assert "nvjpeg-decode" not in [t.name for t in threading.enumerate()]


@pytest.mark.parametrize("damage", fast_first(["truncated", "not an image"]))
def test_a_damaged_jpeg_is_named_in_one_line(tiny_data, tmp_path, damage):
    data = shutil.copytree(tiny_data, tmp_path / "data")
    bad = data / "train" / "05_hstripes_cool" / "00003.jpg"
    content = bad.read_bytes()
    bad.write_bytes({"truncated": content[: len(content) // 2], "not an image": b"hello\n"}[damage])
    metrics = tmp_path / "m.json"
    args = ("--loader", "nvjpeg", "--epochs", 1, "--batch-size", 16, "--warmup-steps", 0, "--workers", 1)
    result, _ = train("train.py", data, metrics, *args, "--no-data-check")  # past the check: the decoder meets it
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"train.py: error: cannot read image {bad}"), lines[0]
    assert not metrics.exists()


def test_a_file_that_is_not_a_jpeg_is_refused_before_training(tiny_data, tmp_path):
    data = shutil.copytree(tiny_data, tmp_path / "data")
    from PIL import Image

    png = data / "val" / "05_hstripes_cool" / "image.png"
    Image.new("RGB", (16, 16)).save(png)
    result = run("loader_nvjpeg.py", "--data", data, "--bench", "--steps", 2)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert str(png) in result.stderr and "loader.py reads any format" in result.stderr


def test_cifar10_needs_the_default_loader(loaders, tmp_path, monkeypatch, capsys):
    _, nvjpeg = loaders

    class StandIn(list):
        classes = [str(k) for k in range(10)]

    monkeypatch.setattr(nvjpeg.datasets, "CIFAR10", lambda root, train, download: StandIn([None] * 100))
    (tmp_path / "cifar-10-batches-py").mkdir()
    with pytest.raises(SystemExit) as stop:
        build_loaders(nvjpeg, tmp_path, 16)
    assert stop.value.code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "CIFAR-10" in error and "loader.py" in error, error


@pytest.mark.torches
def test_train_with_nvjpeg_writes_metrics(tiny_data, tmp_path):
    args = ("--loader", "nvjpeg", "--epochs", 2, "--batch-size", 32, "--warmup-steps", 2)
    result, m = train("train.py", tiny_data, tmp_path / "m.json", *args)
    assert result.returncode == 0, result.stderr
    assert set(m) == schema.written_by("train.py"), set(m) ^ schema.written_by("train.py")
    assert m["variant"] == "nvjpeg" and m["loader"] == "nvjpeg" and m["dali_version"] is None
    assert m["val_samples"] == 40 and m["steps_timed"] == 2 * 3 - 2  # 3 full batches an epoch, 2 warm-up steps


@pytest.mark.slow
def test_nvjpeg_learns(small_data, tmp_path):
    """The settings of tests/test_train.py::test_baseline_learns: far above chance (0.1) with these batches too."""
    result, m = train("train.py", small_data, tmp_path / "m.json", "--loader", "nvjpeg", *LEARN)
    assert result.returncode == 0, result.stderr
    assert m["val_acc"] >= 0.5 and m["val_samples"] == 200, result.stdout


def test_the_loader_bench_times_the_pipeline_alone(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result = run("loader_nvjpeg.py", "--data", tiny_data, "--bench", "--batch-size", 8, "--steps", 20,
                 "--workers", 1, "--metrics-out", metrics)  # fmt: skip
    assert result.returncode == 0, result.stderr
    import json

    m = json.loads(metrics.read_text())
    assert m["loader"] == "nvjpeg" and m["samples_per_s"] > 0 and m["steps_timed"] == 20, m
    assert m["epoch_starts_timed"] == 1 and m["steps_per_epoch"] == 120 // 8
