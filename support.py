"""What the technique scripts need that is not the technique: the checks of the machine around mixed precision and
torch.compile. `make diff V=amp` or `V=compile` shows the technique itself, the lines one copies into a training
script; this is the plumbing that makes it fail in one line, or warn, where the machine cannot do it well.
"""

import logging
import os
import sys

import torch


def die(message):
    """End the run with a one-line error naming the problem, exit code 2 (as the scripts' own die)."""
    print(f"{os.path.basename(sys.argv[0])}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


# ----------------------------------------------------------------------------- mixed precision


def native_bf16(device):
    """True or False; None where the system does not say (a CPU without /proc/cpuinfo). bf16 is native on GPUs
    from Ampere on and on CPUs with AVX-512-BF16 or AMX (Arm: bf16); elsewhere it is emulated, and slow."""
    if device.type == "cuda":
        try:
            return torch.cuda.is_bf16_supported(including_emulation=False)
        except TypeError:  # a torch that does not know emulation
            return torch.cuda.is_bf16_supported()
    try:
        with open("/proc/cpuinfo") as f:
            flags = {flag for line in f if line.startswith(("flags", "Features")) for flag in line.split()}
    except OSError:
        return None
    return bool({"avx512_bf16", "amx_bf16", "bf16"} & flags)


def default_amp_dtype(device):
    """bf16 where native, and on any CPU (which has no fp16 autocast to speak of); fp16 on a GPU without bf16."""
    return "bf16" if device.type != "cuda" or native_bf16(device) else "fp16"


def amp_dtype(asked, device):
    """(name, torch dtype) of autocast: the one asked for (--amp-dtype), else the default; fp16 on a CPU is refused;
    none (train_all.py's switch) is (None, None): no autocast."""
    if asked == "none":
        return None, None
    name = asked or default_amp_dtype(device)
    if name == "fp16" and device.type == "cpu":
        die("--amp-dtype fp16 needs a CUDA GPU: on a CPU autocast runs in bf16")
    return name, torch.bfloat16 if name == "bf16" else torch.float16


def warn_emulated_bf16(dtype, device, is_main):
    """Say once, on stderr, where bf16 autocast runs on a device that only emulates it (called after every check of
    the input, so that bad input stays one line)."""
    if dtype == torch.bfloat16 and native_bf16(device) is False and is_main:
        what = "GPU (before Ampere)" if device.type == "cuda" else "CPU (no AVX-512-BF16 or AMX)"
        print(
            f"{os.path.basename(sys.argv[0])}: warning: this {what} has no native bf16: autocast emulates it, and can"
            " be several times slower than full precision",
            file=sys.stderr,
        )


# ----------------------------------------------------------------------------- DistributedDataParallel


def ddp_device(device, local_rank, backend):
    """One GPU per process: local rank N takes GPU N. NCCL refuses two processes on one GPU, so more processes on a
    machine than it has GPUs are refused in one line, unless gloo (--backend gloo) lets them share."""
    gpus, local_world_size = torch.cuda.device_count(), int(os.environ.get("LOCAL_WORLD_SIZE", local_rank + 1))
    if device.type == "cuda" and max(local_rank + 1, local_world_size) > gpus:
        if backend != "gloo":
            die(
                f"{local_world_size} processes on this machine but {gpus} GPU(s): NCCL cannot put two on one GPU;"
                f" launch --nproc-per-node {gpus} at most, or let them share with --backend gloo (slower)"
            )
        return torch.device("cuda", local_rank % gpus)
    return device


def check_ddp(batch_size, world_size, sync_bn, backend, device):
    """The DDP settings that cannot work here, each one line and exit code 2: a batch that does not split evenly,
    SyncBatchNorm or NCCL without CUDA."""
    if batch_size % world_size:
        die(f"--batch-size {batch_size} does not split evenly over {world_size} processes")
    if sync_bn and device.type != "cuda":
        die("--sync-bn needs CUDA: SyncBatchNorm has no CPU implementation")
    if backend == "nccl" and device.type != "cuda":
        die("--backend nccl needs CUDA GPUs: on a CPU use gloo")


# ----------------------------------------------------------------------------- torch.compile


def check_compiler(device):
    """torch.compile needs a toolchain, a C++ compiler on a CPU and Triton on a GPU: a toy compile first, so that a
    missing one is one line, exit code 2, not a traceback in the first step."""
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # no "No CUDA runtime" warning on a CPU
    try:
        torch.compile(lambda x: x * 2 + 1)(torch.ones(8, device=device))
    except Exception as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip() and "raised" not in line]
        reason = f"{type(e).__name__}: {lines[0][:200]}" if lines else type(e).__name__
        toolchain = "Triton (pip install triton)" if device.type == "cuda" else "a C++ compiler (g++, or CXX=...)"
        die(f"torch.compile cannot compile on this machine ({reason}): it needs {toolchain}")


def compile_cache_warm():
    """Whether the compile cache (TORCHINDUCTOR_CACHE_DIR) holds kernels already: a run that finds it filled reuses
    them, and its first step pays the warm cost, not a fresh start's."""
    try:  # torch's own answer to "where are the kernels kept" (torch 2.4 keeps it in runtime_utils)
        from torch._inductor.runtime.cache_dir_utils import cache_dir
    except ImportError:
        from torch._inductor.runtime.runtime_utils import cache_dir
    return os.path.isdir(cache_dir()) and any(os.scandir(cache_dir()))


def prepare_compile(warmup_steps, device):
    """Before torch.compile: the first step compiles, so it must be a warm-up step; the toolchain works; return
    whether the compile cache was warm (looked at before the toy compile fills it)."""
    if warmup_steps < 1:
        die("--warmup-steps 0: the first step compiles the model and must not be timed; give 1 or more")
    warm = compile_cache_warm()
    check_compiler(device)
    return warm
