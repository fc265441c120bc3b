"""What the training scripts and loaders need that is neither the training nor the technique: the checks.

Bad input ends in one line naming the problem and exit code 2, never a traceback, and before the work
where it can. Every train*.py and loader*.py imports this module; `make diff V=...` never shows it.

    die(message)                             the one-line error, exit code 2
    check_arguments(args)                    a tested torch, the core flags in their ranges, a known loader and model
    pick_device(asked, local_rank)           the device a run trains on
    make_model(name, num_classes)            --model as an nn.Module: torchvision's by name, or your own factory
    try_model(model, name, ...)              one tiny forward pass: a model that cannot take the images says so
    writable(path, what), write_whole(...)   outputs: refused before the work, written whole or not at all
    one_line_errors()                        a batch that does not fit (--max-batch reads it) and a compiler that
                                             cannot build end like bad input
    machine checks                           native bf16 and the AMP dtype, DDP's devices and settings, the
                                             compiler's toolchain and cache (train_amp, train_ddp, train_compile)
    data checks                              every image file's ends before training, DALI's and nvJPEG's errors
                                             explained
"""

import contextlib
import functools
import importlib.util
import logging
import math
import os
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple, Optional

try:
    import resource  # the address-space limit (limited()): Unix
except ImportError:
    resource = None

import torch
import torchvision
from PIL import Image
from torch import nn

import cpu


def die(message):
    """End the run with a one-line error naming the problem, exit code 2."""
    print(f"{os.path.basename(sys.argv[0])}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def one_line(error):
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:300]}"


def count_or_all(text):
    """A whole number, or all (argparse names this function when the text is neither)."""
    return text if text == "all" else int(text)


# ----------------------------------------------------------------------------- the flags


def at_least(args, least):
    """Each flag of least ({"--batch-size": 1, ...}) that is given is that number or more: the flag is named if not."""
    for flag, smallest in least.items():
        value = getattr(args, flag[2:].replace("-", "_"), None)
        if value is not None and value != "all" and value < smallest:
            die(f"{flag} {value}: must be {smallest} or more")


def check_workers_and_seed(args):
    cores = os.cpu_count() or 1
    if args.workers > 8 * cores:
        die(f"--workers {args.workers}: at most 8 loading processes per core ({8 * cores} here)")
    if args.seed >= 2**31:
        die(f"--seed {args.seed}: must be below 2**31")
    if args.prefetch_factor is not None and args.prefetch_factor < 1:
        die(f"--prefetch-factor {args.prefetch_factor}: must be 1 or more")
    if args.prefetch_factor is not None and args.workers == 0:
        die("--prefetch-factor: the batches each loading process keeps ready; with --workers 0 there is none")


class Workers(NamedTuple):
    """How a loader loads its batches: --workers (processes; DALI: threads) and the DataLoader's other settings."""

    count: int
    prefetch_factor: Optional[int] = None  # batches each process keeps ready (None: torch's default, 2)
    pin_memory: str = "auto"  # on, off, or auto: on where the batches go to a GPU
    persistent: str = "on"  # on: the processes live from epoch to epoch; off: started again every epoch


def workers_of(args):
    """The Workers of a script's flags (--workers, --prefetch-factor, --pin-memory, --persistent-workers)."""
    settings = (getattr(args, flag, default) for flag, default in (("prefetch_factor", None), ("pin_memory", "auto"),
                ("persistent_workers", "on")))  # fmt: skip
    return Workers(args.workers, *settings)


def loading_fields(args, device, loader):
    """The record's loading settings as they took effect: prefetch_factor, pin_memory, persistent_workers; loader:
    the one that loaded (open_data()'s info.loader)."""
    if loader == "synthetic":  # no loading: one batch made on the device
        return dict(prefetch_factor=None, pin_memory=None, persistent_workers=None)
    if loader == "dali":  # its threads are --workers, its queue --prefetch-factor
        return dict(prefetch_factor=args.prefetch_factor or 2, pin_memory=None, persistent_workers=None)
    settings = dataloader_settings(workers_of(args), device)
    return {k: settings.get(k) for k in ("prefetch_factor", "pin_memory", "persistent_workers")}


def dali_settings(workers):
    """A DALI pipeline's keywords for workers (a Workers, or a count alone): --workers its threads (1 at least),
    --prefetch-factor its queue's depth (DALI's default, 2); the DataLoader's own settings (--pin-memory on or off,
    --persistent-workers off) are refused: DALI has no such thing to set."""
    workers = workers if isinstance(workers, Workers) else Workers(workers)
    if workers.pin_memory != "auto" or workers.persistent != "on":
        die("--pin-memory and --persistent-workers are the DataLoader's (loader.py): DALI places its own batches")
    return dict(num_threads=max(workers.count, 1), prefetch_queue_depth=workers.prefetch_factor or 2)


def dataloader_settings(workers, device):
    """The DataLoader's keywords for workers (a Workers, or a count alone: the defaults) on device; --pin-memory on
    where no batch goes to a GPU is refused (pinned memory speeds only a copy to one)."""
    workers = workers if isinstance(workers, Workers) else Workers(workers)
    if workers.pin_memory == "on" and device.type != "cuda":
        die(f"--pin-memory on: page-locked batches speed their copy to a GPU; this run is on the {device.type}")
    pin = workers.pin_memory == "on" or (workers.pin_memory == "auto" and device.type == "cuda")
    settings = dict(num_workers=workers.count, pin_memory=pin, persistent_workers=False)
    if workers.count > 0:
        settings.update(persistent_workers=workers.persistent == "on", prefetch_factor=workers.prefetch_factor or 2)
    return settings


OLDEST_TORCH = (2, 11)  # the oldest torch CI tests (make test: the Makefile's OLDEST); requirements.txt says why none
# older; written here alone (python -m bench reads it from this file: bench/__init__.py oldest_torch)


def too_old(version):
    """The one-line refusal of a torch older than the oldest tested (None where it is not): on an older one these
    scripts were never run."""
    release = tuple(int(part) for part in version.split("+")[0].split(".")[:2])
    if release < OLDEST_TORCH:
        oldest = ".".join(map(str, OLDEST_TORCH))
        return f"torch {version}: these scripts need torch {oldest} or newer (the oldest tested)"
    return None


def check_arguments(args):
    """The core flags of every train*.py, before any work: a torch that is tested, each number in its range, a loader
    that exists, a model that can be made (a torchvision name, or your own factory, imported now)."""
    refusal = too_old(torch.__version__)
    if refusal:
        die(refusal)
    at_least(args, {"--batch-size": 1, "--epochs": 1, "--steps": 1, "--workers": 0, "--eval-samples": 0, "--seed": 0})
    check_workers_and_seed(args)
    if args.lr is not None and not (math.isfinite(args.lr) and args.lr > 0):
        die(f"--lr {args.lr}: the learning rate must be a finite number above 0")
    if args.loader not in ("torchvision", "dali", "nvjpeg"):
        die(f"--loader {args.loader}: choose torchvision (loader.py), dali (loader_dali.py), nvjpeg (loader_nvjpeg.py)")
    model_factory(args.model)


def pick_device(asked, local_rank):
    """cuda:LOCAL_RANK where a GPU is asked for or present (--device auto), else the CPU; a GPU asked for and absent
    is refused."""
    if asked == "cuda" and not torch.cuda.is_available():
        die(f"--device cuda: torch {torch.__version__} sees no CUDA GPU")
    return torch.device(f"cuda:{local_rank}" if asked != "cpu" and torch.cuda.is_available() else "cpu")


# ----------------------------------------------------------------------------- the model


@functools.lru_cache(maxsize=None)
def model_factory(name):
    """What --model names, as factory(num_classes) -> nn.Module: a torchvision model, or the user's own factory
    from `path/to/file.py:factory` or `package.module:factory` (found from the current folder first)."""
    if ":" not in name:
        if name not in torchvision.models.list_models(module=torchvision.models):
            die(
                f"unknown model {name!r}: see torchvision.models.list_models(module=torchvision.models),"
                " or give your own as FILE.py:FACTORY"
            )
        return lambda num_classes: torchvision.models.get_model(name, weights=None, num_classes=num_classes)
    source, _, attr = name.rpartition(":")
    if source.endswith(".py") and not os.path.isfile(source):
        die(f"--model {name}: no file {source}")
    try:
        if source.endswith(".py"):  # its own folder first, as `python FILE.py` would have it
            sys.path.insert(0, os.path.dirname(os.path.abspath(source)))
            spec = importlib.util.spec_from_file_location(os.path.basename(source)[:-3], source)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            sys.path.insert(0, os.getcwd())
            module = importlib.import_module(source)
    except Exception as e:  # the user's code: whatever it raises ends the run in one line
        die(f"--model {name}: importing {source} failed: {one_line(e)}")
    factory = getattr(module, attr, None)
    if factory is None:
        die(f"--model {name}: {source} has no {attr!r}")
    if not callable(factory):
        die(f"--model {name}: {attr} in {source} is not callable: a {type(factory).__name__}")
    return factory


def make_model(name, num_classes):
    """factory(num_classes) of what --model names, which must give a module with parameters to train."""
    try:
        model = model_factory(name)(num_classes)
    except Exception as e:  # the user's code: whatever it raises ends the run in one line
        die(f"model {name}: factory({num_classes}) raised {one_line(e)}")
    if not isinstance(model, nn.Module):
        die(f"model {name}: factory({num_classes}) returned a {type(model).__name__}, not a torch.nn.Module")
    if not any(p.requires_grad for p in model.parameters()):
        die(f"model {name} has no parameters to train")
    return model


def try_model(model, name, num_classes, image_size):
    """One tiny forward pass, so a model that cannot take these images fails here, clearly; then the batch-norm
    statistics it moved are reset. Returns the model."""
    try:
        with torch.no_grad():
            out = model(torch.zeros(2, 3, image_size, image_size))
    except Exception as e:
        die(f"model {name} cannot take {image_size} px images: {one_line(e)}")
    if not isinstance(out, torch.Tensor) or out.shape != (2, num_classes):
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        die(f"model {name} returns {shape} for 2 images in training mode, not one score per class (2, {num_classes})")
    for module in model.modules():  # undo what the dry run did to batch-norm statistics
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.reset_running_stats()
    return model


# ----------------------------------------------------------------------------- outputs


def output_problem(path):
    """Why a file cannot be written at path (a folder, a missing folder, no permission), or None."""
    if os.path.isdir(path):
        return "it is a folder"
    try:
        with open(path + ".tmp", "w"):
            pass
        os.remove(path + ".tmp")
    except OSError as e:
        return e.strerror or str(e)
    return None


def writable(path, what="metrics"):
    """Fail now, not after training, when a file cannot be written."""
    problem = output_problem(path)
    if problem:
        die(f"cannot write {what} to {path}: {problem}")


def write_whole(path, what, data):
    """Write data (bytes or text) into path whole (a temporary file, then renamed) or not at all: a full disk ends
    the run with one line, and no partial file is left."""
    try:
        with open(path + ".tmp", "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(path + ".tmp", path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(path + ".tmp")
        die(f"cannot write {what} to {path}: {e.strerror or e}")


# ----------------------------------------------------------------------------- out of memory

# what a batch too large for the memory raises, as the libraries word it: the caching allocator, the host's
# allocator and its threads, cuBLAS and cuDNN failing to allocate their workspace near the limit, and a
# DataLoader worker killed for memory (by the kernel, or by a full /dev/shm: a bus error)
OUT_OF_MEMORY = (
    "out of memory",
    "can't allocate memory",
    "cannot allocate memory",  # ENOMEM: a worker's batch that cannot be mapped under an address-space limit
    "can't start new thread",
    "cublas_status_alloc_failed",
    "cudnn_status_alloc_failed",
    "cudnn_status_not_enough_workspace",
    "allocation_failed",  # cuDNN 9: CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, ..._DEVICE_...
    "insufficient shared memory",
    "out of shared memory",
    "exited unexpectedly",
    "killed by signal: bus error",
    "killed by signal: killed",
)


def is_out_of_memory(message):
    """Whether an error's message says that the batch does not fit in the memory. oneDNN (a CPU's convolutions) words
    a failed allocation as it words any kernel it cannot build: under an address-space limit (python -m bench
    --max-batch on a CPU), that is the memory."""
    text = message.lower()
    return any(words in text for words in OUT_OF_MEMORY) or ("could not create a primitive" in text and limited())


def limited():
    """Whether this process runs under an address-space limit (RLIMIT_AS). resource is imported with this module:
    near the limit a library loaded then cannot be mapped (an ImportError in place of the one line)."""
    return resource is not None and resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY


@contextlib.contextmanager
def one_line_errors():
    """What the user can fix ends like bad input: one line, exit code 2. A batch that does not fit in memory
    (python -m bench --max-batch reads it as "does not fit"), and a toolchain torch.compile cannot build with, found
    in its first step (train_compile.py, train_all.py). Any other error is raised as it is."""
    try:
        yield
    except RuntimeError as e:
        if is_out_of_memory(str(e)):
            die(f"out of memory, try a smaller --batch-size: {str(e).strip().splitlines()[0][:300]}")
        toolchain = toolchain_error(e)
        if toolchain is None:
            raise
        die(cannot_compile(toolchain))


# ----------------------------------------------------------------------------- mixed precision (train_amp.py)


def native_bf16(device):
    """True or False; None where the system does not say (a CPU without /proc/cpuinfo). bf16 is native on GPUs
    from Ampere on and on CPUs with AVX-512-BF16 or AMX (Arm: bf16: the one rule, cpu.py's); elsewhere it is
    emulated, and slow."""
    if device.type == "cuda":
        try:
            return torch.cuda.is_bf16_supported(including_emulation=False)
        except TypeError:  # a torch that does not know emulation
            return torch.cuda.is_bf16_supported()
    return cpu.native_bf16(cpu_flags())


def cpu_flags():
    """The CPU's feature flags (cpu.py, which the bench reads too: CPUINFO_FLAGS stands for them); None where the
    system does not say. A CPUINFO_FLAGS set to nothing ends the run in one line."""
    try:
        return cpu.flags()
    except cpu.FlagsError as e:
        die(str(e))


def check_amp_dtype(name, device):
    """fp16 autocast on a CPU is refused: there autocast runs in bf16 (train_amp.py picks the dtype)."""
    if name == "fp16" and device.type == "cpu":
        die("--amp-dtype fp16 needs a CUDA GPU: on a CPU autocast runs in bf16")


def allow_skipped_steps(scaler):
    """An fp16 GradScaler skips optimizer.step() while it finds its scale (the first steps, and after an overflow):
    the scheduler steps all the same, and torch warns that lr_scheduler.step() ran before optimizer.step(). With a
    scaler that is expected, so that warning is silenced where the scaler is on (and only that one)."""
    if scaler.is_enabled():
        warnings.filterwarnings("ignore", r"Detected call of `lr_scheduler\.step\(\)` before `optimizer\.step\(\)`")


def warn_emulated_bf16(name, device, is_main):
    """Say once, on stderr, where bf16 autocast runs on a device that only emulates it (the meter calls it after every
    check of the input, so that bad input stays one line)."""
    if name == "bf16" and native_bf16(device) is False and is_main:
        what = "GPU (before Ampere)" if device.type == "cuda" else "CPU (no AVX-512-BF16 or AMX)"
        print(
            f"{os.path.basename(sys.argv[0])}: warning: this {what} has no native bf16: autocast emulates it, and can"
            " be several times slower than full precision",
            file=sys.stderr,
        )


# ----------------------------------------------------------------------------- DistributedDataParallel (train_ddp.py)


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


EXIT_GRACE_S = 0.1  # after leaving the process group: the workers' last act needs microseconds


def let_the_group_workers_finish():
    """After destroy_process_group: a moment in which Python's lock is free. A process group's worker thread (gloo's)
    lets go of a finished collective's tensors a moment after the caller went on, and that needs Python's lock; where
    the group outlives destroy_process_group (FSDP's and DDP's modules hold it) and the process is by then exiting,
    the thread is stopped in the middle and the whole process aborts ("terminate called without an active
    exception", SIGABRT: 1 FSDP job in 25 over gloo here, after it had trained and written its metrics)."""
    time.sleep(EXIT_GRACE_S)


def check_ddp(batch_size, world_size, sync_bn, backend, device):
    """The DDP settings that cannot work here, each one line and exit code 2: a batch that does not split evenly,
    SyncBatchNorm or NCCL without CUDA."""
    if batch_size % world_size:
        die(f"--batch-size {batch_size} does not split evenly over {world_size} processes")
    if sync_bn and device.type != "cuda":
        die("--sync-bn needs CUDA: SyncBatchNorm has no CPU implementation")
    if backend == "nccl" and device.type != "cuda":
        die("--backend nccl needs CUDA GPUs: on a CPU use gloo")


# ----------------------------------------------------------------------------- torch.compile (train_compile.py)


def check_compiler(device):
    """torch.compile needs a toolchain, a C++ compiler on a CPU and Triton on a GPU: a missing one is one line, exit
    code 2, not a traceback in the first step. Looked for as Inductor looks (CXX, then g++ and the rest; Triton's
    package and the GPU's generation), not tried: a trial compile here would pay Inductor's start before the first
    step, whose time is compile_s, and compile_s would leave it out (4.8 s against 13.5 s without it, the tests' tiny
    model on a 2-core CPU). A toolchain found that cannot build fails in the first step: one_line_errors() says it."""
    if device.type == "cuda":
        from torch.utils._triton import has_triton

        if not has_triton():
            die("torch.compile cannot compile on this machine (no working Triton for this GPU): it needs Triton "
                "(pip install triton)")  # fmt: skip
        return
    from torch._inductor import cpp_builder

    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # no "No CUDA runtime" warning on a CPU
    try:
        cpp_builder.get_cpp_compiler()
    except RuntimeError as e:
        die(cannot_compile(e))


TOOLCHAIN_ERRORS = {  # what Inductor raises where the toolchain is missing or cannot build, and what it needs then
    "InvalidCxxCompiler": "a C++ compiler (g++, or CXX=...)",
    "CppCompileError": "a C++ compiler (g++, or CXX=...) that builds its kernels",
    "TritonMissing": "Triton (pip install triton)",
    "GPUTooOldForTriton": "a GPU that Triton supports",
}


def toolchain_error(error):
    """The error among error and its causes (TorchDynamo wraps the backend's in BackendCompilerFailed) that says
    the toolchain is missing or cannot build, or None."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if type(error).__name__ in TOOLCHAIN_ERRORS:
            return error
        error = getattr(error, "inner_exception", None) or error.__cause__ or error.__context__
    return None


def cannot_compile(error):
    """The one line for a toolchain error: its type, its first line (a compiler's own error where it gave one)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip() and "raised" not in line]
    said = [line for line in lines if "error:" in line] or lines
    reason = f"{type(error).__name__}: {said[0][:200]}" if said else type(error).__name__
    needs = TOOLCHAIN_ERRORS.get(type(error).__name__, "its toolchain")
    return f"torch.compile cannot compile on this machine ({reason}): it needs {needs}"


def compile_cache_warm():
    """Whether the compile cache (TORCHINDUCTOR_CACHE_DIR) holds kernels already: a run that finds it filled reuses
    them, and its first step pays the warm cost, not a fresh start's."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir  # torch's own answer: where are the kernels kept

    return os.path.isdir(cache_dir()) and any(os.scandir(cache_dir()))


# ----------------------------------------------------------------------------- image files (loader.py, loader_dali.py)

HEAD = 4096  # bytes read from the start of a file: a JPEG's size is there unless its metadata is longer


def pixel_limit():
    """Pillow refuses to open an image of more pixels than this (a decompression bomb); DALI would decode it,
    so both loaders refuse it before training, with Pillow's message."""
    return 2 * Image.MAX_IMAGE_PIXELS if Image.MAX_IMAGE_PIXELS else float("inf")


def header_pixels(head):
    """Width x height as a PNG's or a JPEG's first bytes give them (the IHDR chunk, a SOFn segment), or None."""
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
        return int.from_bytes(head[16:20], "big") * int.from_bytes(head[20:24], "big")
    i = 2
    while head[:2] == b"\xff\xd8" and i + 9 <= len(head) and head[i] == 0xFF:
        marker = head[i + 1]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # start of frame: height, width
            return int.from_bytes(head[i + 5 : i + 7], "big") * int.from_bytes(head[i + 7 : i + 9], "big")
        i += 1 if marker == 0xFF else 2 + int.from_bytes(head[i + 2 : i + 4], "big")
    return None


def looks_whole(path):
    """Whether a file starts and ends as a whole JPEG (FFD8 ... FFD9) or PNG (... IEND) does, and has no more
    pixels than Pillow opens: its first 4 KiB and last 16 bytes read (the header parsed by Pillow if longer)."""
    with open(path, "rb") as f:
        head = f.read(HEAD)
        f.seek(max(0, os.fstat(f.fileno()).st_size - 16))
        tail = f.read().rstrip(b"\0")
    jpeg, png = head[:2] == b"\xff\xd8", head[:4] == b"\x89PNG"
    if not (jpeg and tail.endswith(b"\xff\xd9") or png and b"IEND" in tail):
        return False
    pixels = header_pixels(head)
    if pixels is None:
        try:
            with Image.open(path) as image:
                pixels = image.width * image.height
        except Exception:  # Pillow says why when the file is read in full
            return False
    return pixels <= pixel_limit()


def ends_whole(paths):
    return [looks_whole(path) for path in paths]


def check_files(paths, read, threads=4, chunk=256):
    """Look at the ends and the size of every file; read each one that does not look whole with `read`,
    which ends the run naming it if it is truly unreadable. Truncated, empty, non-image and oversized
    files are so found before training starts, not when an epoch happens to reach them (and before
    DALI 2.4's CPU decoder, which can crash on them or decode a bomb, sees them). Threads, in chunks, for
    a cold disk or a network file system: the 60,000 files of data/small took 4.2 s read from disk and
    2.0 s from the page cache on 2 cores (one thread: 5.8 and 0.95 s), so a million take 35 to 70 s."""
    with ThreadPoolExecutor(threads) as pool:
        whole = [ok for part in pool.map(ends_whole, [paths[i : i + chunk] for i in range(0, len(paths), chunk)])
                 for ok in part]  # fmt: skip
    for path, ok in zip(paths, whole):
        if not ok:
            read(path)


def first_undecodable(paths):
    """The first of paths that DALI's decoder refuses, decoding one image at a time on the CPU (the step
    that fails is the image's index, as DALI's authors advise); None if it decodes them all."""
    from nvidia.dali import Pipeline, fn, types

    pipe = Pipeline(batch_size=1, num_threads=1, device_id=None, exec_async=False, exec_pipelined=False)
    with pipe:
        encoded, _ = fn.readers.file(files=paths, random_shuffle=False)
        pipe.set_outputs(fn.decoders.image(encoded, device="cpu", output_type=types.RGB))
    pipe.build()
    for path in paths:
        try:
            pipe.run()
        except RuntimeError:
            return path
    return None


DALI_OUT_OF_MEMORY = ("out of memory", "cudaerrormemoryallocation", "cuda allocation failed", "bad_alloc")


def explain_dali_error(error, paths, read):
    """A one-line message for DALI's error. DALI names a file it cannot open, not one it cannot decode:
    then every image is read as loader.py reads them (`read` ends the run naming the first bad one), and
    failing that, decoded by DALI one at a time (minutes on ImageNet). Out of memory is said at once."""
    lines = [line.strip() for line in error.split("encountered:")[-1].splitlines() if line.strip()]
    reason = lines[0] if lines else error
    if any(words in error.lower() for words in DALI_OUT_OF_MEMORY):
        return f"out of memory in DALI, try a smaller --batch-size: {reason[:300]}"
    if "fn.readers.file" in error or "fn.decoders.image" in error:
        for path in paths:
            if path in reason:
                return f"cannot read image {path}: {reason}"
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(read, paths, chunksize=64))
        path = first_undecodable(paths)
        if path is not None:
            return f"cannot read image {path}: DALI's decoder refuses it ({reason})"
    return f"DALI failed: {reason}"


def explain_jpeg_error(error, paths, read):
    """A one-line message for torchvision's JPEG decode failing on a batch of files (loader_nvjpeg.py): the first of
    paths that `read` (loader.py's reading, which raises naming the file) cannot read, else the first torchvision's
    decoder refuses alone, on the CPU; out of memory is said at once. Never ends the run itself: it runs in the
    loader's thread, which hands the message to the training thread."""
    reason = one_line(error)
    if "out of memory" in str(error).lower():
        return f"out of memory decoding JPEG files on the device, try a smaller --batch-size: {reason}"
    for path in paths:
        try:
            read(path)
            torchvision.io.decode_jpeg(torchvision.io.read_file(path), mode=torchvision.io.ImageReadMode.RGB)
        except Exception as e:  # the file's own fault, named
            return f"cannot read image {path}: {str(e).removeprefix(f'cannot read image {path}: ')[:300]}"
    return f"the JPEG decode failed on a batch of {len(paths)} files, each of which decodes alone: {reason}"


def known_arguments(operator, **arguments):
    """The arguments that the installed DALI's operator (its schema name, e.g. readers__File) accepts: an
    optional argument newer or older than the DALI at hand is left out rather than failing the pipeline."""
    from nvidia.dali import backend

    schema = backend.GetSchema(operator)
    return {name: value for name, value in arguments.items() if schema.HasArgument(name)}


# ----------------------------------------------------------------------------- FSDP (train_fsdp.py)


def say_unsharded(is_main):
    """Without torchrun there is one process and nothing to shard: said once, and it trains as train.py."""
    if is_main:
        print(
            f"{os.path.basename(sys.argv[0])}: note: not launched by torchrun: one process, unsharded, trains as"
            " train.py does (torchrun --standalone --nproc-per-node N to shard)",
            file=sys.stderr,
        )


def say_root_only(model, units, is_main):
    """A model with no blocks to shard: the root alone is sharded (its parameters gathered whole every step)."""
    if not units and is_main:
        print(
            f"{os.path.basename(sys.argv[0])}: note: model {model} has no blocks to shard one by one: the root alone"
            " is sharded, every parameter gathered at once in each forward and backward",
            file=sys.stderr,
        )


# ----------------------------------------------------------------------------- fused step, reduced precision


def check_fused(name, device):
    """The optimizer's fused step on this device and torch, tried on one parameter: where none exists, one line."""
    parameter = torch.zeros(2, device=device, requires_grad=True)
    parameter.grad = torch.ones_like(parameter)
    optimizer = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}[name]
    try:
        optimizer([parameter], lr=0.01, fused=True).step()
    except (RuntimeError, TypeError, NotImplementedError, ValueError) as e:
        die(f"torch {torch.__version__} has no fused {optimizer.__name__} step on the {device.type}: {one_line(e)}")


def reduced_precision(device, is_main):
    """What fp32 matmuls and convolutions can run at inside, here: tf32 (NVIDIA GPUs from Ampere on), bf16 (oneDNN, on
    a CPU that computes bf16 natively), or None: then said once, and the run stays in fp32."""
    if device.type == "cuda":
        found = "tf32" if torch.cuda.get_device_capability(device)[0] >= 8 else None
    else:
        found = "bf16" if native_bf16(device) and torch.backends.mkldnn.is_available() else None
    if found is None and is_main:
        has = "no TF32 (before Ampere)" if device.type == "cuda" else "no native bf16 (AVX-512-BF16, AMX or Arm bf16)"
        print(
            f"{os.path.basename(sys.argv[0])}: note: this {device.type} has {has}: matmuls and convolutions stay in"
            " fp32, and this run is the baseline's (its row: does not apply here)",
            file=sys.stderr,
        )
    return found
