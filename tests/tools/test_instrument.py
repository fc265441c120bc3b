"""tools/instrument.py: both copies timed by one hook over the same steps, bad input in one line."""

import json

import pytest

from helpers import ROOT, TINY_MODEL, run

TOOL = str(ROOT / "tools" / "instrument.py")


@pytest.mark.slow
def test_both_copies_are_timed_by_one_hook_over_the_same_steps(tmp_path):
    result = run(TOOL, "--device", "cpu", "--model", TINY_MODEL, "--data", "synthetic:32:10", "--batch-size", 16,
                 "--steps", 12, "--warmup-steps", 4, "--rounds", 1, "--out", tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads((tmp_path / "instrument.json").read_text())
    assert {k: len(v) for k, v in found["rates"].items()} == dict(bare=1, metered=1, own=1)
    assert all(rate > 0 for rates in found["rates"].values() for rate in rates)
    assert found["metered_vs_bare_pct"] == pytest.approx(
        100 * (found["medians"]["metered"] / found["medians"]["bare"] - 1)
    )
    log = (tmp_path / "instrument.log").read_text()
    assert log.count("--metrics-out") == 1  # the metered run alone writes the meter's record
    assert "without the meter, by the hook" in result.stdout and "its own window" in result.stdout


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--steps", 5, "--warmup-steps", 5], "--warmup-steps 5, --steps 5, --rounds 3: 1 <= warm-up < steps"),
        (["--rounds", 0], "--rounds 0: 1 <= warm-up < steps, and 1 round or more"),
        (["--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    ],
)
def test_bad_input_is_one_line(flags, said, tmp_path):
    result = run(TOOL, "--device", "cpu", *flags, "--out", tmp_path)
    assert result.returncode == 2 and said in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
