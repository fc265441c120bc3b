"""A model of the user's own (--model FILE.py:FACTORY or module:FACTORY), in every script and in the bench;
--memory-snapshot's checks on a machine without CUDA."""

import pickle
import sys
import textwrap

import pytest

from helpers import ROOT, SCRIPTS, check_clean_failure, fast_first, run, train

EXAMPLE = "examples/smallnet.py:build"

BAD = textwrap.dedent(
    """
    from torch import nn

    NOT_A_FUNCTION = 3


    def raises(num_classes):
        raise ValueError("width must be even, got 7")


    def no_module(num_classes):
        return "a string"


    def wrong_scores(num_classes):
        return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, num_classes + 1))


    def no_parameters(num_classes):
        return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())


    def too_big_a_kernel(num_classes):
        return nn.Sequential(nn.Conv2d(3, 8, 64), nn.Flatten(), nn.LazyLinear(num_classes))
    """
)


@pytest.fixture
def models(tmp_path):
    """A folder holding bad.py (factories that go wrong in every way) and broken.py (a file that does not import)."""
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "broken.py").write_text("def build(num_classes)\n    return None\n")
    return tmp_path


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
    in every script and path (tests/test_check_and_budget.py)."""
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


@pytest.mark.slow
def test_the_bench_runs_a_model_of_ones_own(tiny_data, tmp_path):
    out = tmp_path / "results"
    flags = ["--steps", 3, "--warmup-steps", 1, "--batch-size", 16, "--workers", 1, "--loaders", "none"]
    result = run("-m", "bench", "--data", tiny_data, "--out", out, "--model", EXAMPLE, "--variants", "baseline", *flags)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{EXAMPLE} on custom" in (out / "summary.md").read_text()


@pytest.mark.parametrize("spec", fast_first(["{dir}/nosuch.py:build", "{dir}/bad.py:wrong_scores"]))
def test_the_bench_refuses_a_bad_model_before_the_first_run(models, tiny_data, tmp_path, spec):
    out = tmp_path / "results"
    result = run("-m", "bench", "--data", tiny_data, "--out", out, "--model", spec.format(dir=models))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("bench: error: the model cannot be used: ") and "Traceback" not in result.stderr
    assert not (out / "runs.csv").exists()


def test_memory_snapshot_needs_cuda(script, tiny_data, tmp_path):
    metrics, snapshot = tmp_path / "m.json", tmp_path / "snapshot.pickle"
    env = {"CUDA_VISIBLE_DEVICES": ""}
    result, _ = train(script[0], tiny_data, metrics, *script[1:], "--memory-snapshot", snapshot, env=env)
    check_clean_failure(result, metrics, "--memory-snapshot records the CUDA allocator's history", "on the cpu")
    assert not snapshot.exists()


def test_memory_snapshot_path_is_checked_first(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train.py", tiny_data, metrics, "--memory-snapshot", tmp_path)
    check_clean_failure(result, metrics, f"cannot write the memory snapshot to {tmp_path}: it is a folder")


def test_memory_snapshot_is_written_whole_and_stops_the_recording(monkeypatch, tmp_path):
    """The CUDA calls stubbed: what is dumped is the allocator's snapshot, and recording stops after it."""
    sys.path.insert(0, str(ROOT))
    import torch

    import checks
    import meter

    calls = []
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", lambda: {"segments": [], "device_traces": [[1, 2]]})
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", lambda **kw: calls.append(kw))
    path = tmp_path / "snapshot.pickle"
    checks.write_whole(str(path), "the memory snapshot", pickle.dumps(meter.take_snapshot()))
    assert path.read_bytes() == pickle.dumps({"segments": [], "device_traces": [[1, 2]]})  # what was dumped, whole
    assert calls == [{"enabled": None}] and not (tmp_path / "snapshot.pickle.tmp").exists()
