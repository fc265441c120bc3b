"""bench/observe/sample.py: a run's memory, GPU utilisation and clocks from its own processes and its timed windows,
host memory after a fork, the sampler's thread."""

import subprocess
import threading
import time
import types

import pytest

from bench.observe import nvml, sample
from bench.observe.sample import Sampler
from bench.stages.planning.planned import Run
from bench.stages.running import launch
from helpers import PY, FakeNVML, sleeper

COPY_ON_WRITE = """
import os, time
block = bytearray(100 * 2**20)  # resident: written as zeros
for i in range(0, len(block), 4096):
    block[i] = 1
if os.fork() == 0:  # the child shares the block until it writes to it: RSS stays, PSS grows
    for i in range(0, len(block), 4096):
        block[i] = 2
        if i % (20 * 2**20) == 0:
            time.sleep(0.1)
    time.sleep(1.0)
    os._exit(0)
os.wait()
"""


def test_host_memory_counts_pages_copied_after_a_fork(tmp_path):
    """A forked worker (a DataLoader's) that writes to what it shares: the tree's PSS doubles while its RSS does not
    move. In the fast tests: a run's memory is its whole tree's."""
    job = subprocess.Popen([PY, "-c", COPY_ON_WRITE])
    sampler = Sampler(job.pid)
    sampler.start()
    job.wait(timeout=60)
    peak = sampler.stop()["peak_host_mem_mib"]
    assert peak > 190, f"peak PSS {peak:.0f} MiB: the child's 100 MiB of copied pages were missed"


@pytest.mark.torches
@pytest.mark.parametrize(
    "visible,expected",
    [
        (None, ["mig0", "mig1", "gpu1"]),  # every GPU; the one in MIG mode through its instances
        ("1", ["gpu1"]),
        ("GPU-bbbb", ["gpu1"]),  # a unique prefix of a UUID, as CUDA takes it
        ("MIG-dddd4444", ["mig1"]),
        ("1,7,0", ["gpu1"]),  # CUDA stops at the first entry that names no device
        ("", []),
    ],
)
def test_only_the_gpus_a_run_sees_are_read(monkeypatch, visible, expected):
    monkeypatch.setattr(nvml, "pynvml", FakeNVML([]))
    assert sample.visible_handles(visible) == expected


@pytest.mark.torches
def test_the_sampler_counts_the_run_on_its_gpus_and_others_apart(monkeypatch):
    job = sleeper()
    try:
        fake = FakeNVML([("gpu1", job.pid, 3 * 2**30), ("gpu1", 999_999, 2**30), ("gpu0", job.pid, 5 * 2**30)])
        monkeypatch.setattr(nvml, "pynvml", fake)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
        sampler = sample.Sampler(job.pid, gpu=True)
        sampler.sample()
        row = sampler.stop()
    finally:
        job.kill()
    assert row["nvml_peak_mib"] == 3 * 1024 and row["nvml_method"] == "process tree"  # not GPU 0's 5 GiB
    assert row["gpu_other_mib"] == 1024 and row["busy"] and "1 other processes held 1,024 MiB" in row["busy_reason"]
    assert row["gpu_util_pct"] == 80 and row["gpu_sm_clock_mhz"] == 1755 and row["gpu_throttle"] == "power cap"


@pytest.mark.torches
def test_the_gpu_memory_of_a_row_is_its_timed_windows(monkeypatch):
    """NVML's memory of a training row is the highest reading inside its timed window, as torch's peaks are: the
    warm-up (cuDNN's autotuning) and the evaluation after it left out; where no reading falls inside, the whole run's,
    said so."""
    job = sleeper()
    now = [0.0]
    monkeypatch.setattr(sample.time, "time", lambda: now[0])
    try:
        fake = FakeNVML([])
        monkeypatch.setattr(nvml, "pynvml", fake)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
        sampler = sample.Sampler(job.pid, gpu=True)
        for at, gib in (1.0, 5.0), (2.0, 3.0), (3.0, 3.5), (4.0, 6.0):  # warm-up, window, window, evaluation
            now[0], fake.processes = at, [("gpu1", job.pid, int(gib * 2**30))]
            sampler.sample()
        row = sampler.stop()
    finally:
        job.kill()
    assert row["nvml_peak_mib"] == 6 * 1024 and row["nvml_method"] == "process tree"  # the whole run's
    window = sampler.window_fields(dict(timed_spans=[[1.5, 3.2]], steps_timed=4, global_batch_size=8))
    assert window["nvml_peak_mib"] == 3.5 * 1024 and window["nvml_method"] == "process tree; the timed window"
    missed = sampler.window_memory([[4.5, 4.8]])
    assert "nvml_peak_mib" not in missed and "no reading inside the timed window" in missed["nvml_method"]
    assert sampler.window_memory(None) == {}  # a run that reported no window keeps the whole run's


@pytest.mark.torches
def test_the_gpu_utilisation_and_clock_of_a_row_are_its_timed_windows(monkeypatch):
    """The GPU idles through most of a run's wall time (its start, cuDNN's autotuning, the evaluation): over the whole
    run the median read 0% in every row of the GPU runs (2026-11-25 to 27). A row's is the median inside its window;
    the whole run's where no reading falls inside."""
    job = sleeper()
    now = [0.0]
    monkeypatch.setattr(sample.time, "time", lambda: now[0])
    try:
        fake = FakeNVML([("gpu1", job.pid, 2**30)])
        monkeypatch.setattr(nvml, "pynvml", fake)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
        sampler = sample.Sampler(job.pid, gpu=True)
        busy = [(0.5, 0, 345), (1.0, 0, 345), (2.0, 97, 1980), (3.0, 95, 1975), (4.0, 0, 1980), (5.0, 0, 345)]
        for at, util, clock in busy:  # start, start, window, window, evaluation, the end
            now[0] = at
            fake.nvmlDeviceGetUtilizationRates = lambda handle, u=util: types.SimpleNamespace(gpu=u)
            fake.nvmlDeviceGetClockInfo = lambda handle, kind, c=clock: c
            sampler.sample()
        row = sampler.stop()
    finally:
        job.kill()
    assert row["gpu_util_pct"] == 0 and row["gpu_sm_clock_mhz"] == 1160  # the whole run's: what it read before
    window = sampler.window_fields(dict(timed_spans=[[1.5, 3.2]], steps_timed=4, global_batch_size=8))
    assert window["gpu_util_pct"] == 96 and window["gpu_sm_clock_mhz"] == 1977.5
    missed = sampler.window_fields(dict(timed_spans=[[5.5, 5.8]], steps_timed=4, global_batch_size=8))
    assert "gpu_util_pct" not in missed and "gpu_sm_clock_mhz" not in missed  # the whole run's stays in the row


@pytest.mark.torches
def test_a_run_is_read_on_the_gpus_it_uses_alone(monkeypatch):
    """Two GPUs visible (the second first): a one-process run uses cuda:0, the first visible, and its memory, load and
    energy are read there alone; DataParallel reads every one; torchrun's N processes the first N."""
    job = sleeper()
    try:
        fake = FakeNVML([("gpu1", job.pid, 3 * 2**30), ("gpu0", job.pid, 5 * 2**30)])
        monkeypatch.setattr(nvml, "pynvml", fake)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
        one = sample.Sampler(job.pid, gpu=True, gpus=1)
        every = sample.Sampler(job.pid, gpu=True)
        assert one.devices == ["gpu1"] and every.devices == ["gpu1", "mig0", "mig1"]  # GPU 0 is in MIG mode
        one.sample()
        row = one.stop()
    finally:
        job.kill()
    assert row["nvml_peak_mib"] == 3 * 1024  # not GPU 0's 5 GiB too
    train = Run("baseline-1", "baseline", "train", 1, 1, [PY, "train.py", "--device", "cuda"])
    dp = Run("dp-1", "dp", "train", 1, 1, [PY, "train_dp.py", "--device", "cuda"])
    ddp = Run(
        "ddp-1", "ddp", "train", 1, 4, [PY, "-m", "torch.distributed.run", "--nproc-per-node", "4", "train_ddp.py"]
    )
    assert [launch.gpus_of(r) for r in (train, dp, ddp)] == [1, None, 4]


@pytest.mark.torches
def test_the_sampler_thread_stops_cleanly(monkeypatch):
    monkeypatch.setattr(nvml, "pynvml", FakeNVML([]))
    job = sleeper()
    try:
        sampler = sample.Sampler(job.pid, interval=0.05, gpu=True)
        sampler.start()
        time.sleep(0.3)
        row = sampler.stop()
    finally:
        job.kill()
    assert row["memory_samples"] >= 3 and not any(t.name == sampler.name for t in threading.enumerate())


def test_in_a_container_the_gpu_sharing_is_unknown_not_busy(monkeypatch):
    """NVML gives the host's PIDs: none is the run's. A process that appeared during the run may be the run itself:
    unknown. One that was there before the run started cannot be: the run shared its GPU (busy)."""
    job = sleeper()
    try:
        fake = FakeNVML([])
        monkeypatch.setattr(nvml, "pynvml", fake)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
        sampler = sample.Sampler(job.pid, gpu=True)
        fake.processes.append(("gpu1", 4_000_123, 3 * 2**30))  # the run, as the host numbers it
        sampler.sample()
        alone = sampler.stop()
        fake.processes[:] = [("gpu1", 4_000_777, 2**30)]  # there before the next run started
        sampler = sample.Sampler(job.pid, gpu=True)
        fake.processes.append(("gpu1", 4_000_123, 3 * 2**30))
        sampler.sample()
        shared = sampler.stop()
    finally:
        job.kill()
    # (busy itself also reads the CPU, which a sample this short cannot: the GPU's part is what is asked here)
    assert "GPUs" not in (alone["busy_reason"] or "")
    assert alone["gpu_sharing"].startswith("unknown") and alone["gpu_other_mib"] == 0
    assert alone["nvml_peak_mib"] == 3 * 1024 + 0 and alone["nvml_method"] == "device rise"
    assert shared["busy"] and shared["gpu_sharing"] == "shared" and shared["gpu_other_mib"] == 1024
    assert "1 other processes held 1,024 MiB" in shared["busy_reason"]


def test_with_its_own_pids_a_run_alone_on_its_gpu_is_alone(monkeypatch):
    job = sleeper()
    try:
        monkeypatch.setattr(nvml, "pynvml", FakeNVML([("gpu1", job.pid, 2**30)]))
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
        sampler = sample.Sampler(job.pid, gpu=True)
        sampler.sample()
        row = sampler.stop()
    finally:
        job.kill()
    assert row["gpu_sharing"] == "alone" and "GPUs" not in (row["busy_reason"] or "")
    assert row["nvml_method"] == "process tree"


def test_a_failing_process_query_leaves_the_device_rise(monkeypatch):
    """The per-process query and the device-rise fallback fail apart: one NVML error does not disable both."""

    class NoProcessQuery(FakeNVML):
        def nvmlDeviceGetComputeRunningProcesses(self, handle):  # noqa: N802 (pynvml's name)
            raise self.NVMLError("Not Supported")

    job = sleeper()
    try:
        fake = NoProcessQuery([])
        monkeypatch.setattr(nvml, "pynvml", fake)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
        sampler = sample.Sampler(job.pid, gpu=True)
        fake.processes.append(("gpu1", job.pid, 2 * 2**30))
        sampler.sample()
        row = sampler.stop()
    finally:
        job.kill()
    assert row["nvml_peak_mib"] == 2 * 1024 and row["nvml_method"].startswith("device rise")
    assert "Not Supported" in row["nvml_method"]


def test_a_refused_process_query_still_reads_what_vouches_for_the_gpu(monkeypatch):
    """A sandbox refuses the per-process query from the start: utilisation, SM clock and throttle reasons are read
    all the same, and the sharing says why it is unknown (not busy, not alone)."""

    class Refusing(FakeNVML):
        def nvmlDeviceGetComputeRunningProcesses(self, handle):  # noqa: N802 (pynvml's name)
            raise self.NVMLError("Insufficient Permissions")

    job = sleeper()
    try:
        monkeypatch.setattr(nvml, "pynvml", Refusing([("gpu1", job.pid, 2**30)]))
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
        sampler = sample.Sampler(job.pid, gpu=True)
        for _ in range(3):
            sampler.sample()
        row = sampler.stop()
    finally:
        job.kill()
    assert row["gpu_util_pct"] == 80 and row["gpu_sm_clock_mhz"] == 1755 and row["gpu_throttle"] == "power cap"
    assert (
        row["gpu_sharing"] == "unknown: NVML refused the per-process query (nvmlDeviceGetComputeRunningProcesses:"
        " Insufficient Permissions)"
    )
    assert row["gpu_other_mib"] is None and "GPUs" not in (row["busy_reason"] or "")
    assert row["nvml_method"].startswith("device rise (the process query failed")
