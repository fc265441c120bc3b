"""train_checkpoint.py: the stages checkpointed, their forward run again in backward, a model without stages refused."""

import importlib
import sys

import pytest
import torch

from helpers import ROOT, SMALL_MODEL, TECHNIQUE_TIMED, check_clean_failure, train


@pytest.fixture(scope="session")
def checkpointing():
    sys.path.insert(0, str(ROOT))
    return importlib.import_module("train_checkpoint")


@pytest.mark.parametrize(
    "model,expected",
    [
        ("resnet18", ["layer1", "layer2", "layer3", "layer4"]),
        ("shufflenet_v2_x0_5", ["stage2", "stage3", "stage4"]),
        ("mobilenet_v2", [f"features.{i}" for i in range(19)]),
        ("vit_b_16", [f"encoder.layers.encoder_layer_{i}" for i in range(12)]),
        ("vgg11", []),
    ],
)
def test_the_stages_checkpointed(checkpointing, model, expected):
    import torchvision

    assert checkpointing.stages(torchvision.models.get_model(model, num_classes=10)) == expected


def test_a_checkpointed_stage_runs_forward_again_in_backward(checkpointing):
    import torchvision

    model = torchvision.models.get_model(SMALL_MODEL, num_classes=10)
    calls, conv = [], model.stage3[0].branch2[0]  # a layer inside the stage, its forward counted
    forward = conv.forward
    conv.forward = lambda x: calls.append(1) or forward(x)
    model.stage3 = checkpointing.Checkpointed(model.stage3)
    model(torch.randn(2, 3, 64, 64)).sum().backward()
    assert len(calls) == 2  # forward, then again in backward
    calls.clear()
    with torch.no_grad():
        model.eval()(torch.randn(2, 3, 64, 64))
    assert len(calls) == 1


@pytest.mark.torches
def test_checkpoint_records_its_segments(tiny_data, tmp_path):
    result, m = train("train_checkpoint.py", tiny_data, tmp_path / "m.json", *TECHNIQUE_TIMED)
    assert result.returncode == 0, result.stderr
    assert m["variant"] == "checkpoint" and m["checkpoint_segments"] == 3


@pytest.mark.slow
def test_a_model_without_stages_is_refused(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train_checkpoint.py", tiny_data, metrics, "--model", "alexnet", *TECHNIQUE_TIMED)
    check_clean_failure(result, metrics, "alexnet has no stages of blocks to checkpoint")
