"""What a new user meets first: a warning before the install when the disk is nearly full, --help with its
defaults, a short run that does not spend its time evaluating every validation image, a progress bar that ends with
training, the CPU named by its model, where the DDP script's sampler comes from, data generation that shows its
progress, and train_all.py's blocks switched off one by one (a combination the bench runs as a row of its own)."""

import importlib
import os
import subprocess
import sys

import pytest
import tqdm

import helpers
from bench import catalogue
from bench.observe.machine import cpu_model
from bench.outputs import diffs
from bench.stages import plan
from helpers import LOADERS, ROOT, SCRIPTS, TINY_MODEL, fail, fast_first, generate, run, train

TRAIN_SCRIPTS = sorted({args[0] for args in SCRIPTS.values()})


@pytest.mark.parametrize("script", TRAIN_SCRIPTS + list(LOADERS))
def test_help_shows_the_defaults(script):
    result = run(script, "--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())  # argparse wraps lines
    assert "(default: 0)" in text  # --seed
    if script.startswith("train"):
        assert "(default: 128)" in text and "(default: resnet18)" in text and "(default: 2)" in text


@pytest.fixture(scope="module")
def many_val(tmp_path_factory):
    """More validation images (1,100) than a short run evaluates."""
    return generate(tmp_path_factory.mktemp("data") / "many", train=4, val=110, size=16)


@pytest.mark.slow
def test_a_short_run_evaluates_a_fixed_sample_and_says_so(many_val, tmp_path):
    short = ("--steps", 2, "--warmup-steps", 1, "--batch-size", 8, "--workers", 0)
    result, m = train("train.py", many_val, tmp_path / "a.json", *short)
    assert result.returncode == 0, result.stderr
    assert m["val_samples"] == 1000
    assert "on 1000 of 1100 validation images" in result.stdout and "--eval-samples all" in result.stdout
    result, m = train("train.py", many_val, tmp_path / "b.json", *short, "--eval-samples", "all")
    assert result.returncode == 0, result.stderr
    assert m["val_samples"] == 1100 and "--eval-samples all for every image" not in result.stdout
    result, m = train("train.py", many_val, tmp_path / "c.json", *short, "--eval-samples", 300)
    assert result.returncode == 0, result.stderr
    assert m["val_samples"] == 300


@pytest.mark.parametrize("loader", fast_first(["torchvision", "dali"]))
def test_eval_samples_0_is_a_speed_run_with_no_evaluation(tiny_data, tmp_path, loader):
    """--eval-samples 0 (the bench's rounds after the first): no image evaluated, no accuracy recorded or printed,
    and no loading process started for it (the validation loader is an empty list)."""
    short = ("--steps", 4, "--warmup-steps", 1, "--batch-size", 8, "--loader", loader, "--eval-samples", 0)
    result, m = train("train.py", tiny_data, tmp_path / "m.json", *short)
    assert result.returncode == 0, result.stderr
    assert m["val_samples"] == 0 and m["val_acc"] is None and m["val_curve"][0]["val_acc"] is None
    assert "result  loss" in result.stdout and "no evaluation (--eval-samples 0)" in result.stdout
    assert "val acc" not in result.stdout


def test_an_empty_validation_loader_starts_no_loading_process(tiny_data):
    import loader

    train_loader, val_loader, _ = helpers.build_loaders(loader, tiny_data, 8, workers=2, eval_samples=0)
    assert val_loader == [] and len(train_loader) > 0
    _, val_loader, _ = helpers.build_loaders(loader, tiny_data, 8, workers=2, world_size=2, rank=1, eval_samples=0)
    assert val_loader == []  # two processes and nothing to evaluate: no process needs an image


@pytest.mark.parametrize("value", ["abc", "-1", "-3"])
def test_eval_samples_that_is_neither_a_count_nor_all_is_one_line(value, tiny_data, tmp_path):
    assert "--eval-samples" in fail(("train.py",), tiny_data, tmp_path / "m.json", "--eval-samples", value)


def test_a_cpu_run_names_the_cpu_model(tiny_data, tmp_path):
    result, m = train("train.py", tiny_data, tmp_path / "m.json", "--steps", 2, "--warmup-steps", 1)
    assert result.returncode == 0, result.stderr
    assert m["device"] == "cpu" and m["device_name"] == cpu_model() and m["device_name"] not in ("x86_64", "")


@pytest.mark.parametrize("free_gb,warned", [(2, True), (40, False)])
def test_the_install_warns_before_it_starts_on_a_nearly_full_disk(free_gb, warned, tmp_path):
    """make's first step (.venv from requirements.txt) takes about 7 GB (6.8 at its peak here): with under 8 GB free,
    one line says so before pip starts (CI once stopped on "No space left on device" with no word before it). df is a
    stand-in that reports free_gb; python3 a stand-in that fails, so nothing is installed."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "df").write_text(
        f"#!/bin/sh\necho 'Filesystem 1024-blocks Used Available'\necho '/dev/x 1 1 {free_gb << 20}'\n"
    )
    (fake / "python3").write_text("#!/bin/sh\nexit 1\n")
    for tool in fake.iterdir():
        tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    venv = tmp_path / "venv"
    result = subprocess.run(["make", "-s", f"VENV={venv}", f"{venv}/.installed"], cwd=ROOT, capture_output=True,
                            text=True, env=env)  # fmt: skip
    assert result.returncode != 0 and not (venv / ".installed").exists()  # the stand-in python3 failed
    said = f"make: warning: {free_gb} GB free on this disk; the install may stop with 'No space left on device'"
    assert (said in result.stderr) == warned, result.stderr


def test_the_ddp_diff_shows_its_sampler_and_its_share_of_the_batch():
    """make diff V=ddp shows the whole technique: the DistributedSampler that fills the base's empty sampler, its
    set_epoch, and each process's share of the batch, each line marked."""
    result = subprocess.run(["make", "-s", "diff", "V=ddp"], cwd=ROOT, capture_output=True, text=True)
    added = [line[1:].strip() for line in result.stdout.splitlines() if line.startswith("+")]
    assert "sampler = DistributedSampler(train_set, world_size, rank, seed=args.seed, drop_last=True)" in added
    assert (
        "sampler.set_epoch(epoch)  # new #" in added and "batch_size = args.batch_size // world_size  # new #" in added
    )
    base = (ROOT / "train.py").read_text()
    assert "    sampler = None  # " in base and "sampler, rank, world_size" in base  # the seam it fills


# ----------------------------------------------------------------------------- combinations of train_all.py's blocks


def test_the_bench_runs_a_combination_as_a_row_of_its_own():
    """all:SWITCH[:SWITCH...] is train_all.py with those blocks off: no torchrun for no-ddp, a flag for each other;
    it is compiled (its own cache), distributed and slowed by emulated bf16 only where its blocks say so."""
    assert catalogue.command("all:no-ddp:no-compile") == ["train_all.py", "--no-compile"]
    assert catalogue.command("all:no-amp") == [*catalogue.TORCHRUN, "train_all.py", "--amp-dtype", "none"]
    assert catalogue.command("all:no-channels-last") == [*catalogue.TORCHRUN, "train_all.py", "--no-channels-last"]
    assert catalogue.command("all") == catalogue.TRAIN["all"] and catalogue.combination("amp") == ()
    yes_no_yes_no = [True, False, True, False]
    assert [catalogue.distributed(v) for v in ("all", "all:no-ddp", "all:no-compile", "amp")] == yes_no_yes_no
    assert [catalogue.compiled(v) for v in ("all", "all:no-compile", "all:no-ddp", "baseline")] == yes_no_yes_no
    assert [catalogue.uses_amp(v) for v in ("all", "all:no-amp", "all:no-ddp", "compile")] == yes_no_yes_no
    asked = ["ddp", "all:no-ddp:no-compile", "baseline", "all", "all:no-compile"]
    assert plan.ordered(asked, 0) == ["baseline", "all", "all:no-ddp:no-compile", "all:no-compile", "ddp"]
    run = plan.training_run("all:no-ddp:no-compile", 1, "data", dict(image_size=32, classes=range(10)),
                            plan.Work("m", 64, 30, 5, 10), 0, 2, 1, 2,
                            "small", cache="/tmp/c")  # fmt: skip
    assert run.processes == 1 and run.cmd[1:3] == ["train_all.py", "--no-compile"]
    assert "TORCHINDUCTOR_CACHE_DIR" not in run.env and run.env["OMP_NUM_THREADS"] == "2"
    assert diffs.technique("all:no-compile") == "all"


def test_train_all_switches_each_block_off_and_names_the_row(tiny_data, tmp_path):
    flags = ("--steps", 3, "--warmup-steps", 1, "--batch-size", 16, "--workers", 0)
    result, m = train("train_all.py", tiny_data, tmp_path / "m.json", *flags, "--no-compile", "--amp-dtype", "none")
    assert result.returncode == 0, result.stderr
    assert m["variant"] == "all:no-amp:no-compile" and m["amp_dtype"] is None and m["memory_format"] == "channels_last"
    assert m["compile_mode"] is None and m["compile_s"] is None and m["compile_cache_warm"] is None
    assert m["first_step_s"] > 0 and "  compile " not in result.stdout and "no native bf16" not in result.stderr
    result, m = train("train_all.py", tiny_data, tmp_path / "n.json", *flags, "--no-compile", "--no-channels-last")
    assert result.returncode == 0, result.stderr
    assert m["variant"] == "all:no-channels-last:no-compile" and m["memory_format"] == "contiguous"
    assert m["amp_dtype"] == "bf16"
    error = fail(("train_all.py",), tiny_data, tmp_path / "o.json", "--amp-dtype", "nil")
    assert "--amp-dtype" in error and "'nil'" in error and "none" in error  # the choices, the switch among them


def test_generating_data_shows_its_progress(tmp_path):
    """make data WORKLOAD=imagenet takes minutes: a progress bar says how far it is."""
    result = run("-m", "bench.data", tmp_path / "d", "--train", 3, "--val", 1, "--size", 16)
    assert result.returncode == 0, result.stderr
    assert "generating d" in result.stderr and "40/40" in result.stderr and "img" in result.stderr


@pytest.mark.parametrize("script", fast_first(["train.py", "train_compile.py"]))
def test_the_progress_bar_closes_before_the_last_evaluation(script, monkeypatch, tiny_data):
    """The bar counts training steps: it is closed when they are done, not left open while evaluation runs."""
    module = importlib.import_module(script.removesuffix(".py"))
    events = []

    class Bar(tqdm.tqdm):
        def close(self):
            events.append("close")
            super().close()

    def evaluate(*args):
        events.append("evaluate")
        return evaluated(*args)

    evaluated = module.evaluate
    monkeypatch.setattr(importlib.import_module("meter"), "tqdm", Bar)
    monkeypatch.setattr(module, "evaluate", evaluate)
    small = TINY_MODEL  # a tiny graph: compiled in seconds
    argv = [script, "--data", str(tiny_data), "--model", small, "--batch-size", "16", "--epochs", "2"]
    monkeypatch.setattr(sys, "argv", [*argv, "--warmup-steps", "1", "--workers", "0"])
    module.main()
    assert events[:3] == ["evaluate", "close", "evaluate"]  # epoch 1 evaluates with the bar open; then it closes
