"""checks.py: bad input ends in one line and exit code 2 with nothing written, in every script: data, flags, numbers out
of range, outputs, bombs, damage, memory."""

import os
import re
import shutil
import sys

import pytest

from helpers import (
    LIMIT,
    ROOT,
    SCRIPTS,
    SMALL_MODEL,
    TIMED,
    TOO_BIG,
    bomb,
    check_clean_failure,
    fail,
    fast_first,
    run,
    train,
)

NO_THREADS = """import runpy, sys, threading
def start(self):
    raise RuntimeError("can't start new thread")  # what Python says when a thread's stack does not fit
threading.Thread.start = start
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


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


NUMBERS = [
    ("--lr", "nan", "finite number above 0"),
    ("--lr", "inf", "finite number above 0"),
    ("--lr", "0", "finite number above 0"),
    ("--lr", "-0.1", "finite number above 0"),
    ("--seed", "-1", "0 or more"),
    ("--seed", str(2**40), "below 2**31"),
    ("--workers", "100000", "at most 8 loading processes per core"),
    ("--epochs", "0", "1 or more"),
    ("--steps", "-5", "1 or more"),
    ("--warmup-steps", "-1", "0 or more"),
    ("--eval-samples", "-1", "0 or more"),
    ("--eval-samples", "abc", "invalid count_or_all value"),
    ("--batch-size", "0", "1 or more"),
    ("--data", "synthetic:0", "PX pixels 1 to 8192"),
    ("--data", "synthetic:100000", "PX pixels 1 to 8192"),
    ("--data", "synthetic:32:1", "N classes 2 to 100000"),
    ("--optimizer", "adam", "invalid choice: 'adam'"),
]


FAST = {0, 4, 6, 13}  # in make test-fast: --lr nan, --seed -1, --workers 100000, synthetic:0


COMPILED = ("compile", "all")  # the scripts that run torch.compile


def test_missing_data_folder(script, tmp_path):
    error = fail(script, tmp_path / "nowhere", tmp_path / "m.json")
    assert "nowhere" in error and "does not exist" in error


def test_folder_with_no_images(script, tmp_path):
    (tmp_path / "empty").mkdir()
    error = fail(script, tmp_path / "empty", tmp_path / "m.json")
    assert "empty" in error and "neither" in error


def test_class_folders_with_no_images(script, data, tmp_path):
    for image in (data / "train" / "03_rings_warm").iterdir():
        image.unlink()
    assert "03_rings_warm" in fail(script, data, tmp_path / "m.json")


def test_val_folder_missing(script, data, tmp_path):
    shutil.rmtree(data / "val")
    error = fail(script, data, tmp_path / "m.json")
    assert "val" in error and "missing" in error


def test_train_and_val_with_different_classes(script, data, tmp_path):
    (data / "val" / "09_dots_cool").rename(data / "val" / "10_other")
    error = fail(script, data, tmp_path / "m.json")
    assert "different classes" in error and "09_dots_cool" in error and "10_other" in error


@pytest.mark.parametrize("workers", fast_first([0, 2]))
def test_corrupt_image_is_named(data, tmp_path, workers):
    bad = data / "train" / "05_hstripes_cool" / "00003.jpg"
    bad.write_bytes(bad.read_bytes()[:200])  # truncated
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", data, metrics, "--epochs", 1, "--batch-size", 8, "--workers", workers)
    check_clean_failure(result, metrics, bad, "cannot read image")


def test_unknown_model(script, tiny_data, tmp_path):
    error = fail(script, tiny_data, tmp_path / "m.json", "--model", "resnet19")
    assert "resnet19" in error and "unknown model" in error


def test_cuda_asked_for_where_none_exists(script, tiny_data, tmp_path):
    error = fail(script, tiny_data, tmp_path / "m.json", "--device", "cuda", env={"CUDA_VISIBLE_DEVICES": ""})
    assert "--device cuda" in error and "no CUDA GPU" in error


def test_a_torch_older_than_the_oldest_tested_is_refused(monkeypatch, capsys, tmp_path):
    """torch 2.10 (made up: the version torch reports, and a dist-info importlib.metadata finds first) is refused by
    every script's first check (checks.check_arguments) and by the bench, in one line, before any work."""
    import checks
    import train
    from bench import oldest_torch

    pinned = re.search(r"^OLDEST := torch==(\d+)\.(\d+)\.", (ROOT / "Makefile").read_text(), re.M)
    assert checks.OLDEST_TORCH == oldest_torch() == tuple(map(int, pinned.groups()))  # the torch make test installs
    assert not checks.too_old("2.11.0") and not checks.too_old("2.14.1") and not checks.too_old("3.0")
    assert not checks.too_old("2.12.0.dev20260101+cpu") and checks.too_old("1.13.1")
    monkeypatch.setattr(checks.torch, "__version__", "2.10.1+cu128")
    with pytest.raises(SystemExit) as stop:
        checks.check_arguments(train.parser.parse_args(["--data", str(tmp_path)]))
    error = capsys.readouterr().err
    assert stop.value.code == 2 and error.count("\n") == 1
    assert error.endswith(": error: torch 2.10.1+cu128: these scripts need torch 2.11 or newer (the oldest tested)\n")
    meta = tmp_path / "old" / "torch-2.10.1.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.10.1\n")
    path = os.pathsep.join([str(tmp_path / "old"), *filter(None, [os.environ.get("PYTHONPATH")])])
    result = run("-m", "bench", "--dry-run", "--out", tmp_path / "results", env={"PYTHONPATH": path})
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr == "bench: error: torch 2.10.1: the scripts need torch 2.11 or newer (the oldest tested)\n"


def test_batch_larger_than_the_training_set(script, tiny_data, tmp_path):
    error = fail(script, tiny_data, tmp_path / "m.json", "--batch-size", 121)
    assert "--batch-size 121" in error and "120 images" in error


def test_metrics_path_that_cannot_be_written(script, tiny_data, tmp_path):
    metrics = tmp_path / "no" / "such" / "folder" / "m.json"
    error = fail(script, tiny_data, metrics)
    assert str(metrics) in error and "cannot write metrics" in error


def test_two_outputs_that_are_one_file(script, tiny_data, tmp_path):
    """--profile X --metrics-out X: the metrics would overwrite the trace, silently; refused before training."""
    metrics = tmp_path / "m.json"
    (tmp_path / "link").symlink_to(tmp_path)  # the same file by another name
    error = fail(script, tiny_data, metrics, "--profile", tmp_path / "link" / "m.json")
    assert error.endswith(f"--metrics-out and --profile name the same file, {tmp_path}/link/m.json: the one would"
                          " overwrite the other")  # fmt: skip
    assert not metrics.exists()


def test_tensorboard_folder_that_is_a_file(script, tiny_data, tmp_path):
    (tmp_path / "tb").write_text("mine")
    error = fail(script, tiny_data, tmp_path / "m.json", "--tensorboard", tmp_path / "tb")
    assert f"--tensorboard {tmp_path / 'tb'}: not a folder" in error
    assert (tmp_path / "tb").read_text() == "mine"


def test_unknown_loader(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", tiny_data, metrics, "--loader", "nosuch")
    check_clean_failure(result, metrics, "--loader nosuch")


def test_warmup_longer_than_the_run(script, tiny_data, tmp_path):
    assert "--warmup-steps 3" in fail(script, tiny_data, tmp_path / "m.json", "--steps", 3, "--warmup-steps", 3)


@pytest.mark.slow  # a memory limit: a process of its own
@pytest.mark.parametrize("name", ["train", "ddp"])  # the base's guard; and DDP's processes
def test_a_thread_that_cannot_start_is_out_of_memory(name, tiny_data, tmp_path):
    """Under a memory limit (--max-batch on a CPU) a loader's thread can fail to start before any tensor does:
    the same one line as any out-of-memory, so the search reads it as a batch that does not fit."""
    metrics = tmp_path / "m.json"
    script = SCRIPTS[name]
    flags = ["--data", tiny_data, "--metrics-out", metrics, "--steps", 2, "--warmup-steps", 1, "--workers", 1]
    result = run("-c", NO_THREADS, script[0], *script[1:], *flags, "--batch-size", 8, "--no-progress")
    check_clean_failure(result, metrics, "out of memory, try a smaller --batch-size: can't start new thread")


@pytest.mark.slow
def test_a_batch_that_does_not_fit(big_data, tmp_path):
    metrics = tmp_path / "m.json"
    cmd = ("train.py", "--data", big_data, *TOO_BIG, "--no-progress", "--metrics-out", metrics)
    result = run(*cmd, memory_limit=LIMIT)
    check_clean_failure(result, metrics, "out of memory", "try a smaller --batch-size")


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


def test_every_training_script_is_swept():
    assert {flags[0] for flags in SCRIPTS.values()} == {p.name for p in ROOT.glob("train*.py")}


@pytest.mark.parametrize(
    "flag,value,words",
    [case if i in FAST else pytest.param(*case, marks=pytest.mark.slow) for i, case in enumerate(NUMBERS)],
    ids=[f"{f}={v}" for f, v, _ in NUMBERS],
)
def test_numbers_out_of_range_in_the_base(tiny_data, tmp_path, flag, value, words):
    error = fail(SCRIPTS["train"], tiny_data, tmp_path / "m.json", flag, value)
    assert (f"{flag} {value}" in error or f"argument {flag}: invalid" in error) and words in error


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in SCRIPTS if name != "train"])
def test_numbers_out_of_range_in_every_variant(tiny_data, tmp_path, name):
    for flag, value, words in NUMBERS[0], NUMBERS[5], NUMBERS[6], NUMBERS[-1]:
        error = fail(SCRIPTS[name], tiny_data, tmp_path / "m.json", flag, value)
        assert (f"{flag} {value}" in error or f"argument {flag}: invalid" in error) and words in error


def test_metrics_path_that_is_a_folder(script, tiny_data, tmp_path):
    folder = tmp_path / "metrics"
    folder.mkdir()
    result, _ = train(script[0], tiny_data, folder, *script[1:], *TIMED)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"cannot write metrics to {folder}: it is a folder" in result.stderr
    assert list(folder.iterdir()) == [] and not folder.with_name("metrics.tmp").exists()


@pytest.mark.slow  # a limit on file size: a process of its own
@pytest.mark.parametrize("name", ["train", "dali"])  # the one writer (checks.write_whole), two loaders
def test_a_full_disk_at_the_end_of_training(name, tiny_data, tmp_path):
    """The metrics file outgrows what may be written: one line, no metrics and no .tmp left. The writer is the base's
    (every variant's unmarked lines are the base's: tests/bench/outputs/test_diffs.py)."""
    metrics = tmp_path / "m.json"
    error = fail(SCRIPTS[name], tiny_data, metrics, *TIMED, file_limit=300)
    assert f"cannot write metrics to {metrics}: File too large" in error
    assert list(tmp_path.iterdir()) == []


def test_the_compiled_scripts_write_their_metrics_as_the_base_does():
    """A limit on file size cannot reach their metrics: torch.compile writes files first (Inductor builds a probe
    program in every process). Their metrics are written by the meter, as the base's are: here, that they end
    with the base's meter.finish() and that the meter writes through the one writer the base's test above tried."""
    finish = "    meter.finish()  # the speed, the memory and the result: printed, and written to --metrics-out\n"
    assert finish in (ROOT / "train.py").read_text()
    for name in COMPILED:
        assert finish in (ROOT / SCRIPTS[name][0]).read_text()
    assert 'checks.write_whole(args.metrics_out, "metrics", ' in (ROOT / "meter.py").read_text()


def test_one_class_is_refused(script, data, tmp_path):
    for split in "train", "val":
        for folder in sorted((data / split).iterdir())[1:]:
            shutil.rmtree(folder)
    error = fail(script, data, tmp_path / "m.json")
    assert "has 1 class folder(s): a classifier needs 2 or more" in error


def test_the_size_is_read_from_the_header():
    import checks

    png = b"\x89PNG\r\n\x1a\n" + b"\0\0\0\rIHDR" + (30000).to_bytes(4, "big") + (20000).to_bytes(4, "big")
    assert checks.header_pixels(png + b"\0" * 8) == 30000 * 20000
    assert checks.header_pixels(b"not an image") is None


@pytest.mark.parametrize("exif", [0, 6000], ids=["size in the first 4 KiB", "size after 6 KB of metadata"])
def test_a_bomb_does_not_look_whole(data, exif):
    import checks

    path = sorted((data / "train" / "05_hstripes_cool").iterdir())[3]
    sound = bomb(path, side=16, exif=exif)
    assert checks.looks_whole(str(sound))
    assert not checks.looks_whole(str(bomb(path, exif=0)))


@pytest.mark.parametrize("loader", fast_first(["torchvision", "dali"]))
def test_damage_in_a_file_the_run_never_reads_is_named_first(data, tmp_path, loader):
    """Only the first validation image is evaluated (--eval-samples 1): the truncated last one is still named."""
    last = sorted((data / "val" / "09_dots_cool").iterdir())[-1]
    last.write_bytes(last.read_bytes()[:100])
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", data, metrics, "--loader", loader, *TIMED, "--eval-samples", 1)
    check_clean_failure(result, metrics, f"cannot read image {last}")


@pytest.mark.parametrize("spec", fast_first(["synthetic:0", "synthetic:32:1", "synthetic:big", "synthetic:32:10:3"]))
def test_synthetic_spec_that_makes_no_sense(tmp_path, spec):
    result, _ = train("train.py", spec, tmp_path / "m.json", "--steps", 3)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert spec in result.stderr and "synthetic[:PX[:N]]" in result.stderr


def test_near_the_address_space_limit_out_of_memory_needs_no_import(monkeypatch):
    """oneDNN's "could not create a primitive" under an address-space limit is out of memory; near that limit a module
    imported then cannot be mapped (seen in CI: a --max-batch run at the largest batch ended in an ImportError from
    `import resource` instead of the one line), so the limit is read with what checks.py imported at its start."""
    import checks

    monkeypatch.setitem(sys.modules, "resource", None)  # importing it now fails, as it did at the limit
    monkeypatch.setattr(checks.resource, "getrlimit", lambda which: (4500 << 20, 4500 << 20))
    assert checks.is_out_of_memory("could not create a primitive")
    monkeypatch.setattr(checks.resource, "getrlimit", lambda which: (checks.resource.RLIM_INFINITY,) * 2)
    assert not checks.is_out_of_memory("could not create a primitive")
