"""The README's results are the bench's: every block between result markers is what `python -m bench --readme`
writes from the saved runs of the folder it names, and no finding is stated outside the blocks."""

import re
import shutil

import pytest

from bench import BenchError, readme, runner, tables
from helpers import ROOT

TEXT = (ROOT / "README.md").read_text()


def test_the_readme_shows_saved_benches():
    shown = readme.folders(TEXT)
    assert "baseline/cpu-2core-amd-epyc-avx2" in shown and all((ROOT / f / "runs.csv").exists() for f in shown)


@pytest.mark.parametrize("folder", readme.folders(TEXT))
def test_each_result_block_is_what_the_bench_writes_from_its_runs(folder, tmp_path):
    """Summarized again here from the shipped runs.csv by the current rules: the README's block must match."""
    for name in "runs.csv", "machine.json", "rounds.txt":
        if (ROOT / folder / name).exists():
            shutil.copy(ROOT / folder / name, tmp_path / name)
    runs = tables.read_runs(tmp_path / "runs.csv")
    runner.write_outputs(tmp_path, runs["bench_id"].iloc[-1], runner.saved_machine(tmp_path, runs))
    body = next(m.group("body") for m in readme.BLOCK.finditer(TEXT) if m.group("folder") == folder)
    assert body == readme.block(tmp_path, folder), f"README.md is stale: python -m bench --readme writes {folder}"
    assert "Verdicts" in body and f"({folder}/tradeoff.png)" in body


def test_no_finding_is_typed_outside_the_blocks():
    """A speed-up or a verdict's words outside a block would be a finding no verdict made."""
    outside = readme.BLOCK.sub("", TEXT)
    assert not re.search(r"\d\.\d+x (faster|slower)|\d\.\d+x the (speed|host memory)|within noise", outside)


def test_a_block_naming_a_folder_without_runs_is_one_error(tmp_path, monkeypatch):
    (tmp_path / "README.md").write_text("x\n<!-- results: baseline/nosuch -->\n<!-- /results -->\n")
    monkeypatch.setattr(readme, "ROOT", tmp_path)
    monkeypatch.setattr(readme.rewrite, "__defaults__", (tmp_path / "README.md",))
    with pytest.raises(BenchError, match="README.md shows .*baseline/nosuch, which holds no runs.csv"):
        runner.main(["--readme"])
    assert (tmp_path / "README.md").read_text().endswith("<!-- /results -->\n")  # left as it was
