"""loader.py (and what both loaders share): the loading flags, odd and damaged data, the loader bench, the fixed
evaluation sample, photos at 224 px."""

import importlib
import json
import pickle
import shutil
import sys
import time
import types

import pytest
import torch
from PIL import Image

import checks
import loader
from helpers import LOADERS, ROOT, TIMED, bomb, build_loaders, check_clean_failure, fast_first, run, train

CPU = torch.device("cpu")


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


@pytest.fixture(scope="session")
def loaders():
    sys.path.insert(0, str(ROOT))
    return importlib.import_module("loader"), importlib.import_module("loader_dali")


def read(module, data):
    """(train labels in a full epoch, val images, val labels) as the training scripts would get them."""
    train_loader, val_loader, info = build_loaders(module, data, 4)
    train_labels = torch.cat([labels for _, labels in train_loader])
    val = list(val_loader)
    return train_labels, torch.cat([images for images, _ in val]), torch.cat([labels for _, labels in val]), info


LOADER_NUMBERS = [
    ("--batch-size", "0", "1 or more"),
    ("--steps", "0", "1 or more"),
    ("--warmup-steps", "-3", "0 or more"),
    ("--seed", "-1", "0 or more"),
    ("--workers", "100000", "at most 8 loading processes per core"),
]


class Payload:
    """Unpickling this would create the file `marker`."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("loader", fast_first(["loader.py", "loader_dali.py"]))
@pytest.mark.parametrize("problem", ["missing", "empty", "batch too large", "corrupt image"])
def test_loader_bench_on_bad_data(loader, problem, data, tmp_path):
    bad = data / "train" / "05_hstripes_cool" / "00003.jpg"
    args = ["--data", data, "--bench", "--batch-size", 16, "--steps", 8, "--workers", 1]
    if problem == "missing":
        args[1] = tmp_path / "nowhere"
    elif problem == "empty":
        args[1] = tmp_path / "empty"
        args[1].mkdir()
    elif problem == "batch too large":
        args[args.index("--batch-size") + 1] = 121
    else:
        bad.write_bytes(b"")
    metrics = tmp_path / "loader.json"
    result = run(loader, *args, "--metrics-out", metrics)
    check_clean_failure(result, metrics)
    expected = {"missing": "does not exist", "empty": "neither", "batch too large": "--batch-size 121"}
    assert expected.get(problem, str(bad)) in result.stderr


@pytest.mark.torches
def test_the_loader_bench_leaves_a_padded_batch_out(monkeypatch):
    """loader_dali.py reads a shard's padded last batch and hands it to nobody: --bench does not time it."""
    loader = importlib.import_module("loader")

    class Padded:  # 3 batches an epoch, then 0.3 s on a batch it does not give, as DALILoader books it
        sampler, unused_s = None, 0.0

        def __len__(self):
            return 3

        def __iter__(self):
            for _ in range(3):
                yield torch.zeros(2, 3, 4, 4), torch.zeros(2, dtype=torch.long)
            time.sleep(0.3)
            self.unused_s += 0.3

    monkeypatch.setattr(loader, "open_data", lambda *args, **kwargs: (None, None, None))
    monkeypatch.setattr(loader, "build_loaders", lambda *args, **kwargs: (Padded(), None))
    args = types.SimpleNamespace(data="x", batch_size=2, workers=0, seed=0, download=False, warmup_steps=1, steps=8)
    args.no_data_check = False
    args.no_data_check = False
    seconds, waited, epoch_starts, _, _ = loader.bench(args, torch.device("cpu"))
    assert epoch_starts == 2 and seconds < 0.2 and waited < 0.2, (seconds, waited)


@pytest.mark.parametrize(
    "workers,expected",
    [
        (checks.Workers(2, 4, "auto", "off"), dict(num_workers=2, prefetch_factor=4, pin_memory=False,
                                                   persistent_workers=False)),
        (checks.Workers(1), dict(num_workers=1, prefetch_factor=2, pin_memory=False, persistent_workers=True)),
        (2, dict(num_workers=2, prefetch_factor=2, pin_memory=False, persistent_workers=True)),  # a count alone
        (checks.Workers(0, None, "off"), dict(num_workers=0, prefetch_factor=None, pin_memory=False,
                                              persistent_workers=False)),
    ],
)  # fmt: skip
def test_each_setting_reaches_both_dataloaders(tiny_data, workers, expected):
    train_set, val_set, info = loader.open_data(str(tiny_data), check_data=False)
    for made in loader.build_loaders(train_set, val_set, info, 8, CPU, workers, 0):
        assert {key: getattr(made, key) for key in expected} == expected


def test_on_a_gpu_pinning_is_on_unless_turned_off_and_dali_takes_threads_and_its_queue():
    gpu = torch.device("cuda")
    assert checks.dataloader_settings(checks.Workers(2), gpu)["pin_memory"] is True  # auto: on a GPU
    assert checks.dataloader_settings(checks.Workers(2, pin_memory="off"), gpu)["pin_memory"] is False
    assert checks.dali_settings(checks.Workers(3, 4)) == dict(num_threads=3, prefetch_queue_depth=4)
    assert checks.dali_settings(0) == dict(num_threads=1, prefetch_queue_depth=2)  # DALI needs a thread


@pytest.mark.slow
def test_a_run_records_the_settings_that_took_effect(tiny_data, tmp_path):
    flags = ("--steps", 3, "--warmup-steps", 1, "--workers", 2, "--prefetch-factor", 3, "--persistent-workers", "off")
    result, metrics = train("train.py", tiny_data, tmp_path / "m.json", *flags)
    assert result.returncode == 0, result.stderr
    assert (metrics["workers"], metrics["prefetch_factor"]) == (2, 3)
    assert (metrics["pin_memory"], metrics["persistent_workers"]) == (False, False)
    result, metrics = train("train.py", "synthetic", tmp_path / "s.json", "--steps", 3, "--warmup-steps", 1)
    assert result.returncode == 0 and metrics["prefetch_factor"] is None  # no loading: none of them


@pytest.mark.parametrize(
    "flags,words",
    fast_first(
        [
            (["--prefetch-factor", "0"], "--prefetch-factor 0: must be 1 or more"),
            (["--workers", "0", "--prefetch-factor", "4"], "--prefetch-factor: the batches each loading process"),
            (["--pin-memory", "on"], "--pin-memory on: page-locked batches speed their copy to a GPU; this run is on"
                                     " the cpu"),
            (["--pin-memory", "yes"], "invalid choice: 'yes'"),
            (["--persistent-workers", "off", "--loader", "dali"], "--pin-memory and --persistent-workers are the"
                                                                  " DataLoader's"),
        ]
    ),
)  # fmt: skip
def test_bad_loading_flags_are_one_line(flags, words, tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", tiny_data, metrics, "--steps", 3, "--warmup-steps", 1, *flags)
    check_clean_failure(result, metrics, words)


def test_the_loaders_bench_takes_them_too(tiny_data, tmp_path):
    result = run("loader.py", "--data", tiny_data, "--bench", "--batch-size", 8, "--steps", 4, "--workers", 1,
                 "--prefetch-factor", 0)  # fmt: skip
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "--prefetch-factor 0" in result.stderr


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


@pytest.mark.slow
@pytest.mark.parametrize("loader", LOADERS)
def test_numbers_out_of_range_in_the_loaders(tiny_data, tmp_path, loader):
    metrics = tmp_path / "loader.json"
    for flag, value, words in LOADER_NUMBERS:
        result = run(loader, "--data", tiny_data, "--bench", flag, value, "--metrics-out", metrics)
        check_clean_failure(result, metrics, f"{flag} {value}", words)


@pytest.mark.parametrize("loader", fast_first(LOADERS))
@pytest.mark.parametrize("bench", [True, False], ids=["bench", "describe"])
def test_loader_metrics_path_that_is_a_folder(tiny_data, tmp_path, loader, bench):
    result = run(loader, "--data", tiny_data, *(["--bench"] if bench else []), "--metrics-out", tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"cannot write metrics to {tmp_path}: it is a folder" in result.stderr


@pytest.mark.slow  # a limit on file size: a process of its own
@pytest.mark.parametrize("loader", LOADERS)
def test_a_full_disk_at_the_end_of_a_loader_bench(tiny_data, tmp_path, loader):
    metrics = tmp_path / "loader.json"
    cmd = (loader, "--data", tiny_data, "--bench", "--steps", 2, "--batch-size", 8, "--workers", 0)
    result = run(*cmd, "--metrics-out", metrics, file_limit=100)
    check_clean_failure(result, metrics, f"cannot write metrics to {metrics}: File too large")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("loader", fast_first(LOADERS))
def test_one_class_is_refused_by_the_loaders(data, tmp_path, loader):
    for split in "train", "val":
        for folder in sorted((data / split).iterdir())[1:]:
            shutil.rmtree(folder)
    result = run(loader, "--data", data, "--bench", "--metrics-out", tmp_path / "l.json")
    check_clean_failure(result, tmp_path / "l.json", "a classifier needs 2 or more")


@pytest.mark.parametrize("how", fast_first(["dali", "torchvision", "loader_dali.py --bench"]))
def test_both_loaders_refuse_the_same_bomb_naming_it(data, tmp_path, how):
    path = bomb(data / "train" / "05_hstripes_cool" / "00003.jpg")
    metrics = tmp_path / "m.json"
    if how == "loader_dali.py --bench":
        result = run("loader_dali.py", "--data", data, "--bench", "--metrics-out", metrics)
    else:
        result, _ = train("train.py", data, metrics, "--loader", how, *TIMED)
    check_clean_failure(result, metrics, f"cannot read image {path}", "exceeds limit", "decompression bomb")


@pytest.mark.slow
def test_loader_bench_counts_its_epoch_starts(tiny_data, tmp_path):
    # batches 1-5 warm up, 6-25 are timed; epochs begin at batches 1, 8, 15 and 22
    for script in "loader.py", "loader_dali.py":
        out = tmp_path / f"{script}.json"
        cmd = (script, "--data", tiny_data, "--bench", "--batch-size", 16, "--steps", 20, "--workers", 0)
        result = run(*cmd, "--metrics-out", out)
        assert result.returncode == 0, result.stderr
        m = json.loads(out.read_text())
        assert m["epoch_starts_timed"] == 3 and m["steps_timed"] == 20, (script, m)
        assert "3 epoch starts" in result.stdout


def test_synthetic_loader_bench(tmp_path):
    out = tmp_path / "m.json"
    result = run("loader.py", "--data", "synthetic", "--bench", "--steps", 10, "--metrics-out", out)
    assert result.returncode == 0, result.stderr
    m = json.loads(out.read_text())
    assert m["dataset"] == "synthetic" and m["image_size"] == 32 and m["num_classes"] == 10 and m["samples_per_s"] > 0


@pytest.mark.parametrize("script,loader", [("loader.py", "torchvision"), ("loader_dali.py", "dali")])
def test_loader_bench_reports_a_rate(tiny_data, tmp_path, script, loader):
    out = tmp_path / "loader.json"
    cmd = (script, "--data", tiny_data, "--bench", "--batch-size", 16, "--steps", 10, "--workers", 1)
    result = run(*cmd, "--metrics-out", out)
    assert result.returncode == 0, result.stderr
    assert f"images/s ({loader}, generated 16 px" in result.stdout
    m = json.loads(out.read_text())
    assert m["samples_per_s"] > 0 and m["loader"] == loader and m["steps_timed"] == 10
    assert bool(m["dali_version"]) == (loader == "dali")


def test_loader_describes_the_data(tiny_data):
    result = run("loader.py", "--data", tiny_data)
    assert result.returncode == 0, result.stderr
    assert "10 classes, 120 train / 40 val images" in result.stdout


def test_a_tampered_cifar_batch_is_refused_unread(tmp_path):
    """torchvision checks each CIFAR-10 file's MD5 before it unpickles anything."""
    folder = tmp_path / "cifar" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    marker = tmp_path / "code-ran"
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]:
        (folder / name).write_bytes(pickle.dumps(Payload(str(marker))))
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", folder.parent, metrics)
    assert result.returncode == 2 and "CIFAR-10" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not marker.exists(), "a pickle from the data folder was loaded"


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
@pytest.mark.parametrize("loader", ["torchvision", "dali", "nvjpeg"])
def test_both_loaders_train_on_photos_at_224(tmp_path, loader):
    photos = tmp_path / "photos"
    assert run("-m", "bench.data", photos, "--photo", "--train", 2, "--val", 1).returncode == 0
    args = ("--steps", 2, "--warmup-steps", 1, "--batch-size", 8, "--loader", loader, "--workers", 1)
    result, m = train("train.py", photos, tmp_path / "m.json", *args)
    assert result.returncode == 0, result.stderr
    assert m["image_size"] == 224 and m["dataset"] == "generated" and m["val_samples"] == 10 and m["loader"] == loader
