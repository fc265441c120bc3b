"""bench/observe/nvml.py through a stand-in pynvml: errors leave the GPU fields unavailable, no NVML on a GPU run says
so, throttle reasons named."""

import pytest

from bench.observe import nvml, sample
from helpers import FakeNVML, sleeper


@pytest.mark.torches
def test_an_nvml_error_leaves_the_gpu_fields_unavailable(monkeypatch):
    job = sleeper()
    try:
        monkeypatch.setattr(nvml, "pynvml", FakeNVML([("gpu1", job.pid, 2**30)], fail_after=3))
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
        sampler = sample.Sampler(job.pid, gpu=True)
        for _ in range(4):
            sampler.sample()  # the GPU is lost on the way: no exception reaches the bench
        row = sampler.stop()
    finally:
        job.kill()
    assert row["nvml_peak_mib"] is None and row["nvml_method"].startswith("unavailable: ")
    assert "GPU is lost" in row["nvml_method"]


@pytest.mark.torches
def test_no_nvml_on_a_gpu_run_is_unavailable_and_on_a_cpu_run_nothing(monkeypatch):
    monkeypatch.setattr(nvml, "pynvml", None)
    job = sleeper()
    try:
        gpu_run = sample.Sampler(job.pid, gpu=True)
        cpu_run = sample.Sampler(job.pid, gpu=False)
        rows = gpu_run.stop(), cpu_run.stop()
    finally:
        job.kill()
    assert rows[0]["nvml_peak_mib"] is None and "nvidia-ml-py is not installed" in rows[0]["nvml_method"]
    assert rows[1]["nvml_peak_mib"] is None and rows[1]["nvml_method"] is None


@pytest.mark.torches
def test_throttle_reasons_are_named(monkeypatch):
    monkeypatch.setattr(nvml, "pynvml", FakeNVML([]))
    load = sample.Load(["gpu1"])
    load.sample(set())
    assert load.result()["gpu_throttle"] == "power cap"
