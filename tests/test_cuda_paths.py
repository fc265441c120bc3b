"""The CUDA paths' logic, reached on a CPU: device calls are stubbed, never a measured number.

bf16 only where native; one GPU per DDP process; DALI's optional arguments, its out-of-memory error and
its padded batches; NVML read only on the GPUs a run can see, MIG through its instances, and an NVML
error leaving the GPU fields unavailable rather than 0 or a crash.
"""

import importlib
import sys
import threading
import time
import types

import pytest
import torch

from bench.observe import nvml, sample
from bench.stages import launch
from bench.stages.plan import Run
from helpers import PY, ROOT, FakeNVML, build_loaders, join_stubbed, sleeper

sys.path.insert(0, str(ROOT))
pytestmark = (
    pytest.mark.torches
)  # torch's device, autocast and DALI calls, stubbed: make test runs them on both torches


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


@pytest.mark.parametrize("local_rank,gpus,expected", [(0, 1, 0), (2, 4, 2), (3, 8, 3)])
def test_each_ddp_process_takes_its_gpu(tiny_data, monkeypatch, local_rank, gpus, expected):
    """Local rank N takes GPU N, bound at init (more processes than GPUs: tests/test_gpu_ready.py)."""
    calls = join_stubbed(monkeypatch, tiny_data, gpus, local_rank, gpus)
    assert calls["set_device"] == torch.device("cuda", expected)
    assert calls["backend"] == "nccl" and calls["device_id"] == torch.device("cuda", expected)


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


def test_dali_out_of_memory_is_said_at_once():
    import checks

    def read(path):
        raise AssertionError(f"{path} was read: out of memory must not send the loader hunting for a bad file")

    error = "Critical error in pipeline:\nError in MIXED operator nvidia.dali.fn.decoders.image encountered:\n"
    error += "CUDA allocation failed: cudaErrorMemoryAllocation out of memory"
    message = checks.explain_dali_error(error, ["/data/a.jpg"] * 100_000, read)
    assert message.startswith("out of memory in DALI, try a smaller --batch-size")


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
    seconds, waited, epoch_starts, _ = loader.bench(args, torch.device("cpu"))
    assert epoch_starts == 2 and seconds < 0.2 and waited < 0.2, (seconds, waited)


def test_dali_books_the_time_of_the_batches_it_does_not_give(tiny_data):
    import loader_dali

    train_loader, _, _ = build_loaders(loader_dali, tiny_data, 16)
    for _ in range(2):
        assert len(list(train_loader)) == 7  # 120 images: 7 full batches, the 8th holds 8 and the padding
    assert train_loader.unused_s > 0


# ----------------------------------------------------------------------------- NVML, with a stand-in library


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


def test_throttle_reasons_are_named(monkeypatch):
    monkeypatch.setattr(nvml, "pynvml", FakeNVML([]))
    load = sample.Load(["gpu1"])
    load.sample(set())
    assert load.result()["gpu_throttle"] == "power cap"


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
