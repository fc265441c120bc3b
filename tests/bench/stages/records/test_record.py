"""bench/stages/records/record.py: runs.csv written whole by concurrent writers, older files upgraded, a damaged or torn
one named, a full disk that keeps the rows."""

import subprocess

import pandas as pd
import pytest

from bench import BenchError, cli
from bench.stages.records import record
from helpers import PY, ROOT, ROW, SAVED, bench_error, fast_first, run


def damaged(kind):
    """The bytes of a runs.csv damaged as kind, from the shipped baseline's runs.csv (57 rows)."""
    good = (SAVED / "runs.csv").read_bytes()
    lines = good.splitlines(keepends=True)
    return {
        "not text": bytes(range(256)) * 10,
        "empty": b"",
        "not a table": b"hello world\nthis is, not a table\n",
        "another table": (SAVED / "summary.csv").read_bytes(),
        "a damaged row inside": b"".join(lines[:11] + [lines[11][:40] + b"\n"] + lines[12:]),
        "newer schema": good.replace(b"\n2,", b"\n99,"),
    }[kind]


def fake_runs(path, rows):
    for row in rows:
        record.append_row(path, row)


ROW.update(dataset="generated", image_size=16, steps_timed=5, global_batch_size=16, model="m")


@pytest.mark.slow
def test_concurrent_writers_do_not_tear_rows(tmp_path):
    path = tmp_path / "runs.csv"
    code = (
        "import sys; from bench.outputs import markdown; from bench.stages.records import record\n"
        "from bench.stages.statistics import summarize\n"
        "for i in range(200): record.append_row(sys.argv[1], {'run': f'{sys.argv[2]}-{i}', 'error': 'x' * 3000})\n"
    )
    writers = [subprocess.Popen([PY, "-c", code, str(path), f"w{k}"], cwd=ROOT) for k in range(4)]
    assert [w.wait(timeout=120) for w in writers] == [0] * 4
    runs = pd.read_csv(path)
    assert len(runs) == 800 and runs["run"].nunique() == 800 and (runs["error"].str.len() == 3000).all()


def test_runs_file_with_other_columns_is_refused(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(BenchError, match="is not a table the bench wrote: it has no bench_id, run, variant column"):
        record.prepare_runs_file(path)
    path.write_text("bench_id,run,variant,nosuch\nb,r-1,baseline,1\n")
    with pytest.raises(BenchError, match="columns this version does not know \\(nosuch\\)"):
        record.prepare_runs_file(path)


@pytest.mark.parametrize(
    "kind,words",
    fast_first(
        [
            ("not text", "is not a CSV table (it is not text)"),
            ("empty", "is empty"),
            ("not a table", "line 2 is damaged (2 fields where the header has 1)"),
            ("another table", "is not a table the bench wrote: it has no bench_id, run column"),
            (
                "a damaged row inside",
                "where the header has 99); the 10 rows before it are whole: keep them with `head -n 11",
            ),
            ("newer schema", "written by schema version 99, newer than this code's"),
        ]
    ),
)
def test_a_damaged_runs_csv_is_named_in_one_line(kind, words, tmp_path):
    (tmp_path / "runs.csv").write_bytes(damaged(kind))
    modes = [["--summarize"]] + ([["--variants", "baseline", "--loaders", "none"]] if kind != "empty" else [])
    for mode in modes:  # read, or appended to (an empty file is simply written: a bench starts it)
        result = run("-m", "bench", "--out", tmp_path, *mode)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert f"{tmp_path / 'runs.csv'}" in result.stderr and words in result.stderr, result.stderr
    assert (tmp_path / "runs.csv").read_bytes() == damaged(kind)  # left as it was
    if kind == "a damaged row inside":  # the way out it gives keeps the whole rows
        head = subprocess.run(["head", "-n", "11", tmp_path / "runs.csv"], capture_output=True, check=True)
        (tmp_path / "runs.csv").write_bytes(head.stdout)
        assert len(record.read_runs(tmp_path / "runs.csv")) == 10


@pytest.mark.slow
def test_a_torn_last_row_is_left_out_and_the_rest_summarized(tmp_path):
    """A bench killed while it appended a row leaves a line without its end: the rows before it are the bench."""
    good = (SAVED / "runs.csv").read_bytes()
    (tmp_path / "runs.csv").write_bytes(good[: good.rstrip(b"\n").rfind(b"\n") + 200])
    assert len(record.read_runs(tmp_path / "runs.csv")) == len(record.read_runs(SAVED / "runs.csv")) - 1
    result = run("-m", "bench", "--summarize", "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "summary.csv").exists()
    said = f"warning: {tmp_path / 'runs.csv'}: its last row is left out: torn (a bench stopped while writing it)"
    assert result.stderr.splitlines() == [said]  # said once, however often the file is read


def test_a_bench_appending_after_a_torn_row_starts_on_a_line_of_its_own(tmp_path):
    """A resumed or new bench cuts the torn row before it appends: its row is not glued to the torn one."""
    good = (SAVED / "runs.csv").read_bytes()
    whole = record.read_runs(SAVED / "runs.csv")
    (tmp_path / "runs.csv").write_bytes(good[: good.rstrip(b"\n").rfind(b"\n") + 200])
    note = record.prepare_runs_file(tmp_path / "runs.csv")
    assert note and "left out its last row" in note
    assert "upgraded" in note  # the shipped file is of the schema before first_step_s: its header is completed too
    assert (tmp_path / "runs.csv.v2").read_bytes() == good[: good.rstrip(b"\n").rfind(b"\n") + 1]
    record.append_row(tmp_path / "runs.csv", whole.iloc[-1].to_dict())
    again = record.read_runs(tmp_path / "runs.csv")
    assert len(again) == len(whole) and list(again["run"]) == list(whole["run"])


@pytest.mark.slow
def test_a_full_disk_while_summarizing_keeps_the_rows(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    fake_runs(out / "runs.csv", [dict(ROW, run=f"baseline-{i}", variant="baseline", samples_per_s=i) for i in (1, 2)])
    before = (out / "runs.csv").read_bytes()
    error = bench_error("--summarize", "--out", out, file_limit=200)
    assert f"cannot write {out / 'summary.csv'}: File too large" in error
    assert (out / "runs.csv").read_bytes() == before
    assert sorted(p.name for p in out.iterdir() if p.name != cli.LOCK) == ["runs.csv"]


def test_a_row_that_does_not_fit_on_the_disk_is_cut_off(tmp_path):
    """append_row on a full disk: the rows before it stay whole, and the error is one BenchError."""
    path = tmp_path / "runs.csv"
    fake_runs(path, [dict(ROW, run="baseline-1", variant="baseline", samples_per_s=1.0)])
    before = path.read_bytes()
    code = (
        "import sys; from bench import BenchError; from bench.outputs import markdown\n"
        "from bench.stages.records import record\nfrom bench.stages.statistics import summarize\n"
        f"try: record.append_row({str(path)!r}, dict(run='x', error='e' * 5000))\n"
        "except BenchError as e: sys.exit(str(e))\n"
    )
    result = run("-c", code, file_limit=len(before) + 100)
    assert result.returncode == 1 and "File too large (the rows before it are kept)" in result.stderr
    assert path.read_bytes() == before


def test_a_value_its_field_refuses_is_named_with_its_line(tmp_path):
    """bench/schema.py's least=N: a repeat of -5 in a saved runs.csv is no round; summarizing it is refused, naming
    the line (a header, then the rows), and the file is left as it is."""
    runs = record.read_runs(SAVED / "runs.csv")
    runs.loc[runs.index[3], "repeat"] = -5
    runs.to_csv(tmp_path / "runs.csv", index=False)
    with pytest.raises(BenchError, match="runs.csv, line 5: repeat -5: must be 1 or more"):
        record.read_runs(tmp_path / "runs.csv")
    result = run("-m", "bench", "--summarize", "--out", tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "line 5: repeat -5: must be 1 or more (bench/schema.py)" in result.stderr
