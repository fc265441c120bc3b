"""tools/sync.py: an edit goes into every copy of the base's lines, a drifted copy is named."""

import shutil

import pytest
import sync

from bench import BenchError
from bench.outputs.diffs import TECHNIQUES
from helpers import ROOT, run


@pytest.fixture
def copies(tmp_path):
    """The real scripts, copied: the train family and the loaders."""
    for name in {name for pair in TECHNIQUES.values() for name in pair}:
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


TOOL = ROOT / "tools" / "sync.py"


def test_the_families_are_the_base_and_each_variant(copies):
    assert [p.name for p in sync.family(root=copies)][0] == "train.py"
    assert len(sync.family(root=copies)) == 1 + sum(base == "train.py" for base, _ in TECHNIQUES.values())
    assert [p.name for p in sync.family(loaders=True, root=copies)] == [
        "loader.py",
        "loader_dali.py",
        "loader_nvjpeg.py",
    ]


def test_an_edit_goes_into_every_copy(copies):
    old = "def replace(model, name, module):\n"
    new = "def replace(model, name, module):  # shortened\n"
    changed = sync.apply(old, new, sync.family(root=copies))
    assert len(changed) == len(sync.family(root=copies)) > 8
    for path in changed:
        assert path.read_text().count(new) == 1 and old not in path.read_text()


def test_a_drifted_copy_is_named_and_nothing_is_written(copies):
    before = {p: p.read_text() for p in sync.family(root=copies)}
    drifted = copies / "train_amp.py"
    drifted.write_text(drifted.read_text().replace("def replace(model, name, module):", "def replace(model, name, m):"))
    before[drifted] = drifted.read_text()
    with pytest.raises(BenchError, match=r"not found exactly once in: train_amp.py \(0 times\); nothing written"):
        sync.apply("def replace(model, name, module):", "x", sync.family(root=copies))
    assert {p: p.read_text() for p in before} == before


def test_the_command_line_fails_in_one_line(tmp_path):
    (tmp_path / "old.txt").write_text("no script holds this line\n")
    (tmp_path / "new.txt").write_text("x\n")
    for args in [(tmp_path / "old.txt", tmp_path / "new.txt"), (tmp_path / "none.txt", tmp_path / "new.txt")]:
        result = run(TOOL, *args)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and "sync: error:" in result.stderr
    assert "train.py (0 times)" in run(TOOL, tmp_path / "old.txt", tmp_path / "new.txt").stderr
