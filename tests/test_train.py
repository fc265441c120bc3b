"""train.py, the base: it trains, writes its metrics, learns, evaluates a fixed sample, runs a model of one's own and
says what it did."""

import importlib
import math
import sys
import textwrap

import pytest
import tqdm

import helpers
from bench import schema
from bench.observe.machine import cpu_model
from helpers import (
    EXAMPLE,
    LOADERS,
    ROOT,
    SCRIPTS,
    SMALL_MODEL,
    TINY_MODEL,
    VIT,
    check_clean_failure,
    fail,
    fast_first,
    generate,
    run,
    train,
)

TRAIN_SCRIPTS = sorted({args[0] for args in SCRIPTS.values()})


@pytest.fixture(scope="session")
def many_val(tmp_path_factory):
    """More validation images (1,100) than a short run evaluates."""
    return generate(tmp_path_factory.mktemp("data") / "many", train=4, val=110, size=16)


@pytest.mark.parametrize("script", TRAIN_SCRIPTS + list(LOADERS))
def test_help_shows_the_defaults(script):
    result = run(script, "--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())  # argparse wraps lines
    assert "(default: 0)" in text  # --seed
    if script.startswith("train"):
        assert "(default: 128)" in text and "(default: resnet18)" in text and "(default: 2)" in text


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


@pytest.mark.parametrize(
    "spec,words",
    fast_first(
        [
            ("{dir}/bad.py:raises", ["factory(10) raised ValueError: width must be even, got 7"]),
            ("{dir}/nosuch.py:build", ["no file {dir}/nosuch.py"]),
            ("nosuchpackage.nets:build", ["importing nosuchpackage.nets failed", "No module named 'nosuchpackage'"]),
            ("{dir}/broken.py:build", ["importing {dir}/broken.py failed: SyntaxError"]),
            ("{dir}/bad.py:build", ["{dir}/bad.py has no 'build'"]),
            ("{dir}/bad.py:NOT_A_FUNCTION", ["NOT_A_FUNCTION in {dir}/bad.py is not callable: a int"]),
            ("{dir}/bad.py:no_module", ["returned a str, not a torch.nn.Module"]),
            ("{dir}/bad.py:wrong_scores", ["returns (2, 11) for 2 images", "not one score per class (2, 10)"]),
            ("{dir}/bad.py:no_parameters", ["has no parameters to train"]),
            ("{dir}/bad.py:too_big_a_kernel", ["cannot take 16 px images: RuntimeError"]),
        ]
    ),
)
def test_a_bad_model_of_ones_own_is_one_line(models, tiny_data, tmp_path, spec, words):
    spec = spec.format(dir=models)
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", tiny_data, metrics, "--model", spec, "--steps", 3, "--warmup-steps", 1)
    check_clean_failure(result, metrics, *(w.format(dir=models) for w in words))


def test_every_script_says_what_the_factory_raised(script, models, tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train(script[0], tiny_data, metrics, *script[1:], "--model", f"{models}/bad.py:raises")
    check_clean_failure(result, metrics, "factory(10) raised ValueError: width must be even, got 7")


@pytest.mark.parametrize("script", [SCRIPTS["train"], pytest.param(SCRIPTS["checkpoint"], marks=pytest.mark.slow)])
def test_a_script_trains_the_example_model(script, tiny_data, tmp_path):
    """The base, and checkpointing, which finds the model's stages; python -m bench --check trains the example model
    in every script and path (tests/e2e/test_check_run.py)."""
    result, m = train(
        script[0], tiny_data, tmp_path / "m.json", *script[1:], "--model", EXAMPLE, "--steps", 4, "--warmup-steps", 1
    )
    assert result.returncode == 0, result.stderr
    assert m["model"] == EXAMPLE and m["steps_timed"] == 4 - 1 and m["diverged_step"] is None
    if script[0] == "train_checkpoint.py":  # layer1..layer3, found by stages()
        assert m["checkpoint_segments"] == 3


def test_a_module_is_found_from_the_current_folder(tiny_data, tmp_path):
    """module:FACTORY imports from where the user stands, and the model is used as given: no stem surgery on its
    stride-2 first conv and max-pool, which a torchvision model would lose on 16 px images."""
    (tmp_path / "mynets.py").write_text(
        textwrap.dedent(
            """
            from torch import nn


            class Strided(nn.Sequential):
                def forward(self, x):
                    assert self[0].stride == (2, 2) and isinstance(self[1], nn.MaxPool2d), "the stem was changed"
                    return super().forward(x)


            def build(num_classes):
                layers = [nn.Conv2d(3, 8, 7, 2, 3), nn.MaxPool2d(3, 2, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
                return Strided(*layers, nn.Linear(8, num_classes))
            """
        )
    )
    metrics = tmp_path / "m.json"
    cmd = [ROOT / "train.py", "--data", tiny_data, "--model", "mynets:build", "--steps", 3, "--warmup-steps", 1]
    result = run(*cmd, "--batch-size", 16, "--workers", 0, "--no-progress", "--metrics-out", metrics, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "mynets:build on generated (16 px)" in result.stdout


@pytest.mark.torches
def test_train_writes_metrics(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, m = train("train.py", tiny_data, metrics, "--steps", 6, "--warmup-steps", 2, "--batch-size", 16)
    assert result.returncode == 0, result.stderr
    assert set(m) == schema.written_by("train.py"), set(m) ^ schema.written_by("train.py")
    assert m["script"] == "train.py" and m["variant"] == "baseline" and m["world_size"] == 1
    assert m["model"] == SMALL_MODEL and m["dataset"] == "generated" and m["image_size"] == 16
    assert m["batch_size"] == m["global_batch_size"] == 16 and m["steps_timed"] == 4
    assert m["device"] == "cpu" and m["peak_mem_allocated_mib"] is None and m["amp_dtype"] is None
    assert m["samples_per_s"] > 0 and m["compute_samples_per_s"] >= m["samples_per_s"]
    assert 0 <= m["data_wait_frac"] < 1
    assert 0 < m["step_time_median_ms"] <= m["step_time_p90_ms"]
    assert math.isfinite(m["train_loss_final"]) and m["train_loss_final"] > 0
    assert 0 <= m["val_acc"] <= 1
    assert m["val_samples"] == 40  # the whole validation set, once
    assert m["argv"][0].endswith("train.py")
    assert not list(tmp_path.glob("*.tmp")), "temporary metrics file left behind"
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("train.py: "))  # the summary: a heading, then
    names = ["setup", "speed", "timed", "data", "result", "memory", "cores"]  # cores: a CPU's
    assert [line.split()[0] for line in lines[at + 1 : at + 8]] == names
    assert [line for line in lines if "samples/s" in line] == [lines[at + 2]]
    assert f"first step {m['first_step_s']:.2f} s" in lines[at + 2] and m["first_step_s"] > 0
    assert "on 40 of 40 validation images" in lines[at + 5]


@pytest.mark.torches
def test_epochs_cover_the_training_set(tiny_data, tmp_path):
    # 120 training images, batch 16, last partial batch dropped: 7 steps an epoch
    result, m = train("train.py", tiny_data, tmp_path / "m.json", "--epochs", 2, "--batch-size", 16)
    assert result.returncode == 0, result.stderr
    assert m["steps_timed"] == 2 * 7 - 5  # default --warmup-steps 5
    assert [line.split(":")[0] for line in result.stdout.splitlines() if line.startswith("epoch")] == [
        "epoch 1/2",
        "epoch 2/2",
    ]


@pytest.mark.slow
def test_baseline_learns(baseline_small):
    """Far above chance (0.1) on the generated data: the data, the loop and evaluation all work."""
    assert baseline_small["val_acc"] >= 0.4  # LEARN's tiny model: 0.885 here
    assert baseline_small["val_samples"] == 200


@pytest.mark.slow
def test_same_seed_same_result(tiny_data, tmp_path):
    args = ("--steps", 4, "--warmup-steps", 1, "--batch-size", 16, "--workers", 0)
    _, a = train("train.py", tiny_data, tmp_path / "a.json", *args)
    _, b = train("train.py", tiny_data, tmp_path / "b.json", *args)
    assert a["train_loss_final"] == b["train_loss_final"] and a["val_acc"] == b["val_acc"]


def test_a_bad_optimizer_is_one_line(tiny_data, tmp_path):
    result, _ = train("train.py", tiny_data, tmp_path / "m.json", "--optimizer", "adam")
    check_clean_failure(result, tmp_path / "m.json")
    assert "--optimizer: invalid choice: 'adam'" in result.stderr


@pytest.mark.slow
def test_the_small_vit_learns_with_adamw(small_data, tmp_path):
    result, m = train("train.py", small_data, tmp_path / "m.json", "--model", VIT, "--optimizer", "adamw",
                      "--steps", "20", "--batch-size", "32", "--eval-samples", "all")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert m["val_acc"] > 0.4, m["val_curve"]  # chance: 0.1; 0.70-0.75 at seeds 0, 1, 2 here (0.80 at seed 0 after 40)
    assert m["flop_per_step"] > 1e9 and m["optimizer"] == "adamw"
