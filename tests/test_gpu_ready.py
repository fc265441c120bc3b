"""Ready for the first GPU: what a review of the CUDA paths found, each reached on a CPU (device calls stubbed,
never a measured number), and the capabilities that decide the answers (CPU ISA, native bf16)."""

import argparse
import functools
import importlib
import subprocess
import sys
import warnings
from dataclasses import replace

import pandas as pd
import pytest
import torch

from bench import BenchError, cli
from bench.observe import machine, nvml, sample
from bench.outputs import verdicts
from bench.stages import calibrate, cost, launch, plan
from helpers import CPU_CLASSES, ROOT, SMALL_MODEL, FakeNVML, fast_first, join_stubbed, sleeper, train

sys.path.insert(0, str(ROOT))


# ----------------------------------------------------------------------------- channels_last: copy, then convert


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


def marked(self, mark, real):
    Moved.events.append(mark)
    return real(self)


# ----------------------------------------------------------------------------- DDP: one process per GPU


@pytest.mark.parametrize("name", ["train_ddp", "train_all"])
@pytest.mark.parametrize("local_rank,local_world_size,gpus", [(1, 2, 1), (0, 3, 2), (5, 8, 4)])
def test_more_ddp_processes_than_gpus_is_one_line(
    tiny_data, monkeypatch, capsys, name, local_rank, local_world_size, gpus
):
    """Two processes on one GPU make NCCL fail with a traceback ("Duplicate GPU detected"): every process of the
    machine says it in one line instead, before joining, naming --nproc-per-node and the GPUs there are."""
    script = importlib.import_module(name)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(script.dist, "init_process_group", lambda *a, **k: pytest.fail("joined with too few GPUs"))
    env = dict(
        RANK=str(local_rank), LOCAL_RANK=str(local_rank), WORLD_SIZE="16", LOCAL_WORLD_SIZE=str(local_world_size)
    )
    monkeypatch.setattr(script.os, "environ", {**script.os.environ, **env})
    monkeypatch.setattr(sys, "argv", [f"{name}.py", "--data", str(tiny_data), "--batch-size", "16"])
    with pytest.raises(SystemExit) as exit:
        script.main()
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit.value.code == 2 and len(lines) == 1, lines
    assert f"{local_world_size} processes on this machine but {gpus} GPU(s)" in lines[0]
    assert f"--nproc-per-node {gpus} at most" in lines[0] and "--backend gloo" in lines[0]


@pytest.mark.parametrize(
    "local_rank,gpus,flags,expected",
    [(3, 4, (), 3), (1, 1, ("--backend", "gloo"), 0)],  # as many as the GPUs; gloo shares one GPU between two
    ids=["nccl, one GPU each", "gloo, two on one GPU"],
)
def test_ddp_processes_that_fit_join(tiny_data, monkeypatch, local_rank, gpus, flags, expected):
    calls = join_stubbed(monkeypatch, tiny_data, gpus, local_rank, max(gpus, local_rank + 1), *flags)
    assert calls["set_device"] == torch.device("cuda", expected)
    assert calls["backend"] == ("gloo" if flags else "nccl")


# ----------------------------------------------------------------------------- NVML in a container


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


# ----------------------------------------------------------------------------- fp16: one host sync a step


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


@pytest.mark.parametrize("cpu", fast_first(["avx2", "bf16"]))
def test_bf16_makes_no_host_sync_and_says_whether_it_is_native(tiny_data, tmp_path, cpu):
    env = {"CPUINFO_FLAGS": CPU_CLASSES[cpu]}  # each class of CPU, whatever this one is
    result, metrics = train("train_amp.py", tiny_data, tmp_path / "m.json", "--steps", 3, "--warmup-steps", 1, env=env)
    assert result.returncode == 0, result.stderr
    native = cpu == "bf16"
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


# ----------------------------------------------------------------------------- calibration and the compile cache


def test_calibration_gives_the_ddp_rows_their_window_too(monkeypatch, tmp_path):
    """With N GPUs the DDP rows split each step N ways: the steps are enough for them to time WINDOW_S too. The
    warm-up is cut to WARMUP_STEADY where the calibration's steps were steady after it, and kept where not."""
    step_ms, p90_ms = 20.0, 21.0

    def probe(run, log_dir, timeout, stop, *args):
        assert run.cmd[run.cmd.index("--warmup-steps") + 1] == str(calibrate.WARMUP_STEADY)
        return dict(status="ok", step_time_median_ms=step_ms, step_time_p90_ms=p90_ms)

    monkeypatch.setattr(launch, "launch", probe)
    info = dict(image_size=32, classes=list(range(10)))
    for variants, nproc, split in (["baseline", "ddp"], 4, 4), (["baseline", "amp"], 4, 1), (["all"], 8, 8):
        chosen = plan.Work(
            model="resnet18", batch_size=256, steps="auto", warmup_steps=20, eval_samples=10, seed=0, timeout=900
        )
        steps = calibrate.steps("data", info, chosen, 8, variants, tmp_path, nproc)
        warmup = chosen.warmup_steps
        assert warmup == calibrate.WARMUP_STEADY  # steady: p90 within 10% of the median
        assert (steps - warmup) * step_ms / 1e3 / split >= cost.WINDOW_S, (variants, steps)
        assert (steps - warmup - 1) * step_ms / 1e3 / split < cost.WINDOW_S
    chosen = plan.Work(
        model="resnet18", batch_size=256, steps="auto", warmup_steps=20, eval_samples=10, seed=0, timeout=900
    )
    assert calibrate.steps("data", info, chosen, 0, ["ddp"], tmp_path, 2) == 10 + 350  # CPU processes share cores
    p90_ms = 30.0  # not steady after 10 steps: the full warm-up
    chosen = plan.Work(
        model="resnet18", batch_size=256, steps="auto", warmup_steps=20, eval_samples=10, seed=0, timeout=900
    )
    assert calibrate.steps("data", info, chosen, 1, ["amp"], tmp_path, 1) == 20 + 350 and chosen.warmup_steps == 20


@pytest.mark.parametrize(
    "variants,expected",
    [
        (["baseline", "amp", "amp-synthetic"], "amp-synthetic"),  # the fastest: the mixed-precision ceiling
        (["compile", "all", "baseline"], "baseline"),  # no ceiling: not a compiled row, whose compile would be cold
        (["all", "ddp"], "ddp"),  # --scaling's rows
        (["all"], "all"),  # only compiled rows: the first
    ],
)
def test_the_calibration_runs_as_a_row_runs(monkeypatch, tmp_path, variants, expected):
    """It calibrates on the row named above, with the loader workers a one-process row gets (not one), under the
    run time limit, writing its log beside the rows' (the log folder made if need be)."""
    calls = []

    def probe(run, log_dir, timeout, stop, *args):
        calls.append((run, log_dir, timeout))
        return dict(status="ok", step_time_median_ms=10.0, step_time_p90_ms=10.5)

    monkeypatch.setattr(launch, "launch", probe)
    chosen = plan.Work(
        model="resnet18", batch_size=256, steps="auto", warmup_steps=20, eval_samples=10, seed=0, timeout=77
    )
    info = dict(image_size=32, classes=list(range(10)))
    calibrate.steps("data", info, chosen, 1, variants, tmp_path / "logs" / "bench", 1, cores=16)
    ((run, log_dir, timeout),) = calls
    assert run.variant == expected and timeout == 77 and log_dir == tmp_path / "logs" / "bench" and log_dir.is_dir()
    assert run.cmd[run.cmd.index("--workers") + 1] == str(plan.default_workers(16, 1, True)) == "15"
    calls.clear()
    calibrate.steps("data", info, replace(chosen), 1, variants, tmp_path / "logs" / "bench", 1, workers=3, cores=16)
    assert calls[0][0].cmd[calls[0][0].cmd.index("--workers") + 1] == "3"  # --workers, as every row


def test_the_planner_launches_nothing_it_asks_the_calibration_it_is_given(monkeypatch, tiny_data, tmp_path):
    """Steps auto (a GPU plan) are the calibration's: make_plan calls the one it is given, once a workload, with the
    work and the window it fitted; a mode that gives none is told to give --steps (no run is launched from plan.py)."""
    monkeypatch.setattr(launch, "launch", lambda *a, **k: pytest.fail("the planner launched a run"))
    argv = ["--data", str(tiny_data), "--variants", "baseline,amp", "--loaders", "none", "--repeats", "1"]
    args = cli.parse_args([*argv, "--batch-size", "8"])
    asked = []

    def steps(path, info, chosen, gpu_count, variants, log, nproc, window_s, workers, cores):
        asked.append((chosen.warmup_steps, variants, window_s))
        return chosen.warmup_steps + 123

    runs, works, _ = plan.make_plan(args, 1, 2, tmp_path, dry_run=False, calibrate=steps)
    assert asked == [(20, ["baseline", "amp"], cost.WINDOW_S)] and works["custom"].steps == 143
    assert {r.cmd[r.cmd.index("--steps") + 1] for r in runs} == {"143"}
    with pytest.raises(BenchError, match="--steps auto: this mode plans no calibration run; give --steps N"):
        plan.make_plan(args, 1, 2, tmp_path, dry_run=False)


def test_a_calibration_that_hangs_ends_the_bench_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(launch, "launch", lambda run, *a: dict(status="failed", error="timed out after 77 s"))
    chosen = plan.Work(
        model="resnet18", batch_size=256, steps="auto", warmup_steps=20, eval_samples=10, seed=0, timeout=77
    )
    info = dict(image_size=32, classes=list(range(10)))
    with pytest.raises(BenchError, match=r"calibration \(baseline\) failed: timed out after 77 s \(its log: .*"
                       r"calibration-baseline-0.log\)"):  # fmt: skip
        calibrate.steps("data", info, chosen, 1, ["baseline", "ddp"], tmp_path, 8)


# ----------------------------------------------------------------------------- capabilities


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


@pytest.mark.parametrize("cpu, isa, native", [("avx2", "avx2", False), ("bf16", "avx2 avx512 avx512_bf16 amx", True)])
def test_the_machine_record_carries_its_capabilities_and_the_scripts_read_the_same(monkeypatch, cpu, isa, native):
    """CPUINFO_FLAGS stands for /proc/cpuinfo's flags for the bench and the scripts alike (the one seam): a test sees
    the class it names, whatever this machine is, and the two readers never disagree."""
    checks = importlib.import_module("checks")
    monkeypatch.setenv("CPUINFO_FLAGS", CPU_CLASSES[cpu])
    info = machine.machine_info()
    assert info["cpu_isa"] == isa and info["cpu_bf16_native"] is native
    assert checks.native_bf16(torch.device("cpu")) is native
    assert machine.machine_class(info).endswith("-avx2" if cpu == "avx2" else "-amx")
    assert info["gpu_capability"] is None and info["gpu_bf16_native"] is None  # no GPU on the test machines
    monkeypatch.delenv("CPUINFO_FLAGS")
    flags = machine.cpu_flags()  # this machine's own, as /proc/cpuinfo lists them
    assert checks.native_bf16(torch.device("cpu")) is bool({"avx512_bf16", "amx_bf16", "bf16"} & flags)
    assert machine.machine_info()["cpu_isa"] == (" ".join(machine.cpu_isa(flags)) or None)


def test_a_slower_amp_row_names_emulated_bf16():
    base = dict(workload="small", kind="train", variant="baseline", runs_ok=3, runs_failed=0, rate_median=100.0)
    amp = dict(base, variant="amp", rate_median=20.0, speedup=0.2, speedup_low=0.18, speedup_high=0.22, rounds_paired=3)
    amp["speed_answer"] = "slower"
    amp.update(amp_dtype="bf16", bf16_native=False, device="cpu")
    line = verdicts.verdict(pd.Series(amp), pd.Series(base))
    assert "0.20x slower" in line and "bf16 is emulated on this CPU (no AVX-512-BF16 or AMX)" in line
    native = dict(amp, bf16_native=True)
    line = verdicts.verdict(pd.Series(native), pd.Series(base))
    assert "emulated" not in line
