"""cpu.py: the CPU's flags and the one rule for native bf16, which the scripts and the bench both read."""

import importlib

import pytest
import torch

import cpu
from bench import BenchError
from bench.observe import machine
from helpers import CPU_CLASSES, NATIVE, TINY, run


@pytest.mark.parametrize("cpu_class", list(CPU_CLASSES))
def test_native_bf16_is_one_rule_for_every_class_and_every_reader(monkeypatch, cpu_class):
    """AVX2 only: emulated; AVX-512-BF16 without AMX (an AMD EPYC): native; AMX: native. The rule, the scripts'
    reader (checks.py) and the bench's (its machine record) say the same."""
    monkeypatch.setenv("CPUINFO_FLAGS", CPU_CLASSES[cpu_class])
    assert cpu.native_bf16(cpu.flags()) is NATIVE[cpu_class]
    checks = importlib.import_module("checks")
    assert checks.native_bf16(torch.device("cpu")) is NATIVE[cpu_class]
    assert machine.machine_info()["cpu_bf16_native"] is NATIVE[cpu_class]
    for flag in cpu.NATIVE_BF16:  # each feature of the rule alone is native bf16
        assert cpu.native_bf16({"avx2", flag}) is True
    assert cpu.native_bf16(None) is None and cpu.native_bf16(set()) is False


def test_flags_are_read_from_a_cpuinfo_file(tmp_path):
    x86, arm, none = tmp_path / "x86", tmp_path / "arm", tmp_path / "none"
    x86.write_text("processor : 0\nflags\t\t: fpu avx2 avx512_bf16\n")
    arm.write_text("processor : 0\nFeatures\t: fp asimd bf16\n")
    none.write_text("processor : 0\n")
    assert cpu.flags(str(x86)) == {"fpu", "avx2", "avx512_bf16"} and cpu.flags(str(arm)) == {"fp", "asimd", "bf16"}
    assert cpu.flags(str(none)) is None and cpu.flags(str(tmp_path / "missing")) is None


def test_an_empty_cpuinfo_flags_is_one_line_not_a_cpu_without_bf16(monkeypatch, tiny_data, tmp_path):
    """CPUINFO_FLAGS= names no CPU: the rule refuses it, the scripts and the bench end in one line, exit 2."""
    monkeypatch.setenv("CPUINFO_FLAGS", " ")
    with pytest.raises(cpu.FlagsError, match="CPUINFO_FLAGS is set but empty"):
        cpu.flags()
    with pytest.raises(BenchError, match="CPUINFO_FLAGS is set but empty"):
        machine.cpu_flags()
    empty = {"CPUINFO_FLAGS": ""}
    result = run("train_amp.py", "--data", tiny_data, "--batch-size", 8, "--steps", 2, "--warmup-steps", 1, env=empty)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "train_amp.py: error: CPUINFO_FLAGS is set but empty" in result.stderr
    result = run("-m", "bench", *map(str, TINY), "--dry-run", "--out", tmp_path, env=empty)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "CPUINFO_FLAGS is set but empty" in result.stderr
