"""bench/modes/saved.py: the modes on a results folder's saved runs. --save-baseline keeps every mode's tables (each
registration's outputs) beside the saved bench; --summarize and --save-baseline with nothing to read are one line."""

from helpers import bench_error, mode_outputs, run


def test_save_baseline_keeps_a_modes_tables_beside_the_saved_bench(tmp_path):
    """--save-baseline after --to-accuracy, --max-batch, --scaling, --parity or --tune-loader alone: their tables join
    the saved bench, whose summary, runs and machine stay as they were."""
    saved = tmp_path / "baselines"
    folder = saved / "cpu-x"
    folder.mkdir(parents=True)
    for name in "summary.csv", "runs.csv", "machine.json":
        (folder / name).write_text(f"the saved {name}\n")
    out = tmp_path / "results"
    out.mkdir()
    for name in mode_outputs():
        (out / name).write_text(f"new {name}\n")
    result = run("-m", "bench", "--out", out, "--save-baseline", "cpu-x", "--baseline-dir", saved)
    assert result.returncode == 0, result.stderr
    modes = ("parity", "max_batch", "to_accuracy", "scaling", "tune_loader")  # in the registry's order
    assert f"saved {', '.join(f'{out}/{mode}.*' for mode in modes)} as {folder}" in result.stdout
    for name in mode_outputs():
        assert (folder / name).read_text() == f"new {name}\n"
    for name in "summary.csv", "runs.csv", "machine.json":
        assert (folder / name).read_text() == f"the saved {name}\n"
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run("-m", "bench", "--out", empty, "--save-baseline", "cpu-x", "--baseline-dir", saved)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "(nor a table of --to-accuracy, --max-batch or --scaling) to save" in result.stderr


def test_summarize_without_runs_and_save_baseline_without_tables_are_one_line(tmp_path):
    assert bench_error("--summarize", "--out", tmp_path) == f"bench: error: no {tmp_path}/runs.csv: run the bench first"
    words = bench_error("--save-baseline", "--out", tmp_path, "--baseline-dir", tmp_path / "saved")
    assert words.startswith(
        f"bench: error: no {tmp_path}/summary.csv (nor a table of --to-accuracy, --max-batch or --scaling)"
    )
    assert not (tmp_path / "saved").exists() or not any((tmp_path / "saved").iterdir())  # nothing saved
