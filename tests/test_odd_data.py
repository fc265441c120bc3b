"""Odd but valid images are read, and read alike by loader.py and loader_dali.py; damaged ones are named.

Damaged files (truncated, empty, not an image) are tried in test_bad_input.py and test_dali.py.
"""

import importlib
import shutil
import sys

import pytest
import torch
from PIL import Image

from helpers import ROOT, build_loaders, train

CLASS = "05_hstripes_cool"


def add_image(data, make):
    """Add an odd image made from one of the data set's own to CLASS, in train and in val; return one path."""
    source = Image.open(sorted((data / "val" / CLASS).iterdir())[0]).convert("RGB")
    paths = [make(source, data / split / CLASS) for split in ("train", "val")]
    assert all(p.exists() for p in paths)
    return paths[0]


def saved(image, path, **kwargs):
    image.save(path, **kwargs)
    return path


ODD = {
    "grayscale JPEG": lambda im, d: saved(im.convert("L"), d / "gray.jpg"),
    "CMYK JPEG": lambda im, d: saved(im.convert("CMYK"), d / "cmyk.jpg"),
    "PNG": lambda im, d: saved(im, d / "image.png"),
    "PNG with alpha": lambda im, d: saved(im.convert("RGBA"), d / "alpha.png"),
    "1x1 px": lambda im, d: saved(im.resize((1, 1)), d / "dot.jpg"),
    "upper-case extension": lambda im, d: saved(im, d / "UPPER.JPEG", format="JPEG"),
    "non-ASCII name with spaces": lambda im, d: saved(im, d / "ünï cödé 名前 (2).jpg"),
    "files that are not images": lambda im, d: saved(im, d / "notes.txt", format="JPEG").with_name("notes.txt"),
}


@pytest.fixture(scope="module")
def loaders():
    sys.path.insert(0, str(ROOT))
    return importlib.import_module("loader"), importlib.import_module("loader_dali")


def read(module, data):
    """(train labels in a full epoch, val images, val labels) as the training scripts would get them."""
    train_loader, val_loader, info = build_loaders(module, data, 4)
    train_labels = torch.cat([labels for _, labels in train_loader])
    val = list(val_loader)
    return train_labels, torch.cat([images for images, _ in val]), torch.cat([labels for _, labels in val]), info


@pytest.mark.parametrize("odd", ODD)
def test_odd_images_are_read_alike_by_both_loaders(loaders, tiny_data, tmp_path, odd):
    data = shutil.copytree(tiny_data, tmp_path / "data")
    add_image(data, ODD[odd])
    (data / "train" / CLASS / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")  # what a Mac leaves behind, ignored
    base, dali = loaders
    train_base, images_base, labels_base, info = read(base, data)
    train_dali, images_dali, labels_dali, _ = read(dali, data)
    expected = 40 if odd == "files that are not images" else 41  # tiny_data: 10 classes x 4 val images
    assert info.val_size == len(labels_base) == expected and info.image_size == 16
    assert len(train_dali) == len(train_base) == info.train_size // 4 * 4
    assert torch.equal(labels_dali, labels_base)
    assert torch.allclose(images_dali, images_base, atol=1e-3), (images_dali - images_base).abs().max()


def test_class_folder_named_with_spaces_and_non_ascii(loaders, tiny_data, tmp_path):
    data = shutil.copytree(tiny_data, tmp_path / "data")
    for split in "train", "val":
        (data / split / CLASS).rename(data / split / "Zürich street (2)")
    base, dali = loaders
    _, images_base, labels_base, info = read(base, data)
    _, images_dali, labels_dali, _ = read(dali, data)
    assert info.classes[-1] == "Zürich street (2)" and info.num_classes == 10
    assert torch.equal(labels_dali, labels_base) and torch.allclose(images_dali, images_base, atol=1e-3)


@pytest.mark.slow
def test_damage_inside_a_jpeg(tiny_data, tmp_path):
    """A JPEG whose ends are intact but whose data is not: PIL reads through (with lost pixels), DALI's
    decoder refuses it. loader.py trains; loader_dali.py ends naming the file. DALI's image codec prints
    a line of its own first, so the last line is checked."""
    data = shutil.copytree(tiny_data, tmp_path / "data")
    bad = data / "train" / CLASS / "00003.jpg"
    content = bad.read_bytes()
    bad.write_bytes(content[:300] + bytes(200) + content[500:])
    args = ("--epochs", 1, "--batch-size", 8, "--warmup-steps", 0)
    result, m = train("train.py", data, tmp_path / "base.json", *args)
    assert result.returncode == 0 and m["val_samples"] == 40, result.stderr
    metrics = tmp_path / "dali.json"
    result, _ = train("train.py", data, metrics, *args, "--loader", "dali")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"train.py: error: cannot read image {bad}: DALI's decoder refuses it"), last
    assert not metrics.exists()
