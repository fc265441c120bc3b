"""train_all.py: every technique at once, each block switched off by its flag and the row named."""

from helpers import fail, train


def test_train_all_switches_each_block_off_and_names_the_row(tiny_data, tmp_path):
    flags = ("--steps", 3, "--warmup-steps", 1, "--batch-size", 16, "--workers", 0)
    result, m = train("train_all.py", tiny_data, tmp_path / "m.json", *flags, "--no-compile", "--amp-dtype", "none")
    assert result.returncode == 0, result.stderr
    assert m["variant"] == "all:no-amp:no-compile" and m["amp_dtype"] is None and m["memory_format"] == "channels_last"
    assert m["compile_mode"] is None and m["compile_s"] is None and m["compile_cache_warm"] is None
    assert m["first_step_s"] > 0 and "  compile " not in result.stdout and "no native bf16" not in result.stderr
    result, m = train("train_all.py", tiny_data, tmp_path / "n.json", *flags, "--no-compile", "--no-channels-last")
    assert result.returncode == 0, result.stderr
    assert m["variant"] == "all:no-channels-last:no-compile" and m["memory_format"] == "contiguous"
    assert m["amp_dtype"] == "bf16"
    error = fail(("train_all.py",), tiny_data, tmp_path / "o.json", "--amp-dtype", "nil")
    assert "--amp-dtype" in error and "'nil'" in error and "none" in error  # the choices, the switch among them
