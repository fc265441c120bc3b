"""train_dp.py: on a CPU a passthrough that says so."""

import pytest

from helpers import summary_line, train


@pytest.mark.torches
def test_dp_on_a_cpu_is_a_passthrough_and_says_so(tiny_data, tmp_path):
    result, m = train("train_dp.py", tiny_data, tmp_path / "m.json", "--steps", 4, "--warmup-steps", 1)
    assert result.returncode == 0, result.stderr
    assert m["variant"] == "dp" and m["dp_devices"] == 0 and m["world_size"] == 1 and m["val_samples"] == 40
    setup = summary_line(result, "setup")
    assert "DataParallel with one device: a passthrough" in setup and "1 worker;" in setup
