"""bench/stages/planning/prepare.py: bad data and a bad model found before the first run, every file checked
once a bench."""

import pytest

from helpers import fast_first, run


def test_bad_data_is_found_before_the_first_run(tiny_data, tmp_path):
    data = tmp_path / "data"
    (data / "train" / "a").mkdir(parents=True)
    result = run("-m", "bench", "--data", data, "--out", tmp_path / "out")
    assert result.returncode == 2 and "the data cannot be used" in result.stderr and "val" in result.stderr
    assert not (tmp_path / "out" / "runs.csv").exists()


@pytest.mark.slow
def test_every_file_is_checked_once_per_bench_not_per_run(tiny_data, tmp_path):
    """A run of the bench skips the check (--no-data-check) because the bench's own look at the folder did it:
    damage is found before the first run (test_bench.py), and a script alone still checks."""
    data, image = tmp_path / "data", next((tiny_data / "train").glob("*/*.jpg")).read_bytes()
    for split, count in ("train", 30), ("val", 2):
        for cls in "a", "b":
            (data / split / cls).mkdir(parents=True)
            for i in range(count):
                (data / split / cls / f"{i:02d}.jpg").write_bytes(image)
    (data / "train" / "a" / "01.jpg").write_bytes(b"\xff\xd8\xff\xe0 cut short")  # not among the sizes sampled
    checked = run("loader.py", "--data", data)
    assert checked.returncode == 2 and "01.jpg" in checked.stderr
    trusted = run("loader.py", "--data", data, "--no-data-check")
    assert trusted.returncode == 0, trusted.stderr
    result = run("-m", "bench", "--data", data, "--out", tmp_path / "out", "--dry-run")
    assert result.returncode == 2 and "the data cannot be used" in result.stderr and "01.jpg" in result.stderr


@pytest.mark.parametrize("spec", fast_first(["{dir}/nosuch.py:build", "{dir}/bad.py:wrong_scores"]))
def test_the_bench_refuses_a_bad_model_before_the_first_run(models, tiny_data, tmp_path, spec):
    out = tmp_path / "results"
    result = run("-m", "bench", "--data", tiny_data, "--out", out, "--model", spec.format(dir=models))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("bench: error: the model cannot be used: ") and "Traceback" not in result.stderr
    assert not (out / "runs.csv").exists()
