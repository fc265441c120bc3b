"""Fixtures: tiny generated data sets, and the baseline's result that the variants are compared with.
The helpers the tests share are in helpers.py."""

import pytest

from helpers import LEARN, generate, train


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
