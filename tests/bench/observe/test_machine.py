"""bench/observe/machine.py: the CPU features that decide the answers, the machine record, and torch asked for GPUs only
where there can be one."""

import argparse
import importlib
import subprocess

import pytest
import torch

from bench import BenchError
from bench.observe import machine, nvml
from helpers import CPU_CLASSES


def test_torch_is_asked_for_its_gpus_only_where_a_driver_or_a_gpu_device_is(monkeypatch, tmp_path):
    """No NVIDIA driver and no GPU device file: no GPU, and no process importing torch to say so (2 s of every bench on
    a CPU). A device file, or a driver: torch is asked. torch not installed at all: one line."""
    asked = []
    found = '[{"name": "NVIDIA H100", "capability": "9.0", "bf16": true}]'

    def probe(cmd, **kwargs):
        asked.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout=found, stderr="")

    def no_nvml(name, *args):
        raise nvml.Unavailable("NVML Shared Library Not Found")

    monkeypatch.setattr(machine, "subprocess", argparse.Namespace(run=probe))
    monkeypatch.setattr(nvml, "call", no_nvml)
    monkeypatch.setattr(machine, "GPU_DEVICES", (str(tmp_path / "nvidia[0-9]*"), str(tmp_path / "kfd")))
    assert machine.gpus() == ([], None) and asked == []
    (tmp_path / "kfd").touch()  # ROCm's device: torch.cuda sees AMD's GPUs, and NVML does not
    assert machine.gpus()[0][0]["name"] == "NVIDIA H100" and len(asked) == 1
    (tmp_path / "kfd").unlink()
    monkeypatch.setattr(nvml, "call", lambda name, *args: b"580.65" if name == "nvmlSystemGetDriverVersion" else None)
    assert machine.gpus() == ([dict(name="NVIDIA H100", capability="9.0", bf16=True)], "580.65") and len(asked) == 2
    monkeypatch.setattr(nvml, "call", no_nvml)
    monkeypatch.setattr(machine.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(BenchError, match=r"^torch is not installed in .*: see requirements.txt$"):
        machine.gpus()


def test_the_cpu_features_that_decide_the_answers(tmp_path):
    avx2 = tmp_path / "avx2"
    avx2.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n")
    bf16 = tmp_path / "bf16"
    bf16.write_text("flags\t\t: avx2 avx512f avx512_bf16 avx512bw\n")
    arm = tmp_path / "arm"
    arm.write_text("Features\t: fp asimd sve bf16\n")
    assert machine.cpu_isa(machine.cpu_flags(avx2)) == ["avx2"]
    assert machine.cpu_isa(machine.cpu_flags(bf16)) == ["avx2", "avx512", "avx512_bf16"]
    assert machine.cpu_isa(machine.cpu_flags(arm)) == ["neon", "sve", "bf16"]
    assert machine.cpu_flags(tmp_path / "none") == set()
    base = dict(gpu_count=0, cpu_cores=2, cpu_model="AMD EPYC")
    classes = {machine.machine_class(dict(base, cpu_isa=isa)) for isa in ("avx2", "avx2 avx512 avx512_bf16", None)}
    assert classes == {"cpu-2core-amd-epyc-avx2", "cpu-2core-amd-epyc-avx512-bf16", "cpu-2core-amd-epyc-base"}
    assert (
        machine.machine_class(dict(base, gpu_count=1, gpu_name="NVIDIA H100 80GB HBM3")) == "1x-nvidia-h100-80gb-hbm3"
    )


@pytest.mark.parametrize(
    "cpu, isa, native",
    [
        ("avx2", "avx2", False),
        ("avx512bf16", "avx2 avx512 avx512_bf16", True),
        ("bf16", "avx2 avx512 avx512_bf16 amx", True),
    ],
)
def test_the_machine_record_carries_its_capabilities_and_the_scripts_read_the_same(monkeypatch, cpu, isa, native):
    """CPUINFO_FLAGS stands for /proc/cpuinfo's flags for the bench and the scripts alike (the one seam): a test sees
    the class it names, whatever this machine is, and the two readers never disagree."""
    checks = importlib.import_module("checks")
    monkeypatch.setenv("CPUINFO_FLAGS", CPU_CLASSES[cpu])
    info = machine.machine_info()
    assert info["cpu_isa"] == isa and info["cpu_bf16_native"] is native
    assert checks.native_bf16(torch.device("cpu")) is native
    assert machine.machine_class(info).endswith(dict(avx2="-avx2", avx512bf16="-avx512-bf16", bf16="-amx")[cpu])
    assert info["gpu_capability"] is None and info["gpu_bf16_native"] is None  # no GPU on the test machines
    monkeypatch.delenv("CPUINFO_FLAGS")
    flags = machine.cpu_flags()  # this machine's own, as /proc/cpuinfo lists them
    assert checks.native_bf16(torch.device("cpu")) is bool({"avx512_bf16", "amx_bf16", "bf16"} & flags)
    assert machine.machine_info()["cpu_isa"] == (" ".join(machine.cpu_isa(flags)) or None)


@pytest.mark.parametrize("forced", [None, CPU_CLASSES["avx2"]])
def test_each_read_of_the_cpus_flags_marks_the_file_make_test_reads(monkeypatch, tmp_path, forced):
    """The bench's reader and the scripts' (checks.cpu_flags) mark CPUINFO_FLAGS_READ's file on every read of this
    machine's flags, forced or not: make test runs the tests that read them again as the other class. Reading a file
    of flags that is not this machine's marks nothing."""
    checks = importlib.import_module("checks")
    if forced is None:
        monkeypatch.delenv("CPUINFO_FLAGS", raising=False)
    else:
        monkeypatch.setenv("CPUINFO_FLAGS", forced)
    other = tmp_path / "cpuinfo"
    other.write_text("flags\t\t: fpu avx2\n")
    for read, marks in ((lambda: machine.cpu_flags(other), False), (machine.cpu_flags, True), (checks.cpu_flags, True)):
        marker = tmp_path / "read"
        marker.unlink(missing_ok=True)
        monkeypatch.setenv("CPUINFO_FLAGS_READ", str(marker))
        read()
        assert marker.exists() is marks
