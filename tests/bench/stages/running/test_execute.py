"""bench/stages/running/execute.py through its in-process launcher: chunks, budgets, Ctrl-C, resume and what it refuses,
in every mode."""

import json
import os
import sys

import pandas as pd
import pytest

from bench import BenchError, cli, modes
from bench.stages.planning import planfile, planned
from bench.stages.planning.planned import Run
from bench.stages.records import record
from bench.stages.running import execute
from helpers import MODES, RUN_S, STEPS, fast_first, run

ADDED = dict(max_batch=3 * 3, tune_loader=2 * 4)  # the runs a mode adds to its plan as it goes: its rounds


@pytest.fixture
def bench(in_process_bench):
    """python -m bench in-process, its runs made up (tests/suite.py)."""
    return in_process_bench


def records(out):
    """The records of the last bench: the last of each run."""
    logs = sorted((out / "logs").glob("*/plan.json"))[-1].parent
    plan = json.loads((logs / "plan.json").read_text())
    if plan["mode"] == "speed":
        rows = pd.read_csv(out / "runs.csv")
        return plan, rows[rows["bench_id"] == plan["bench_id"]].to_dict("records")
    return plan, execute.read_records(logs / "records.jsonl")


def cli_main(bench, *flags):
    cli.main([*flags, "--out", str(bench.out)])


@pytest.fixture
def stored_bench(tmp_path, monkeypatch):
    """A bench as the runner stores it (plan.json, sources.json), over a data folder of its own, not yet run: one
    quick fake run, its script trusted as one of the catalogue's (planfile.trusted). (results folder, data folder)."""

    data = tmp_path / "data"
    (data / "train" / "a").mkdir(parents=True)
    (data / "train" / "a" / "1.jpg").write_bytes(b"x")
    out, logs = tmp_path / "results", tmp_path / "results" / "logs" / "b1"
    logs.mkdir(parents=True)
    script = tmp_path / "fake.py"
    script.write_text("import json, sys\njson.dump({'samples_per_s': 5.0}, open(sys.argv[-1], 'w'))\n")
    fake = Run("fake-1", "loader", "loader", 1, 1, [sys.executable, str(script)], "custom")
    monkeypatch.setattr(planfile, "SCRIPTS", planfile.SCRIPTS | {str(script)})
    works = {"custom": planned.Work(data=str(data), timeout=60)}
    planfile.save(logs / "plan.json", "b1", modes.this_machine()["machine_class"], [fake], works)
    (logs / "sources.json").write_text(json.dumps(execute.sources(works)))
    return out, data


@pytest.mark.parametrize("mode", fast_first(list(MODES)))  # the bench in make test-fast, every mode in make test
def test_every_mode_stops_at_the_chunk_between_whole_groups_and_resume_finishes_it(bench, mode, capsys):
    planned = MODES[mode][1]
    # room for a first group and a half (a part that holds no round would split it: see below): the bench's 4 runs
    # and --scaling's 2 as planned (12 and 15 s a run), the others' one run
    runs = dict(speed=5.5, scaling=3.5).get(mode, 2.5)
    code, first = bench(mode, "--chunk", str(runs * RUN_S / 60))
    said = capsys.readouterr().out
    assert code in (0, 1), said
    plan, done = records(bench.out)
    assert plan["mode"] == mode and len(plan["runs"]) == planned
    assert "every round whole" in said and "--resume goes on" in said
    groups = 2 if mode in ("speed", "scaling") else 1  # the bench's and --scaling's rounds run whole
    assert 0 < len(done) < planned and len(done) % (planned // groups if groups > 1 else 1) == 0
    code, second = bench(mode, "--resume")
    said = capsys.readouterr().out
    assert code in (0, 1) and f"{len(done)} of {planned}" in said
    plan, done = records(bench.out)  # --max-batch's rounds at the largest batches are added to its plan as they come
    assert len(plan["runs"]) == planned + ADDED.get(mode, 0)
    assert sorted(r["run"] for r in done) == sorted(r["name"] for r in plan["runs"])  # each once, none lost
    assert not set(second) & {r["run"] for r in done if r["run"] in first and "batch" not in r["run"]}
    assert (bench.out / MODES[mode][2]).exists()


def test_a_round_longer_than_a_part_is_split_between_its_runs_and_resume_finishes_it(bench, capsys):
    """A part of 2.5 runs, rounds of 4 (planned at 12 s a run): no part holds a round, so each part stops before the
    run that would end past it (a GPU's fp32 ViT round is longer than a 10-minute command); each run once."""
    chunk = str(2.5 * RUN_S / 60)
    code, first = bench("speed", "--chunk", chunk)
    said = capsys.readouterr().out
    assert code == 0 and len(first) == 2, said
    assert "stopped after 2 of 8 runs: this part's" in said and "split between its runs" in said
    launched = list(first)
    for _ in range(3):
        code, more = bench("speed", "--resume", "--chunk", chunk)
        launched += more
    assert code == 0 and len(launched) == 8 == len(set(launched)), launched
    plan, done = records(bench.out)
    assert sorted(r["run"] for r in done) == sorted(r["name"] for r in plan["runs"])
    assert "split between" not in capsys.readouterr().out.splitlines()[-1]


@pytest.mark.parametrize("mode", fast_first([m for m in MODES if m != "check"]))  # --check: no default budget (below)
def test_every_mode_keeps_to_its_budget_says_what_it_left_and_resume_with_a_budget_goes_on(bench, mode, capsys):
    planned = MODES[mode][1]
    if mode == "speed":  # the plan fits its 2 rounds of 4 runs to the budget by its estimates (12 s a run here), the
        code, _ = bench(mode, "--budget", "1.8", run_s=40)  # executor by the runs' times: 40 s each: no round 2
    else:  # room for one run and a half: the first group runs, the second is not begun
        code, _ = bench(mode, "--budget", str(1.5 * RUN_S / 60))
    said = capsys.readouterr().out
    assert "the budget of" in said and "would be spent inside the next round" in said
    _, done = records(bench.out)
    assert 0 < len(done) < planned
    table = (bench.out / MODES[mode][2]).read_text()
    if mode in ("max_batch", "to_accuracy"):  # the variants left out are in the table, with why
        assert "budget" in table
    code, _ = bench(mode, "--resume", "--budget", "none")
    plan, done = records(bench.out)
    assert len({r["run"] for r in done}) == len(plan["runs"]) >= planned


def test_the_check_keeps_to_a_budget_when_given_one(bench, capsys):
    code, _ = bench("check", "--budget", str(3.5 * RUN_S / 60))
    said = capsys.readouterr().out
    assert "would be spent inside the next round" in said
    table = (bench.out / "check" / "check.md").read_text()
    assert table.count("| works |") == 3 and table.count("| not run | the budget of") == 16
    assert code == 0  # nothing failed: the paths not run are not failures


@pytest.mark.parametrize("mode", fast_first(list(MODES)))  # the bench in make test-fast, every mode in make test
def test_ctrl_c_in_any_mode_keeps_what_finished_exits_130_and_resume_runs_the_rest(bench, mode, capsys):
    planned = MODES[mode][1]
    code, _ = bench(mode, interrupt_at=13 if mode == "max_batch" else 3)  # a search: 9 probes and a run here
    said = capsys.readouterr().out
    assert code == 130 and "interrupted during" in said, said
    _, done = records(bench.out)
    assert 0 < len(done) < planned and all(r["status"] == "ok" for r in done)
    code, _ = bench(mode, "--resume")
    assert code in (0, 1)
    plan, done = records(bench.out)
    assert sorted(r["run"] for r in done) == sorted(r["name"] for r in plan["runs"])


def test_a_resumed_bench_keeps_the_flags_it_began_with(bench, capsys):
    """--profile records round 1's runs: a bench stopped in round 1 and resumed (without the flag, as the docs say)
    profiles the rest of round 1 too (it once profiled none after the resume, silently)."""
    code, launched = bench("speed", "--profile", "--steps", "8", interrupt_at=2)
    assert code == 130 and bench.profiled == launched == ["baseline-1", "amp-1"]  # amp-1: stopped as it began
    code, launched = bench("speed", "--resume")
    rest = ["amp-1", "checkpoint-1"]  # round 1's rows; not the baseline beside them (its first run is profiled)
    assert code in (0, 1) and "baseline-1.2" in launched and bench.profiled == rest


def test_a_resume_finishes_the_bench_as_planned_and_changes_only_what_a_resume_may(bench, capsys):
    """plan.json keeps the configuration the bench was asked (bench/config.py): a resume that asks for other work
    (other steps, other rows, another seed) is refused in one line before anything runs; one that gives the budget
    again and adds --profile says so, and finishes the plan on the bench's own configuration, its rest profiled."""
    code, _ = bench("speed", "--steps", "8", interrupt_at=2)
    assert code == 130
    plan, done = records(bench.out)
    assert plan["config"]["mode"] == "speed" and plan["config"]["work"]["steps"] == 8
    assert plan["config"]["rows"]["variants"] == ["baseline", "amp", "checkpoint"]
    capsys.readouterr()
    for other, planned_as in ((["--steps", "9"], "--steps 8"), (["--variants", "amp"], "--variants baseline,amp,"),
                              (["--seed", "3"], "without --seed")):  # fmt: skip
        with pytest.raises(BenchError, match=f"a --resume finishes bench .* as it was planned \\({planned_as}"):
            bench("speed", "--resume", *other)
    assert [r["run"] for r in records(bench.out)[1]] == [r["run"] for r in done]  # nothing ran
    assert "resuming" not in capsys.readouterr().out
    code, launched = bench("speed", "--resume", "--steps", "8", "--budget", "none", "--profile")
    said = capsys.readouterr().out
    assert code in (0, 1) and "as it was planned; this command changes --budget none, --profile" in said, said
    assert bench.profiled == [r for r in launched if r.endswith("-1")] and bench.profiled  # round 1, not beside
    plan, done = records(bench.out)
    assert not plan["config"]["outputs"]["profile"] and len(done) == len(plan["runs"])  # plan.json: as planned


def test_the_signal_handlers_are_installed_in_one_place():
    """Every mode's loop is the executor's: no other module of bench/ installs a handler for SIGINT or SIGTERM."""
    from pathlib import Path

    installs = [p.name for p in Path(execute.__file__).parent.glob("*.py") if "signal.signal(" in p.read_text()]
    assert installs == ["execute.py"]


def test_a_record_cut_short_by_a_kill_is_left_out_and_its_run_runs_again(tmp_path):
    path = tmp_path / "records.jsonl"
    execute.append_record(path, dict(run="a-1", status="ok", wall_s=3.0))
    with open(path, "a") as f:
        f.write('{"run": "b-1", "sta')  # the kill came in the middle of the line
    assert [r["run"] for r in execute.read_records(path)] == ["a-1"]
    assert execute.last_of_each([dict(run="a", x=1), dict(run="b"), dict(run="a", x=2)]) == [
        dict(run="b"),
        dict(run="a", x=2),
    ]


def test_a_resumed_bench_counts_what_its_earlier_parts_spent_against_the_budget(bench, capsys):
    """3 rounds of 20 s: a first part of 30 s runs round 1; resumed with a budget of 50 s, round 2 runs (a part
    always runs its first group) and round 3 would end at 60 s, past the budget, counting the first part's 20 s."""
    flags = ["--scaling", "1,2", "--variants", "ddp", "--repeats", "3", *STEPS]
    code, _ = bench("scaling", "--chunk", str(30 / 60), flags=flags)
    _, done = records(bench.out)
    assert code == 0 and len(done) == 2, capsys.readouterr().out
    code, _ = bench("scaling", "--resume", "--budget", str(50 / 60))
    said = capsys.readouterr().out
    _, done = records(bench.out)
    assert len(done) == 4 and "the budget of 0.833333 min would be spent inside the next round" in said, said


@pytest.mark.parametrize("mode", ["speed", "to_accuracy", "scaling"])
def test_resume_runs_the_failed_runs_again_and_only_them(bench, mode):
    code, _ = bench(mode, failing={"amp-1", "checkpoint-1", "n2-ddp-1"})
    plan, done = records(bench.out)
    failed = {r["run"] for r in done if r["status"] != "ok"}
    assert len(failed) == (2 if mode != "scaling" else 1)
    code, again = bench(mode, "--resume")
    assert sorted(again) == sorted(failed)  # the failed ones, and nothing else
    _, done = records(bench.out)
    last = execute.last_of_each(done)  # a run tried again counts by its last record
    assert all(r["status"] == "ok" for r in last) and len(last) == len(plan["runs"]) == len(done) - len(failed)


def test_resume_refuses_a_bench_of_another_machine_and_rows_run_in_priority_order(bench):
    flags = ["--variants", "checkpoint,amp,baseline", "--loaders", "none", "--repeats", "1", *STEPS]
    code, launched = bench("speed", flags=flags)
    assert launched == ["baseline-1", "amp-1", "checkpoint-1", "baseline-1.2"]  # the plan's order, whatever --variants
    (plan,) = (bench.out / "logs").glob("*/plan.json")
    plan.write_text(json.dumps(dict(json.loads(plan.read_text()), machine_class="8x-nvidia-h100")))
    with pytest.raises(BenchError, match="ran on 8x-nvidia-h100, this is .*: its numbers would not be one bench"):
        cli_main(bench, "--resume")


@pytest.mark.parametrize("log, said", [
    ("step 3\ntrain.py: error: --batch-size 0: must be >= 1\nmore\n", "train.py: error: --batch-size 0: must be >= 1"),
    ("loss 2.3\nKilled\n\n======\n", "Killed"),
    ("", "no output"),
])  # fmt: skip
def test_a_failed_runs_error_is_the_line_that_says_why(log, said):
    from bench.stages.running import launch

    assert launch.last_error(log) == said


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


def test_nothing_to_resume(tmp_path):
    result = run("-m", "bench", "--resume", "--out", tmp_path)
    assert result.returncode == 2 and "no bench 'last' to resume" in result.stderr


def test_a_resumed_parts_deadline_inside_a_group_counts_what_earlier_parts_spent(bench, monkeypatch):
    """The deadline a mode's runs see inside a group (max-batch's search asks it between probes) is the budget less
    what every part spent, this one's and the earlier ones': a first part runs 2 runs of 10 s; resumed with a budget
    of 50 s, the next part's runs have 30 s left, not 50."""
    real, left = execute.Job, []

    def job(mode, stop, deadline):
        left.append(deadline - execute.time.monotonic())
        return real(mode, stop, deadline)

    monkeypatch.setattr(execute, "Job", job)
    flags = ["--scaling", "1,2", "--variants", "ddp", "--repeats", "3", *STEPS]
    assert bench("scaling", "--chunk", str(30 / 60), flags=flags)[0] == 0
    bench("scaling", "--resume", "--budget", str(50 / 60))
    assert left[-1] == pytest.approx(50 - 2 * RUN_S)
