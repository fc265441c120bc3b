"""When things break around a bench: two benches on one results folder, a bench killed while it holds the folder,
damaged results files, a row torn by a killed bench, a run that hangs."""

import json
import os
import random
import signal
import subprocess
import sys
import threading

import psutil
import pytest

from bench import BenchError
from bench.stages import baseline, execute, record
from bench.stages.launch import launch
from bench.stages.plan import Run
from helpers import PY, ROOT, fast_first, run

HOLD = """import sys, time
sys.path.insert(0, '.')
from pathlib import Path
from bench import cli
held = cli.lock(Path(sys.argv[1]))  # kept: a lock that is collected is released
print('held', flush=True)
time.sleep(300)
"""


@pytest.fixture
def holder(tmp_path):
    """A process that holds the results folder's lock as a running bench does: (folder, process)."""
    out = tmp_path / "results"
    out.mkdir()
    process = subprocess.Popen([PY, "-c", HOLD, str(out)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    yield out, process
    process.kill()
    process.wait()


@pytest.mark.parametrize("mode", fast_first([[], ["--resume"], ["--summarize"], ["--save-baseline", "x"]]))
def test_a_second_bench_on_the_same_results_is_refused_in_one_line(holder, mode, tmp_path):
    out, _ = holder
    result = run("-m", "bench", "--out", out, "--baseline-dir", tmp_path / "saved", "--variants", "baseline", *mode)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"bench: error: another bench is using {out}") and "Traceback" not in result.stderr
    assert sorted(p.name for p in out.iterdir()) == [".bench.lock"]  # nothing written


def test_a_lock_left_by_a_killed_bench_blocks_nothing(holder):
    out, process = holder
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert (out / ".bench.lock").exists()  # the file stays; the kernel's lock went with the process
    result = run("-m", "bench", "--summarize", "--out", out)
    assert result.returncode == 2 and "no " in result.stderr and "runs.csv: run the bench first" in result.stderr
    assert "another bench" not in result.stderr


@pytest.mark.slow
def test_a_dry_run_takes_no_lock(holder):
    out, _ = holder
    result = run("-m", "bench", "--out", out, "--dry-run", "--variants", "baseline", "--loaders", "none")
    assert result.returncode == 0, result.stderr
    assert "train.py --data" in result.stdout  # the plan, printed while another bench holds the folder


# ----------------------------------------------------------------------------- damaged results files

SAVED = ROOT / "baseline" / "cpu-2core-amd-epyc-avx2"


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


@pytest.mark.parametrize("text", ["{not json", '{"bench_id": "x"}', "[]"])
def test_a_damaged_plan_is_named_and_resume_stops(text, tmp_path):
    (tmp_path / "logs" / "b1").mkdir(parents=True)
    (tmp_path / "logs" / "b1" / "plan.json").write_text(text)
    result = run("-m", "bench", "--resume", "--out", tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "plan.json is damaged" in result.stderr and "--summarize still reads" in result.stderr


def test_a_damaged_saved_baseline_is_named(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "summary.csv").write_bytes(b"variant,workload\nbaseline\n")
    with pytest.raises(BenchError, match=r"summary.csv: line 2 is damaged"):
        baseline.load("m", tmp_path)


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


# ----------------------------------------------------------------------------- hung runs

HANG = """import subprocess, time
child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])  # a rank, a loader worker
open(path + '.pid', 'w').write(str(child.pid))
time.sleep(300)  # deadlocked: never returns
"""


@pytest.mark.slow
def test_a_hung_run_is_ended_with_its_whole_tree_and_recorded_as_timed_out(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text("import json, sys, time\npath = sys.argv[sys.argv.index('--metrics-out') + 1]\n" + HANG)
    run_ = Run("hang-1", "hang", "train", 1, 1, [sys.executable, str(script)])
    row = launch(run_, tmp_path, timeout=5, stop=threading.Event())
    assert row["status"] == "failed" and "timed out after 5 s" in row["error"]
    child = int(next(tmp_path.rglob("*.pid")).read_text())
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


# ----------------------------------------------------------------------------- the data or the code changed


@pytest.fixture
def stored_bench(tmp_path):
    """A bench as the runner stores it (plan.json, sources.json), over a data folder of its own, not yet run: one
    quick fake run. (results folder, data folder)."""
    from bench import cli

    data = tmp_path / "data"
    (data / "train" / "a").mkdir(parents=True)
    (data / "train" / "a" / "1.jpg").write_bytes(b"x")
    out, logs = tmp_path / "results", tmp_path / "results" / "logs" / "b1"
    logs.mkdir(parents=True)
    script = tmp_path / "fake.py"
    script.write_text("import json, sys\njson.dump({'samples_per_s': 5.0}, open(sys.argv[-1], 'w'))\n")
    fake = Run("fake-1", "loader", "loader", 1, 1, [sys.executable, str(script)], "custom")
    works = {"custom": cli.plan.Work(data=str(data), timeout=60)}
    plan_ = cli.plan
    plan_.save(logs / "plan.json", "b1", cli.machine()["machine_class"], [fake], works)
    (logs / "sources.json").write_text(json.dumps(execute.sources(works)))
    return out, data


@pytest.mark.parametrize("change", fast_first(["a file added", "a file rewritten", "a file removed", "the code"]))
def test_resume_says_what_changed_before_running_anything(stored_bench, change, monkeypatch):
    from bench import cli

    out, data = stored_bench
    if change == "a file added":
        (data / "train" / "a" / "2.jpg").write_bytes(b"y")
    elif change == "a file rewritten":
        os.utime(data / "train" / "a" / "1.jpg", ns=(0, 0))
    elif change == "a file removed":
        (data / "train" / "a" / "1.jpg").unlink()
    else:
        monkeypatch.setattr(execute, "code_fingerprint", lambda: "another")
    what = "code" if change == "the code" else "data"
    with pytest.raises(BenchError, match=f"its {what} changed since it started.*--resume --allow-changed"):
        cli.main(["--resume", "--out", str(out)])
    assert not (out / "runs.csv").exists()  # nothing ran


@pytest.mark.slow
def test_resume_goes_on_with_allow_changed_and_marks_the_rows(stored_bench, capsys):
    from bench import cli

    out, data = stored_bench
    (data / "train" / "a" / "2.jpg").write_bytes(b"y")
    cli.main(["--resume", "--allow-changed", "--out", str(out), "--baseline-dir", str(out / "none")])
    assert "warning: the data changed since bench b1 started" in capsys.readouterr().err
    rows = record.read_runs(out / "runs.csv")
    assert list(rows["changed_since_start"]) == ["data"] and list(rows["status"]) == ["ok"]


@pytest.mark.slow
def test_resume_with_nothing_changed_runs_unmarked(stored_bench):
    from bench import cli

    out, _ = stored_bench
    cli.main(["--resume", "--out", str(out), "--baseline-dir", str(out / "none")])
    assert record.read_runs(out / "runs.csv")["changed_since_start"].isna().all()


def test_allow_changed_goes_with_resume():
    result = run("-m", "bench", "--allow-changed", "--dry-run")
    assert result.returncode == 2 and "--allow-changed goes with --resume" in result.stderr


# ----------------------------------------------------------------------------- a bench killed at any instant

QUICK = "import json, sys, time\ntime.sleep(0.3)\njson.dump({'samples_per_s': 5.0}, open(sys.argv[-1], 'w'))\n"


@pytest.mark.slow
def test_a_bench_killed_at_any_instant_loses_at_most_the_run_in_flight(tmp_path):
    """SIGKILL at many moments of a bench (starting, during a run, appending a row, writing the tables, plots and
    report): each time every finished row reads back whole and --summarize works; --resume then reruns only what has
    no finished row, so that in the end each planned run has exactly one row."""
    from bench import cli

    script = tmp_path / "quick.py"
    script.write_text(QUICK)
    planned = [Run(f"fake-{i}", "loader", "loader", i, 1, [sys.executable, str(script)], "custom") for i in range(1, 9)]
    out, logs = tmp_path / "results", tmp_path / "results" / "logs" / "b1"
    logs.mkdir(parents=True)
    works = {"custom": cli.plan.Work(data=str(tmp_path), timeout=60)}
    cli.plan.save(logs / "plan.json", "b1", cli.machine()["machine_class"], planned, works)
    resume = [PY, "-m", "bench", "--resume", "--out", str(out), "--baseline-dir", str(tmp_path / "none")]
    rng, kills, tries = random.Random(0), 0, 0
    while kills < 6 and tries < 40:  # the runs alone take 2.4 s, so each moment under that falls inside a bench
        tries += 1
        bench = subprocess.Popen(resume, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            bench.wait(timeout=rng.uniform(0.3, 6.0))
            finished = True
        except subprocess.TimeoutExpired:
            bench.send_signal(signal.SIGKILL)
            bench.wait()
            kills, finished = kills + 1, False
        if (out / "runs.csv").exists():
            rows = record.read_runs(out / "runs.csv")  # whole rows only, or a line naming the damage
            assert set(rows["run"]) <= {r.name for r in planned} and (rows["status"] == "ok").all()
            assert rows["samples_per_s"].notna().all() and not rows["run"].duplicated().any()
            summarized = run("-m", "bench", "--summarize", "--out", out, "--baseline-dir", tmp_path / "none")
            assert summarized.returncode == 0, summarized.stderr
        for name in "summary.csv", "report.html":  # written whole, or not at all
            if (out / name).exists():
                assert (out / name).read_text().strip()
        if finished:  # a bench that ended: begin it again, so the next moments fall inside one
            for name in "runs.csv", "summary.csv", "report.html":
                (out / name).unlink(missing_ok=True)
    assert kills >= 6, f"{kills} kills in {tries} tries"  # the last try was one: --resume finishes it
    final = subprocess.run(resume, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    rows = record.read_runs(out / "runs.csv")
    assert sorted(rows["run"]) == sorted(r.name for r in planned)  # each once: none lost, none run twice


# ----------------------------------------------------------------------------- this round's modes and outputs


@pytest.mark.parametrize(
    "mode", fast_first([["--summarize"], ["--check"], ["--variants", "baseline", "--loaders", "none"]])
)
def test_outputs_of_this_rounds_modes_that_cannot_be_written_are_one_line(mode, tmp_path):
    """The report is an output like the tables: a folder in its place is refused before any work; so is an --out
    that is a file, for --check too."""
    (tmp_path / "results" / "report.html").mkdir(parents=True)
    result = run("-m", "bench", "--out", tmp_path / "results", *mode)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    if mode != ["--check"]:
        assert "report.html is a folder: the bench writes a file of that name" in result.stderr
    (tmp_path / "file").write_text("x")
    result = run("-m", "bench", "--out", tmp_path / "file", *mode)
    assert result.returncode == 2 and "is a file, not a folder" in result.stderr, result.stderr
