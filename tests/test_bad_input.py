"""Bad input ends with exit code 2, one line on stderr naming the problem, no traceback, nothing written.

The checks of the data and the flags are tried on every training script (train_ddp.py as one process,
without torchrun) and on the base with the DALI loader; the loaders' --bench on both loaders.
"""

import os
import shutil

import pytest

from helpers import SCRIPTS, check_clean_failure, fail, fast_first, run, train


@pytest.fixture
def data(tiny_data, tmp_path):
    """A private copy of the tiny data set, free to break."""
    return shutil.copytree(tiny_data, tmp_path / "data")


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
    from bench import OLDEST_TORCH

    assert checks.OLDEST_TORCH == OLDEST_TORCH == (2, 11)
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


@pytest.mark.parametrize("loader", fast_first(["loader.py", "loader_dali.py"]))
@pytest.mark.parametrize("problem", ["missing", "empty", "batch too large", "corrupt image"])
def test_loader_bench_on_bad_data(loader, problem, data, tmp_path):
    bad = data / "train" / "05_hstripes_cool" / "00003.jpg"
    args = ["--data", data, "--bench", "--batch-size", 16, "--steps", 8, "--workers", 1]
    if problem == "missing":
        args[1] = tmp_path / "nowhere"
    elif problem == "empty":
        args[1] = tmp_path / "empty"
        args[1].mkdir()
    elif problem == "batch too large":
        args[args.index("--batch-size") + 1] = 121
    else:
        bad.write_bytes(b"")
    metrics = tmp_path / "loader.json"
    result = run(loader, *args, "--metrics-out", metrics)
    check_clean_failure(result, metrics)
    expected = {"missing": "does not exist", "empty": "neither", "batch too large": "--batch-size 121"}
    assert expected.get(problem, str(bad)) in result.stderr


def test_amp_fp16_on_a_cpu(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train_amp.py", tiny_data, metrics, "--amp-dtype", "fp16", "--device", "cpu")
    check_clean_failure(result, metrics, "fp16", "CUDA")


def test_amp_unknown_dtype(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train_amp.py", tiny_data, metrics, "--amp-dtype", "fp8")
    check_clean_failure(result, metrics, "--amp-dtype", "fp8")


NO_THREADS = """import runpy, sys, threading
def start(self):
    raise RuntimeError("can't start new thread")  # what Python says when a thread's stack does not fit
threading.Thread.start = start
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


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
