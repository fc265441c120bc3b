"""bench/catalogue.py: every script is a row and every row a script; a made-up technique is its script and one row."""

import re
import shutil

import pytest

from bench import BenchError, catalogue
from bench.modes import check
from bench.outputs import diffs
from helpers import PY, ROOT, SCRIPTS, TINY_MODEL, run_in, walkthrough


def test_every_script_is_a_row_and_every_row_a_script():
    scripts = {p.name for p in ROOT.glob("train*.py")} | {p.name for p in ROOT.glob("loader*.py")}
    assert scripts == {row.script for row in catalogue.ROWS}
    assert all((ROOT / base).exists() for base, _ in diffs.TECHNIQUES.values())
    lessons = sorted(row.lesson for row in catalogue.ROWS if row.base)
    assert lessons == list(range(1, len(lessons) + 1))  # one reading order, no place twice


def test_every_technique_has_a_path_in_the_check():
    probed = {word for gpus in (0, 2) for probe in check.paths(gpus) for word in probe.cmd}
    assert {script for _, script in diffs.TECHNIQUES.values()} <= probed


def test_the_lists_read_from_the_catalogue_are_its_rows():
    train = catalogue.TRAIN
    assert list(train) == list(catalogue.training()) and list(catalogue.LOADERS) == list(catalogue.loaders())
    assert train["ddp"][-1] == "train_ddp.py" and train["ddp"][:2] == ["-m", "torch.distributed.run"]
    assert train["dali"] == ["train.py", "--loader", "dali"] and train["nvjpeg"] == ["train.py", "--loader", "nvjpeg"]
    assert catalogue.MULTI_GPU == {"dp", "ddp", "fsdp"} and catalogue.DISTRIBUTED == {"ddp", "fsdp", "all"}
    assert catalogue.COMPILED == {"compile", "all", "all-synthetic"}
    assert catalogue.TRANSFORMER_ONLY == {"fsdp", "fused", "tf32"}
    assert catalogue.CNN_ONLY == {"channels_last", "dali", "nvjpeg", "dp"}
    assert diffs.ROWS == {"amp-synthetic": "amp", "all-synthetic": "all", "loader_dali": "dali",
                          "loader_nvjpeg": "nvjpeg"}  # fmt: skip
    assert {r.name for r in catalogue.ROWS if not r.on_cpu} == {"dp", "nvjpeg", "loader_nvjpeg"}
    assert list(SCRIPTS) == ["train", *diffs.TECHNIQUES]
    assert set(catalogue.PARTS) == set(catalogue.SWITCHES) and set(catalogue.PARTS.values()) <= set(catalogue.TRAIN)


WALKTHROUGH = ("docs/techniques.md", "Adding a technique")


def test_the_walkthrough_adds_the_next_lesson_and_a_row_the_catalogue_reads():
    """docs/techniques.md's worked example: its row is a Row of the next place in the reading order, its script's
    first line says what it adds and its one line is marked, and its commands name it."""
    row = eval(walkthrough(*WALKTHROUGH, "row").rstrip(","), {"Row": catalogue.Row})
    lessons = [r.lesson for r in catalogue.ROWS if r.base]
    assert (row.name, row.base, row.lesson) == ("noop", "train.py", max(lessons) + 1)
    first, line = walkthrough(*WALKTHROUGH, "script").splitlines()
    assert first.startswith('"""train.py + ') and line.endswith("# new #")
    assert all("noop" in cmd or cmd == "make test-fast" for cmd in walkthrough(*WALKTHROUGH, "commands").splitlines())


@pytest.mark.slow
def test_a_made_up_technique_is_its_script_and_one_row(tmp_path, tiny_data):
    """docs/techniques.md "Adding a technique", followed in a copy of the suite: train_noop.py (train.py, its
    docstring's first line and one marked line from the walkthrough) and the walkthrough's row, nothing else; then
    its commands: `make diff` shows the line, the bench plans it and runs it beside the baseline to a verdict, `make
    check` runs it (a path made from its row), and for `make test-fast` the tests that read a new script (the diff
    rule's, on it). Beyond the walkthrough: the diffs count its line, the README's table of the scripts lists it and
    the tests' scripts hold it."""
    copy = tmp_path / "suite"
    left_out = shutil.ignore_patterns(".*", "baseline", "data", "results", "docs", "__pycache__", "*.png")
    shutil.copytree(ROOT, copy, ignore=left_out)
    first, line = walkthrough(*WALKTHROUGH, "script").splitlines()
    lines = (ROOT / "train.py").read_text().splitlines(keepends=True)
    at = next(i for i, text in enumerate(lines) if text.startswith("def main("))
    lines[0] = first + "\n"  # its docstring says what it adds
    (copy / "train_noop.py").write_text("".join([*lines[:at], line + "\n\n\n", *lines[at:]]))
    source = (copy / "bench" / "catalogue.py").read_text()
    end = "]  # fmt: skip\nBY_NAME"
    row = "    " + walkthrough(*WALKTHROUGH, "row") + ",  # made up by test_catalogue.py\n"
    (copy / "bench" / "catalogue.py").write_text(source.replace(end, row + end))

    def run(*cmd):
        return run_in(copy, *cmd)

    tiny = [
        "--data",
        str(tiny_data),
        "--model",
        TINY_MODEL,
        "--steps",
        "4",
        "--warmup-steps",
        "1",
        "--batch-size",
        "16",
    ]
    said = {}
    for cmd in walkthrough(*WALKTHROUGH, "commands").splitlines():
        words = cmd.split()
        if words[:2] == ["make", "test-fast"]:  # the tests that read a new script, on it
            said[cmd] = run(PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/bench/outputs/test_diffs.py",
                            "-k", "noop")  # fmt: skip
        elif words[0] == "python":  # the bench's, on the tiny data and model
            check = "--check" in words
            extra = ["--model", TINY_MODEL, "--out", "results/check"] if check else [] if "--dry-run" in words else tiny
            said[cmd] = run(PY, *words[1:], *extra)
        else:
            said[cmd] = run(*words)
    outputs = iter(said.values())
    assert "+NOOP = True  # new #" in next(outputs)  # make diff
    assert "train_noop.py" in next(outputs)  # the plan
    assert re.search(r"\| train_noop\.py[^|]* \| works \|", next(outputs))  # make check
    next(outputs)
    summary = (copy / "results" / "summary.md").read_text()
    assert "| noop |" in summary and "- noop: " in summary  # its row and its verdict
    assert "passed" in next(outputs)
    listed = run(PY, "-m", "bench.outputs.diffs")
    assert "noop              1 lines  (make diff V=noop: train_noop.py against train.py)" in listed
    table = "from bench.outputs import readme; print(readme.scripts_block())"
    assert "| `train_noop.py` | + nothing | `python train_noop.py --data DIR` |" in run(PY, "-c", table)
    found = "import sys; sys.path.insert(0, 'tests'); import helpers; print(helpers.SCRIPTS['noop'])"
    assert run(PY, "-c", found).strip() == "('train_noop.py',)"


def test_a_row_over_another_loader_is_the_row_with_that_loader():
    """ROW+LOADER: the recipe over the GPU's JPEG decode is all:no-ddp's command with --loader nvjpeg, its family,
    processes and compile the row's; what is no row over a loader is one line."""
    assert catalogue.command("all:no-ddp+nvjpeg") == ["train_all.py", "--loader", "nvjpeg"]
    assert catalogue.command("amp+dali") == ["train_amp.py", "--loader", "dali"]
    assert catalogue.family("all:no-ddp+nvjpeg") == "all" and catalogue.compiled("all:no-ddp+nvjpeg")
    assert not catalogue.distributed("all:no-ddp+nvjpeg") and catalogue.distributed("ddp+nvjpeg")
    assert catalogue.with_loader("compile") == ("compile", None)
    for bad in ("synthetic+nvjpeg", "dali+nvjpeg", "baseline+dali", "amp+jpeg", "+nvjpeg", "nosuch+dali"):
        with pytest.raises(BenchError, match="ROW\\+LOADER"):
            catalogue.with_loader(bad)
    assert diffs.technique("all:no-ddp+nvjpeg") == "all"


FAKE_LOADER = (
    '    Row("loader_fake", "loader_fake.py", base="loader.py", lesson=13, kind="loader", measures="fake",'
    ' says="+ nothing"),  # made up by test_catalogue.py\n'
)


def test_a_made_up_loader_is_its_script_and_one_row(tmp_path, tiny_data):
    """A copy of the suite with loader_fake.py (loader.py plus one marked line) and its row, nothing else edited: a
    training row over it (--loader fake) gets its loader-alone rate and the loader-limit cause from that row, its
    diff is counted and listed with the loader scripts, and --tune-loader sweeps it (fake-w1, ...) and records its
    runs as the fake loader's."""
    copy = tmp_path / "suite"
    left_out = shutil.ignore_patterns(".*", "baseline", "data", "results", "docs", "__pycache__", "*.png", "tests")
    shutil.copytree(ROOT, copy, ignore=left_out)
    lines = (ROOT / "loader.py").read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("def build_loaders("))
    lines[0] = '"""loader.py + nothing: a made-up loader of one marked line.\n'
    (copy / "loader_fake.py").write_text("".join([*lines[:at], "FAKE = True  # new #\n\n\n", *lines[at:]]))
    source = (copy / "bench" / "catalogue.py").read_text()
    end = "]  # fmt: skip\nBY_NAME"
    (copy / "bench" / "catalogue.py").write_text(source.replace(end, FAKE_LOADER + end))

    def run(*cmd):
        return run_in(copy, *cmd)

    checks = """
import pandas as pd
from bench import catalogue
from bench.modes import tune_loader
from bench.outputs import diffs
from bench.stages.statistics import causes
assert catalogue.ALONE["fake"] == "loader_fake", catalogue.ALONE
rows = pd.DataFrame([dict(kind="loader", variant="loader_fake", rate_median=500.0),
                     dict(kind="loader", variant="loader", rate_median=100.0)])
row = dict(loader="fake", world_size=1, rate_median=480.0)
assert causes.loader_rate(row, rows) == 500.0
assert causes.loader_limit(row, None, rows)["alone"] == 500.0
assert diffs.TECHNIQUES["fake"] == ("loader.py", "loader_fake.py") and diffs.cost("fake") == 1
print("ok")
"""
    assert run(PY, "-c", checks).strip() == "ok"
    assert re.search(r"^loader_fake\.py ", run(PY, "-m", "bench.outputs.diffs"), re.M)
    assert "+FAKE = True  # new #" in run("make", "diff", "V=fake")
    swept = run(PY, "-m", "bench", "--tune-loader", "--dry-run", "--loaders", "loader,loader_fake", "--data",
                str(tiny_data), "--workers", "2")  # fmt: skip
    assert re.search(r"^  fake-w1: .*loader_fake\.py", swept, re.M) and re.search(r"^  fake-w2: ", swept, re.M), swept
    assert re.search(r"^  w2-p4: .*loader\.py", swept, re.M), swept
    recorded = "from bench.modes import tune_loader; from types import SimpleNamespace as R; " + (
        "print(tune_loader.loader_of(R(cmd=['loader_fake.py'])), tune_loader.loader_of(R(cmd=['train.py'])))"
    )
    assert run(PY, "-c", recorded).split() == ["fake", "torchvision"]
