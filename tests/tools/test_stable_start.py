"""tools/stable_start.py: torchvision's initialisation against the scripts' on the same seed, data and schedule."""

import json

import pytest
import torch

from helpers import run


@pytest.mark.slow
def test_it_runs_both_initialisations_on_the_same_steps(tiny_data, tmp_path):
    out = tmp_path / "steps.json"
    args = ("--data", tiny_data, "--model", "resnet18", "--batch-size", 8, "--steps", 3, "--workers", 0)
    result = run("tools/stable_start.py", *args, "--out", out)
    assert result.returncode == 0, result.stderr
    found = json.loads(out.read_text())
    assert found["lr"] == 0.1 * 8 / 256
    assert set(found["steps_seen"]) == {"torchvision's", "the scripts'"}
    for steps in found["steps_seen"].values():
        assert len(steps) == 3 and all(loss > 0 and logit >= 0 for loss, logit in steps)
    # the same seed and data: the first step's logits differ only by the residual branches' start
    assert found["steps_seen"]["torchvision's"][0] != found["steps_seen"]["the scripts'"][0]
    assert "largest logit" in result.stdout


def test_the_scripts_start_a_resnets_residual_branches_at_zero():
    import train

    model = train.build_model("resnet18", 10, 224)
    last = [block.bn2.weight for block in model.modules() if type(block).__name__ == "BasicBlock"]
    assert last and all(torch.equal(w, torch.zeros_like(w)) for w in last)
    other = train.build_model("shufflenet_v2_x0_5", 10, 224)  # no residual block of torchvision's ResNets: untouched
    assert all(m.weight.abs().sum() > 0 for m in other.modules() if isinstance(m, torch.nn.BatchNorm2d))
