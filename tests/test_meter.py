"""meter.py beside the story: delete every line of a training script that names the meter and it still trains
and evaluates; the meter's own edge cases; the one-line out-of-memory error and what it reads as out of memory."""

import json
import re
import shutil

import pytest

from helpers import ROOT, SCRIPTS, SMALL_MODEL, TINY_MODEL, check_clean_failure, fast_first, run, train

TRAINING = sorted({command[0] for command in SCRIPTS.values()})
NAMES_THE_METER = re.compile(r"\bmeter\b", re.IGNORECASE)

# imports the stripped script from the folder it lies in, counts its optimizer steps and its evaluations, runs it
RUNNER = """
import importlib.util, json, sys, weakref
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

path, out = sys.argv[1], sys.argv[2]
sys.argv = [path, *sys.argv[3:]]
spec = importlib.util.spec_from_file_location("stripped", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
counts = dict(steps=0, evaluations=[])
stepped = weakref.WeakKeyDictionary()  # steps per optimizer: the training one's are counted (checks.py tries one apart)


def count(optimizer, *args):
    stepped[optimizer] = stepped.get(optimizer, 0) + 1
    counts["steps"] = max(counts["steps"], stepped[optimizer])


register_optimizer_step_post_hook(count)
evaluate = module.evaluate


def counted(*args):
    result = evaluate(*args)
    counts["evaluations"].append(result)
    return result


module.evaluate = counted
module.main()
open(out, "w").write(json.dumps(counts))
"""


def test_every_training_script_is_checked():
    assert TRAINING and set(TRAINING) == {p.name for p in ROOT.glob("train*.py")}


@pytest.mark.parametrize("script", fast_first(TRAINING))
def test_without_the_meter_a_script_still_trains_and_evaluates(script, tiny_data, tmp_path):
    """Every line naming the meter is deleted (its import too); meter.py is not beside the copy, so nothing can
    reach it. The copy trains its steps and evaluates after each epoch, as the script does."""
    text = (ROOT / script).read_text()
    kept = [line for line in text.splitlines() if not NAMES_THE_METER.search(line)]
    assert len(kept) < len(text.splitlines()) - 5  # the meter's lines were there, and are gone
    for name in ("checks.py", "loader.py", "loader_dali.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / script).write_text("\n".join(kept) + "\n")
    (tmp_path / "cli.py").write_text(RUNNER)
    out = tmp_path / "counts.json"
    flags = ["--data", tiny_data, "--model", TINY_MODEL, "--batch-size", 16, "--workers", 0]
    flags += ["--epochs", 2]
    result = run(tmp_path / "cli.py", tmp_path / script, out, *flags, "--device", "cpu", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    counts = json.loads(out.read_text())
    assert counts["steps"] == 2 * (120 // 16)  # 2 epochs of 7 full batches
    assert len(counts["evaluations"]) == 2 and all(images == 40 for _, images in counts["evaluations"])
    assert not (tmp_path / "meter.py").exists()


def test_a_target_reached_where_the_window_opens_times_the_next_epoch(tiny_data, tmp_path):
    """--warmup-steps an epoch long: the window opens at the first evaluation, which reaches the target; no step has
    been timed, so the run goes on and stops at the next evaluation, having timed that epoch."""
    result, m = train("train.py", tiny_data, tmp_path / "m.json", "--warmup-steps", 7, "--epochs", 4,
                      "--target-accuracy", 1e-9)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert m["steps_timed"] == 7 and len(m["val_curve"]) == 2 and m["epoch_starts_timed"] == 1
    assert "reached --target-accuracy" in result.stdout and "stopped after 14 steps" in result.stdout


OUT_OF_MEMORY = [  # as the libraries print them, near the memory limit
    "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.10 GiB total capacity)",
    "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    "cuDNN error: CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED",
    "cuDNN error: CUDNN_STATUS_NOT_ENOUGH_WORKSPACE",
    "DataLoader worker (pid(s) 4242) exited unexpectedly",
    "DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that dataloader's workers are out of"
    " shared memory. Please try to raise your shared memory limit.",
    "unable to write to file </torch_4242_1>: No space left on device (28). This might be caused by insufficient"
    " shared memory (shm)",
    "DefaultCPUAllocator: can't allocate memory: you tried to allocate 1073741824 bytes.",
    "unable to mmap 2359296 bytes from file <filename not specified>: Cannot allocate memory (12)",  # a worker's batch
    "can't start new thread",
]
NOT_OUT_OF_MEMORY = [
    "mat1 and mat2 shapes cannot be multiplied (2x10 and 20x10)",
    "CUDA error: device-side assert triggered",
    "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED",
    "Expected all tensors to be on the same device",
]


@pytest.mark.parametrize("message", OUT_OF_MEMORY)
def test_what_reads_as_out_of_memory(message):
    import checks

    assert checks.is_out_of_memory(message)


@pytest.mark.parametrize("message", NOT_OUT_OF_MEMORY)
def test_what_does_not_read_as_out_of_memory(message):
    import checks

    assert not checks.is_out_of_memory(message)


def test_a_cpu_kernel_that_cannot_be_built_is_out_of_memory_only_under_a_memory_limit(monkeypatch):
    """oneDNN's words for a failed allocation (seen near --max-batch's limit on a CPU) and for a kernel it does not
    have are the same: the memory only where the process has an address-space limit."""
    import resource

    import checks

    unlimited = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    message = "RuntimeError: could not create a primitive"
    monkeypatch.setattr(resource, "getrlimit", lambda which: unlimited)
    assert not checks.is_out_of_memory(message)
    monkeypatch.setattr(
        resource, "getrlimit", lambda which: (4500 << 20, 4500 << 20) if which == resource.RLIMIT_AS else unlimited
    )
    assert checks.is_out_of_memory(message)


@pytest.mark.parametrize("message", fast_first(["CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate`",
                                                "DataLoader worker (pid(s) 4242) exited unexpectedly"]))  # fmt: skip
def test_a_library_out_of_memory_ends_in_the_one_line(message, tiny_data, tmp_path):
    """A run whose step raises what cuBLAS or a killed DataLoader worker raise near the limit ends as a batch that
    does not fit: one line, exit code 2, as --max-batch reads it."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        f"import sys, torch; sys.path.insert(0, {str(ROOT)!r}); sys.argv[0] = 'train.py'\n"
        "import checks, train\n"
        "def failing(self, *args, **kwargs):\n"
        f"    raise RuntimeError({message!r})\n"
        "torch.optim.SGD.step = failing\n"
        "with checks.one_line_errors():\n"
        "    train.main()\n"
    )
    metrics = tmp_path / "m.json"
    result = run(probe, "--data", tiny_data, "--model", SMALL_MODEL, "--batch-size", 16, "--workers", 0,
                 "--steps", 3, "--warmup-steps", 1, "--metrics-out", metrics, "--no-progress")  # fmt: skip
    check_clean_failure(result, metrics, "out of memory, try a smaller --batch-size:", message.split(" when")[0])
