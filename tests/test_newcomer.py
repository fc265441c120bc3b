"""What a new user meets first: --help with its defaults, a short run that does not spend its time evaluating
every validation image, the CPU named by its model, and where the DDP script's sampler comes from."""

import pytest
from test_bad_input import fail

from bench.machine import cpu_model
from helpers import LOADERS, ROOT, SCRIPTS, generate, run, train

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


@pytest.mark.parametrize("value", ["abc", "0", "-3"])
def test_eval_samples_that_is_neither_a_count_nor_all_is_one_line(value, tiny_data, tmp_path):
    assert "--eval-samples" in fail(("train.py",), tiny_data, tmp_path / "m.json", "--eval-samples", value)


def test_a_cpu_run_names_the_cpu_model(tiny_data, tmp_path):
    result, m = train("train.py", tiny_data, tmp_path / "m.json", "--steps", 2, "--warmup-steps", 1)
    assert result.returncode == 0, result.stderr
    assert m["device"] == "cpu" and m["device_name"] == cpu_model() and m["device_name"] not in ("x86_64", "")


def test_the_ddp_script_says_where_its_sampler_comes_from():
    """make diff V=ddp does not show the DistributedSampler (loader.py builds it for every script): the docstring
    must say so, naming it and the call that builds it, which loader.py must really hold."""
    doc = (ROOT / "train_ddp.py").read_text().split('"""')[1]
    assert "DistributedSampler(train_set, world_size, rank, seed=seed, drop_last=True)" in " ".join(doc.split())
    assert (
        "DistributedSampler(train_set, world_size, rank, seed=seed, drop_last=True)" in (ROOT / "loader.py").read_text()
    )
    assert "set_epoch" in doc and "loader.py" in doc
