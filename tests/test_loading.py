"""The loading settings every script takes (--workers, --prefetch-factor, --pin-memory, --persistent-workers): each one
reaches the DataLoader (and DALI's pipeline, its threads and queue), the record says what took effect, and bad input
is one line."""

import sys

import pytest
import torch

from helpers import ROOT, check_clean_failure, fast_first, run, train

sys.path.insert(0, str(ROOT))
import checks  # noqa: E402
import loader  # noqa: E402

CPU = torch.device("cpu")


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
