"""train_tf32.py: the precision recorded, a device without TF32 says so, TF32 that changed nothing does not apply."""

import pytest
import torch

import checks
from bench.outputs import markdown
from helpers import CPU_CLASSES, SHORT, SMALL_MODEL, STEADY, SYNTHETIC, VIT, fast_first, scaled, told, train


def test_a_device_without_tf32_or_native_bf16_says_so_and_stays_fp32(monkeypatch, capsys):
    monkeypatch.setattr(checks, "native_bf16", lambda device: False)
    assert checks.reduced_precision(torch.device("cpu"), is_main=True) is None
    assert "matmuls and convolutions stay in fp32" in capsys.readouterr().err
    monkeypatch.setattr(checks, "native_bf16", lambda device: True)
    assert checks.reduced_precision(torch.device("cpu"), is_main=True) == "bf16"


@pytest.mark.torches
@pytest.mark.parametrize("cpu", fast_first(["bf16", "avx2"]))
def test_the_tf32_and_fused_scripts_record_what_they_changed(tmp_path, cpu):
    """On a CPU with native bf16 the tf32 row's fp32 matmuls run in bf16 (oneDNN); on one without, the row does not
    apply and stays fp32: each class taken here (CPUINFO_FLAGS), whatever this machine is."""
    native, env = cpu == "bf16", {"CPUINFO_FLAGS": CPU_CLASSES[cpu]}
    result, m = train("train_tf32.py", SYNTHETIC[1], tmp_path / "t.json", "--model", SMALL_MODEL, *SHORT, env=env)
    assert result.returncode == 0, result.stderr
    assert m["matmul_precision"] == ("bf16" if native else "fp32") and m["variant"] == "tf32"
    assert ("does not apply here" in result.stderr) != bool(native) or "stay in fp32" in result.stderr
    result, m = train("train_fused.py", SYNTHETIC[1], tmp_path / "f.json", "--model", VIT, "--optimizer", "adamw",
                      *SHORT)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert m["fused_step"] is True and m["optimizer"] == "adamw" and "AdamW (fused step)" in result.stdout


def test_tf32_that_changed_nothing_does_not_apply_here():
    said, summary = told({"baseline": STEADY, "tf32": scaled(1.0, matmul_precision="fp32", device="cpu")})
    assert said["Does not apply here"] == "tf32: this CPU has neither TF32 nor native bf16, so it ran fp32"
    row = summary.reset_index().iloc[1]
    assert markdown.label(row) == "tf32 (does not apply here)" and markdown.answer_cell(row) == "does not apply here"
    applied, _ = told({"baseline": STEADY, "tf32": scaled(0.6, matmul_precision="bf16", device="cpu")})
    assert "Does not apply here" not in applied and applied["Costs"].startswith("tf32 0.60x")
