"""Fixtures: tiny generated data sets, and the baseline's result that the variants are compared with.
The helpers the tests share are in helpers.py."""

import os
import tempfile

import pytest

from bench.stages import plan
from helpers import LEARN, SCRIPTS, generate, train

# one compile cache for every test that compiles (torch.compile's kernels, kept between runs of the same model):
# the first compile of a configuration is cold (a minute or two on 2 cores), the next ones take seconds
os.environ.setdefault(
    "TORCHINDUCTOR_CACHE_DIR", os.path.join(tempfile.gettempdir(), f"tests-compile-cache-{os.getuid()}")
)


def pytest_configure(config):
    """make test's second pass names the torch it tests (TESTS_TORCH): a PYTHONPATH that did not take is no pass."""
    import torch

    expected = os.environ.get("TESTS_TORCH")
    if expected and torch.__version__.split("+")[0] != expected:
        raise pytest.UsageError(f"TESTS_TORCH={expected}, but the torch imported here is {torch.__version__}")


def pytest_report_header(config):
    import torch
    import torchvision

    return f"torch {torch.__version__}, torchvision {torchvision.__version__}: {os.path.dirname(torch.__file__)}"


@pytest.fixture
def script():
    """(script, its flags) of the base, train.py: where a behaviour is the base's shared code (the checks module,
    the loader, the meter, every unmarked line: tests/test_diffs.py proves the variants' unmarked lines are the
    base's), it is tried on the base alone; tests/test_variants.py tries a few cases on every variant."""
    return SCRIPTS["train"]


@pytest.fixture(params=[name if name == "train" else pytest.param(name, marks=pytest.mark.slow) for name in SCRIPTS])
def every_script(request):
    """(script, its flags): every way of training, one after another (the base alone in make test-fast)."""
    return SCRIPTS[request.param]


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """10 classes x (12 train + 4 val) images of 16 px: enough to run every code path quickly."""
    return generate(tmp_path_factory.mktemp("data") / "tiny")


@pytest.fixture(scope="session")
def small_data(tmp_path_factory):
    """10 classes x (100 train + 20 val) images of 32 px: enough for a model to learn."""
    return generate(tmp_path_factory.mktemp("data") / "small", train=100, val=20, size=32)


@pytest.fixture(scope="session")
def baseline_small(small_data, tmp_path_factory):
    """The baseline's metrics after LEARN on small_data: what every variant is compared with."""
    result, metrics = train("train.py", small_data, tmp_path_factory.mktemp("baseline") / "m.json", *LEARN)
    assert result.returncode == 0, result.stderr
    return metrics


@pytest.fixture
def described(monkeypatch):
    """The plan without a look at the data folder (a subprocess): the generated workload's shape."""
    monkeypatch.setattr(plan, "describe", lambda path, workload: dict(image_size=32, classes=list(range(10))))
