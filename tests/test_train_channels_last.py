"""train_channels_last.py: the format recorded, the conversion on the device after the copy."""

import functools
import importlib
import sys

import pytest
import torch

from helpers import SMALL_MODEL, TECHNIQUE_TIMED, train


class Batch(torch.Tensor):
    """A loader's batch that records what is done to it with .to(): the first thing must be the copy to the
    device; the layout is changed there, on the copy (a host transpose of a pinned batch is slow and pageable)."""

    calls = []

    def to(self, *args, **kwargs):
        Batch.calls.append((args, kwargs))
        return torch.Tensor.to(self.as_subclass(torch.Tensor), *args, **kwargs).as_subclass(Moved)


class Moved(torch.Tensor):
    """The batch on the device: its change of layout is recorded in the order of the meter's marks."""

    events = []

    def to(self, *args, **kwargs):
        if "memory_format" in kwargs:
            Moved.events.append("layout")
        return torch.Tensor.to(self.as_subclass(torch.Tensor), *args, **kwargs)


class Recorded:
    def __init__(self, inner):
        self.inner, self.sampler = inner, getattr(inner, "sampler", None)

    def __len__(self):
        return len(self.inner)

    def __iter__(self):
        for images, labels in self.inner:
            yield images.as_subclass(Batch), labels


def marked(self, mark, real):
    Moved.events.append(mark)
    return real(self)


@pytest.mark.parametrize("name", ["train_channels_last", "train_all"])
def test_channels_last_converts_on_the_device_after_the_copy(tiny_data, monkeypatch, name):
    script = importlib.import_module(name)
    import loader

    real_loaders, real_build = loader.build_loaders, script.build_model
    seen = []

    def build_loaders(*args, **kwargs):
        train_loader, val_loader = real_loaders(*args, **kwargs)
        return Recorded(train_loader), Recorded(val_loader)

    def build_model(*args):
        model = real_build(*args)
        model.register_forward_pre_hook(lambda _, x: seen.append(x[0].is_contiguous(memory_format=torch.channels_last)))
        return model

    monkeypatch.setattr(loader, "build_loaders", build_loaders)
    monkeypatch.setattr(script, "build_model", build_model)
    monkeypatch.setattr(torch, "compile", lambda model, **kwargs: model)  # what is compiled is not the question here
    meter = importlib.import_module("meter").Meter
    for mark in "batch", "pause":
        monkeypatch.setattr(meter, mark, functools.partialmethod(marked, mark, getattr(meter, mark)))
    argv = [f"{name}.py", "--data", str(tiny_data), "--model", SMALL_MODEL, "--batch-size", "16", "--steps", "3"]
    monkeypatch.setattr(
        sys, "argv", [*argv, "--warmup-steps", "1", "--workers", "0", "--device", "cpu", "--no-progress"]
    )
    Batch.calls.clear()
    Moved.events.clear()
    script.main()
    assert len(Batch.calls) >= 3 + 3, Batch.calls  # 3 training batches and the validation batches (40 images)
    for args, kwargs in Batch.calls:
        assert "memory_format" not in kwargs and args and isinstance(args[0], torch.device), (args, kwargs)
    assert seen and all(seen), "the model must still see channels_last batches"
    # the ready mark follows the copy, and the change of layout comes after it: the step's compute, not a wait
    training = Moved.events[: Moved.events.index("pause")]
    assert training == ["batch", "layout"] * (len(training) // 2) and training, Moved.events


@pytest.mark.torches
def test_channels_last_records_its_format(tiny_data, tmp_path):
    result, m = train("train_channels_last.py", tiny_data, tmp_path / "m.json", *TECHNIQUE_TIMED)
    assert result.returncode == 0, result.stderr
    assert m["variant"] == "channels_last" and m["memory_format"] == "channels_last"
