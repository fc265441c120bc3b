"""train_amp.py: bf16 where the device computes it, fp16's scaler, no host sync, and what an emulated bf16 says."""

import functools
import importlib
import math
import re
import sys
import warnings

import pytest
import torch

from helpers import CPU_CLASSES, NATIVE, ROOT, SMALL_MODEL, check_clean_failure, fast_first, summary_line, train


def test_amp_fp16_on_a_cpu(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train_amp.py", tiny_data, metrics, "--amp-dtype", "fp16", "--device", "cpu")
    check_clean_failure(result, metrics, "fp16", "CUDA")


def test_amp_unknown_dtype(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train_amp.py", tiny_data, metrics, "--amp-dtype", "fp8")
    check_clean_failure(result, metrics, "--amp-dtype", "fp8")


@pytest.mark.torches
def test_amp_takes_bf16_only_where_the_gpu_computes_it(monkeypatch):
    checks = importlib.import_module("checks")
    cuda = torch.device("cuda", 0)
    asked = []

    def emulated(including_emulation=True):  # an older GPU: bf16 only by emulation
        asked.append(including_emulation)
        return including_emulation

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", emulated)
    assert checks.native_bf16(cuda) is False and asked == [False]  # so train_amp.py takes fp16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert checks.native_bf16(cuda) is True
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)  # a torch that knows no emulation
    assert checks.native_bf16(cuda) is True
    source = (ROOT / "train_amp.py").read_text()  # the choice itself, in the technique's diff
    assert 'args.amp_dtype = "bf16" if device.type == "cpu" or checks.native_bf16(device) else "fp16"' in source


def test_an_enabled_grad_scaler_reads_a_value_back_every_step(monkeypatch):
    """What host_syncs_per_step says of fp16, checked against torch itself: GradScaler.step() calls .item()."""
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reads = []
    real_item = torch.Tensor.item
    monkeypatch.setattr(torch.Tensor, "item", lambda self: reads.append(1) or real_item(self))
    for enabled, expected in (True, 1), (False, 0):
        scaler = torch.amp.GradScaler("cpu", enabled=enabled)
        reads.clear()
        scaler.scale(model(torch.ones(3, 4)).sum()).backward()
        scaler.step(optimizer)
        scaler.update()
        assert len(reads) == expected, (enabled, reads)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["train_amp", "train_all"])
def test_fp16s_skipped_first_steps_warn_of_nothing(monkeypatch, name):
    """fp16 on a GPU reached on a CPU: the check that refuses it there stubbed, and a scaler whose first scale is so
    large that the first steps' gradients overflow, as fp16's first steps on a GPU do: the scaler skips them, the
    scheduler steps anyway, and torch's warning about that order is not printed (it is expected)."""
    script = importlib.import_module(name)
    monkeypatch.setattr(importlib.import_module("checks"), "check_amp_dtype", lambda name, device: None)
    monkeypatch.setattr(torch.amp, "GradScaler", functools.partial(torch.amp.GradScaler, init_scale=2.0**100))
    monkeypatch.setattr(torch, "compile", lambda model, **kwargs: model)  # what is compiled is not the question here
    # fp16 on a CPU is emulated: its backward takes 9 s a step at 32 px and a batch of 8, under a second at 16 px and 2
    argv = [f"{name}.py", "--data", "synthetic:16:10", "--model", "examples/smallnet.py:build", "--batch-size", "2"]
    argv += ["--steps", "2", "--warmup-steps", "1", "--workers", "0", "--device", "cpu", "--no-progress"]
    argv += ["--eval-samples", "8"]
    monkeypatch.setattr(sys, "argv", [*argv, "--amp-dtype", "fp16"])
    skipped = []
    real_step = torch.optim.SGD.step
    monkeypatch.setattr(torch.optim.SGD, "step", lambda self, *a, **k: skipped.append(0) or real_step(self, *a, **k))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        script.main()
    assert not skipped, "the scaler was meant to skip these steps (inf gradients)"
    said = [str(w.message) for w in caught]
    assert not [m for m in said if "lr_scheduler.step()" in m], said


@pytest.mark.parametrize("cpu", ["avx2", "avx512bf16", "bf16"])
def test_bf16_makes_no_host_sync_and_says_whether_it_is_native(tiny_data, tmp_path, cpu):
    """Each real class of CPU, whatever this one is: AVX2 only (emulated), AVX-512-BF16 without AMX (an AMD EPYC CI
    runs on: native), AMX (native)."""
    env = {"CPUINFO_FLAGS": CPU_CLASSES[cpu]}  # each class of CPU, whatever this one is
    result, metrics = train("train_amp.py", tiny_data, tmp_path / "m.json", "--steps", 3, "--warmup-steps", 1, env=env)
    assert result.returncode == 0, result.stderr
    native = NATIVE[cpu]
    assert metrics["host_syncs_per_step"] == 0 and metrics["amp_dtype"] == "bf16"
    assert metrics["bf16_native"] is native
    warned = [line for line in result.stderr.splitlines() if "warning: this CPU" in line]
    assert len(warned) == (0 if native else 1), result.stderr
    if not native:
        assert "no native bf16" in warned[0] and "AVX-512-BF16" in warned[0]


def test_train_amp_warns_where_bf16_is_emulated(monkeypatch, capsys, tiny_data):
    train_amp = importlib.import_module("train_amp")
    monkeypatch.setattr(importlib.import_module("checks"), "native_bf16", lambda device: False)
    argv = ["train_amp.py", "--data", str(tiny_data), "--model", SMALL_MODEL, "--batch-size", "16", "--steps", "2"]
    monkeypatch.setattr(sys, "argv", [*argv, "--warmup-steps", "1", "--workers", "0", "--no-progress"])
    train_amp.main()
    err = capsys.readouterr().err
    assert "train_amp.py: warning: this CPU (no AVX-512-BF16 or AMX) has no native bf16" in err


@pytest.mark.torches
@pytest.mark.parametrize("flags, native", fast_first([(CPU_CLASSES["avx2"], False), (CPU_CLASSES["bf16"], True)]))
def test_amp_records_bf16_on_a_cpu_and_says_whether_it_is_native(tiny_data, tmp_path, flags, native):
    """The run's own summary names the technique's settings and only what the device measures: bf16, native or
    emulated as checks.py finds it (each class of CPU taken here, whatever this one is); on a CPU host memory and
    the cores, and no 'starved' (the host's wait again)."""
    args = ("--steps", 4, "--warmup-steps", 1)
    result, m = train("train_amp.py", tiny_data, tmp_path / "m.json", *args, env={"CPUINFO_FLAGS": flags})
    assert result.returncode == 0, result.stderr
    assert m["variant"] == "amp" and m["amp_dtype"] == "bf16" and m["bf16_native"] is native
    assert math.isfinite(m["train_loss_final"]) and m["val_samples"] == 40
    said = "native here" if native else "emulated: slower than fp32 here"
    assert summary_line(result, "setup").endswith(f"autocast bf16 ({said})")
    assert summary_line(result, "timed") == "timed   3 steps (after 1 warm-up step, evaluation left out)"
    assert "starved" not in summary_line(result, "data")
    assert re.fullmatch(r"memory  host peak \d+ MiB .*", summary_line(result, "memory"))
    cores = re.fullmatch(r"cores   the model ([\d.]+), the loader ([\d.]+) .*", summary_line(result, "cores"))
    assert cores and float(cores[1]) == pytest.approx(m["cpu_model_cores"], abs=0.006)
