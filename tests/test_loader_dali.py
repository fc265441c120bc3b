"""loader_dali.py: the same batches as loader.py, shards that cover the data once, shuffling, damage named, what its
DALI version lacks."""

import importlib
import shutil
import sys
from collections import Counter

import pytest
import torch

from bench import schema
from helpers import LEARN, ROOT, build_loaders, fast_first, run, train


@pytest.fixture(scope="session")
def loaders():
    """(loader, loader_dali) imported from the repository root, as train.py imports them."""
    sys.path.insert(0, str(ROOT))
    return importlib.import_module("loader"), importlib.import_module("loader_dali")


def build(module, data, batch_size, rank=0, world_size=1, seed=0):
    return build_loaders(module, data, batch_size, 1, seed, rank, world_size)


def epoch(loader):
    """All (images, labels) of one pass, concatenated."""
    batches = list(loader)
    return torch.cat([images for images, _ in batches]), torch.cat([labels for _, labels in batches])


def one_image_per_class(tiny_data, out, classes):
    """A data set whose labels name its files: class k holds one training image (and one validation image)."""
    images = sorted((tiny_data / "train").glob("*/*.jpg"))
    for k in range(classes):
        for split in "train", "val":
            (out / split / f"{k:03d}").mkdir(parents=True)
            shutil.copy(images[k], out / split / f"{k:03d}" / "0.jpg")
    return out


@pytest.mark.torches
def test_dali_leaves_out_a_reader_argument_its_version_lacks(tiny_data, monkeypatch):
    """An older DALI has no shuffle_after_epoch_seed: the pipeline is built without it, not refused."""
    from nvidia.dali import backend

    import checks
    import loader_dali

    real_schema, real_reader, given = backend.GetSchema, loader_dali.fn.readers.file, []

    class Older:  # the installed schema, less one argument
        def __init__(self, schema):
            self.schema = schema

        def __getattr__(self, name):
            return getattr(self.schema, name)

        def HasArgument(self, name):  # noqa: N802 (DALI's name)
            return name != "shuffle_after_epoch_seed" and self.schema.HasArgument(name)

    def reader(*args, **kwargs):
        given.append(set(kwargs))
        return real_reader(*args, **kwargs)

    assert checks.known_arguments("readers__File", shuffle_after_epoch_seed=1, no_such_argument=2) == {
        "shuffle_after_epoch_seed": 1
    }
    build_loaders(loader_dali, tiny_data, 16)
    monkeypatch.setattr(loader_dali.fn.readers, "file", reader)
    build_loaders(loader_dali, tiny_data, 16)
    assert "shuffle_after_epoch_seed" in given[0]  # this DALI has it
    monkeypatch.setattr(backend, "GetSchema", lambda name, **kwargs: Older(real_schema(name, **kwargs)))
    train_loader, _, _ = build_loaders(loader_dali, tiny_data, 16)
    assert "shuffle_after_epoch_seed" not in given[2] and "shard_id" in given[2]
    assert sum(len(labels) for _, labels in train_loader) == 7 * 16


@pytest.mark.torches
def test_dali_out_of_memory_is_said_at_once():
    import checks

    def read(path):
        raise AssertionError(f"{path} was read: out of memory must not send the loader hunting for a bad file")

    error = "Critical error in pipeline:\nError in MIXED operator nvidia.dali.fn.decoders.image encountered:\n"
    error += "CUDA allocation failed: cudaErrorMemoryAllocation out of memory"
    message = checks.explain_dali_error(error, ["/data/a.jpg"] * 100_000, read)
    assert message.startswith("out of memory in DALI, try a smaller --batch-size")


@pytest.mark.torches
def test_dali_books_the_time_of_the_batches_it_does_not_give(tiny_data):
    import loader_dali

    train_loader, _, _ = build_loaders(loader_dali, tiny_data, 16)
    for _ in range(2):
        assert len(list(train_loader)) == 7  # 120 images: 7 full batches, the 8th holds 8 and the padding
    assert train_loader.unused_s > 0


def test_batches_match_loader_py(loaders, tiny_data):
    base, dali = loaders
    train_base, val_base, info_base = build(base, tiny_data, 16)
    train_dali, val_dali, info_dali = build(dali, tiny_data, 16)
    assert info_dali._fields == info_base._fields and type(info_dali).__name__ == "DataInfo"
    assert info_dali.loader == "dali" and info_dali.dali_version == dali.nvidia.dali.__version__
    assert info_dali._replace(loader="", dali_version=None) == info_base._replace(loader="", dali_version=None)
    assert len(train_dali) == len(train_base) == 120 // 16 and len(val_dali) == len(val_base) == 3
    assert train_dali.sampler is None
    for images, labels in train_dali:
        assert images.shape == (16, 3, 16, 16) and images.dtype == torch.float32 and images.device.type == "cpu"
        assert labels.shape == (16,) and labels.dtype == torch.int64
    images_base, labels_base = epoch(train_base)
    images_dali, labels_dali = epoch(train_dali)
    assert images_dali.shape == images_base.shape and labels_dali.shape == labels_base.shape
    assert set(labels_dali.tolist()) == set(labels_base.tolist()) == set(range(10))
    assert abs(images_dali.min() - images_base.min()) < 0.05 and abs(images_dali.max() - images_base.max()) < 0.2
    assert abs(images_dali.mean() - images_base.mean()) < 0.2 and abs(images_dali.std() - images_base.std()) < 0.2
    # validation has no randomness: the same images in the same order, with the same values
    images_base, labels_base = epoch(val_base)
    images_dali, labels_dali = epoch(val_dali)
    assert torch.equal(labels_dali, labels_base)
    assert torch.allclose(images_dali, images_base, atol=1e-3)


def test_shards_cover_the_data_once(loaders, tiny_data, tmp_path):
    base, dali = loaders
    # validation: 39 images over 2 ranks (19 + 20), in batches of 8 that divide neither shard, for 2 epochs
    data = shutil.copytree(tiny_data, tmp_path / "data")
    next((data / "val" / "09_dots_cool").iterdir()).unlink()
    truth = Counter(base.open_data(data)[1].targets)
    assert sum(truth.values()) == 39
    ranks = [build(dali, data, 8, rank, 2)[1] for rank in range(2)]
    for _ in range(2):
        counts = Counter()
        for val_loader in ranks:
            counts.update(epoch(val_loader)[1].tolist())
        assert counts == truth  # every image once: none missed, none twice, no padding
    # training: 25 files whose labels name them, 2 ranks (12 + 13), batches of 4, the last partial one dropped
    data = one_image_per_class(tiny_data, tmp_path / "files", 25)
    ranks = [build(dali, data, 4, rank, 2)[0] for rank in range(2)]
    assert len(ranks[0]) == len(ranks[1]) == 12 // 4  # as DistributedSampler(drop_last=True) + drop_last
    rank0 = []
    for _ in range(3):
        files = [epoch(train_loader)[1].tolist() for train_loader in ranks]
        assert len(files[0]) == len(files[1]) == 12
        assert len(set(files[0]) | set(files[1])) == 24, files  # no file twice, on one rank or over both
        rank0.append(set(files[0]))
    assert rank0[0] != rank0[1] != rank0[2]  # and every epoch a rank reads other files


def test_training_order_is_shuffled_every_epoch(loaders, tiny_data):
    _, dali = loaders
    train_loader = build(dali, tiny_data, 16)[0]
    first, second = epoch(train_loader)[1].tolist(), epoch(train_loader)[1].tolist()
    assert first != sorted(first), "the first epoch reads the files in class order"
    assert len(set(first[:16])) >= 5, first  # a batch mixes classes: sorted files would give 2
    assert first != second
    assert epoch(build(dali, tiny_data, 16)[0])[1].tolist() == first  # the same seed, the same order
    assert epoch(build(dali, tiny_data, 16, seed=1)[0])[1].tolist() != first


@pytest.mark.torches
def test_train_with_dali_writes_metrics(tiny_data, tmp_path, loaders):
    args = ("--loader", "dali", "--epochs", 2, "--batch-size", 32, "--warmup-steps", 2)
    result, m = train("train.py", tiny_data, tmp_path / "m.json", *args)
    assert result.returncode == 0, result.stderr
    assert set(m) == schema.written_by("train.py"), set(m) ^ schema.written_by("train.py")
    assert m["variant"] == "dali" and m["loader"] == "dali" and m["dali_version"] == loaders[1].nvidia.dali.__version__
    assert m["val_samples"] == 40 and m["steps_timed"] == 2 * 3 - 2  # 3 full batches an epoch, 2 warm-up steps
    assert m["cpu_loader_cores"] >= 0 and m["cpu_model_cores"] > 0  # a few steps: DALI's may not reach a 10 ms tick
    assert [line.split(":")[0] for line in result.stdout.splitlines() if line.startswith("epoch")] == [
        "epoch 1/2",
        "epoch 2/2",
    ]


@pytest.mark.slow
def test_dali_learns(small_data, tmp_path):
    """The settings of tests/test_train.py::test_baseline_learns: far above chance (0.1) with DALI's batches too."""
    result, m = train("train.py", small_data, tmp_path / "m.json", "--loader", "dali", *LEARN)
    assert result.returncode == 0, result.stderr
    assert m["val_acc"] >= 0.5 and m["val_samples"] == 200, result.stdout
    assert m["cpu_loader_cores"] > 0 and m["cpu_model_cores"] > 0  # DALI's threads, named [DALI]..., are the loader's


@pytest.mark.parametrize("damage", fast_first(["truncated", "empty", "not an image", "cut after the header"]))
def test_corrupt_image_is_named(tiny_data, tmp_path, damage):
    """Found before DALI decodes anything (its CPU decoder can crash on such files), and named in one line."""
    data = shutil.copytree(tiny_data, tmp_path / "data")
    bad = data / "train" / "05_hstripes_cool" / "00003.jpg"
    content = bad.read_bytes()
    bad.write_bytes({"truncated": content[:200], "empty": b"", "not an image": b"hello\n"}.get(damage, content[:20]))
    metrics = tmp_path / "m.json"
    args = ("--loader", "dali", "--epochs", 1, "--batch-size", 64, "--warmup-steps", 0, "--workers", 2)
    result, _ = train("train.py", data, metrics, *args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"train.py: error: cannot read image {bad}"), lines[0]
    assert not metrics.exists()


def test_an_image_with_data_after_its_end_marker_is_read(tiny_data, tmp_path):
    """The quick check sends a JPEG that does not end in FFD9 to PIL, which reads it: no false alarm."""
    data = shutil.copytree(tiny_data, tmp_path / "data")
    odd = data / "train" / "05_hstripes_cool" / "00003.jpg"
    odd.write_bytes(odd.read_bytes() + b"trailing bytes a camera might add")
    result, m = train("train.py", data, tmp_path / "m.json", "--loader", "dali", "--steps", 3, "--warmup-steps", 1)
    assert result.returncode == 0, result.stderr


def test_cifar10_needs_the_default_loader(loaders, tmp_path, monkeypatch, capsys):
    """fn.readers.file reads image files, not CIFAR-10's batches (a stand-in: the real set is not downloaded)."""
    _, dali = loaders

    class StandIn(list):
        classes = [str(k) for k in range(10)]

    monkeypatch.setattr(dali.datasets, "CIFAR10", lambda root, train, download: StandIn([None] * 100))
    (tmp_path / "cifar-10-batches-py").mkdir()
    with pytest.raises(SystemExit) as stop:
        build(dali, tmp_path, 16)
    assert stop.value.code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "CIFAR-10" in error and "loader.py" in error, error


@pytest.mark.slow
def test_dali_not_installed(tiny_data, tmp_path):
    """With `import nvidia.dali` failing as it does when DALI is not installed: one line saying how to install it."""
    (tmp_path / "sitecustomize.py").write_text('import sys\n\nsys.modules["nvidia.dali"] = None  # import fails\n')
    hide = {"PYTHONPATH": str(tmp_path)}
    assert run("loader_dali.py", "--help", env=hide).returncode == 0  # the DALI loader is not used: no error
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", tiny_data, metrics, "--loader", "dali", env=hide)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "pip install nvidia-dali-cuda130" in result.stderr and not metrics.exists()
