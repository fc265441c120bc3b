"""tools/fsdp_probe.py: each way trained from the same weights, bad input in one line."""

import json

import pytest

from helpers import ROOT, run

PROBE = str(ROOT / "tools" / "fsdp_probe.py")


@pytest.mark.slow
def test_the_fsdp_probe_trains_each_way_from_the_same_weights(tmp_path):
    """tools/fsdp_probe.py under torchrun (gloo on a CPU): FSDP2 trains here as the plain model does, so every way
    with SGD has the plain model's losses (as on the second GPU run: baseline/h200-second-run/fsdp-probe.json)."""
    result = run("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", 1, PROBE, "--steps", 3,
                 "--batch-size", 4, "--image-size", 16, "--out", tmp_path / "probe.json")  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads((tmp_path / "probe.json").read_text())
    plain = found["plain"]["losses"]
    assert len(plain) == 3 and found["plain"]["gradient norm"] > 0 and found["plain"]["weight change"] > 0
    for way in "fsdp", "fsdp, the root alone", "fsdp, foreach=False", "fsdp, no cudnn.benchmark":
        assert found[way]["losses"] == pytest.approx(plain, rel=1e-4) and found[way]["parameter type"] == "DTensor"
    assert found["fsdp, adamw"]["losses"] == pytest.approx(found["plain, adamw"]["losses"], rel=1e-4)


@pytest.mark.parametrize(
    "flags, env, said",
    [
        (["--steps", 0], {"RANK": "0"}, "--steps 0, --batch-size 32, --image-size 64: each 1 or more"),
        ([], {}, "run it under torchrun"),
        (["--steps", "x"], {}, "argument --steps: invalid int value: 'x'"),
    ],
)
def test_the_fsdp_probes_bad_input_is_one_line(flags, env, said):
    result = run(PROBE, *flags, env=env)
    assert result.returncode == 2 and said in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
