"""End to end: whole benches on tiny data (every table and plot, a failing row, a stopped or killed bench, a saved
baseline, a profiled bench, a model of one's own, a busy machine)."""

import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from bench import cli, modes
from bench.stages.planning import planfile
from bench.stages.planning.planned import Run, Work
from bench.stages.records import record
from bench.stages.statistics import rules
from helpers import (
    EXAMPLE,
    LIMIT,
    PY,
    ROOT,
    SAVED,
    SMALL_MODEL,
    TINY,
    TINY_MODEL,
    TOO_BIG,
    assert_no_orphans,
    bench,
    made,
    rapl,
    run,
    set_uj,
)


@pytest.fixture(scope="session")
def tiny_bench(tiny_data, tmp_path_factory):
    """One small bench, as `make compare V=dp` runs it (the baseline and dp, paired; here also one loader benchmark),
    twice each, with TensorBoard's curves: the command the target builds, forked as the other benches are (started
    by make, the bench and each of its 8 runs were new interpreters: 42 s, most of it importing torch)."""
    out = tmp_path_factory.mktemp("bench") / "results"
    args = ["--out", out, *TINY, "--loaders", "loader", "--repeats", 2, "--tensorboard"]
    argv = made("compare", "V=dp", f"DATA={tiny_data}", "ARGS=" + " ".join(map(str, args)))
    assert argv[:4] == ["-m", "bench", "--variants", "baseline,dp"] and "results/compare" in argv, argv
    return run(*argv, timeout=900), out


def wait_for_rows(path, rows, deadline):
    while time.time() < deadline:
        if path.exists() and len(path.read_text().splitlines()) > rows:
            return
        time.sleep(0.5)
    raise AssertionError(f"{path} did not get {rows} rows in time")


QUICK = "import json, sys, time\ntime.sleep(0.3)\njson.dump({'samples_per_s': 5.0}, open(sys.argv[-1], 'w'))\n"


@pytest.mark.slow
@pytest.mark.xdist_group("tiny_bench")  # one worker makes the bench they share
def test_tiny_bench_writes_every_table_and_plot(tiny_bench):
    result, out = tiny_bench
    assert result.returncode == 0, result.stdout + result.stderr
    runs = pd.read_csv(out / "runs.csv")
    assert list(runs.columns) == record.RUN_COLUMNS
    assert len(runs) == 8 and (runs["status"] == "ok").all()  # a CPU round: baseline, dp, the baseline beside it
    assert sorted(runs["run"]) == ["baseline-1", "baseline-1.2", "baseline-2", "baseline-2.2", "dp-1", "dp-2",
                                   "loader-1", "loader-2"]  # fmt: skip
    train = runs[runs["kind"] == "train"]
    assert (train["samples_per_s"] > 0).all() and (train["global_batch_size"] == 16).all()
    assert (train["steps_timed"] == 2).all()
    evaluated = train.set_index("run")["val_samples"]  # the first round evaluates, the second times the speed alone
    assert (evaluated[["baseline-1", "dp-1"]] == 40).all()
    assert (evaluated[["baseline-1.2", "baseline-2", "dp-2", "baseline-2.2"]] == 0).all()
    assert train.set_index("run")["val_acc"][["baseline-2", "dp-2"]].isna().all()
    assert (runs["peak_host_mem_mib"] > 0).all() and runs["nvml_peak_mib"].isna().all()  # a CPU-only machine
    assert runs["git_commit"].notna().all() and runs["command"].str.contains("--metrics-out").all()
    summary = pd.read_csv(out / "summary.csv")
    by_variant = summary.set_index("variant")
    assert by_variant.loc["baseline", "speedup"] == 1.0 and by_variant.loc["loader", "speedup"] == 1.0
    rate = train.set_index("run")["samples_per_s"]  # paired: dp over the baseline beside it, at dp's time
    low = [rate[f"dp-{r}"] / max(rate[f"baseline-{r}"], rate[f"baseline-{r}.2"]) for r in (1, 2)]
    high = [rate[f"dp-{r}"] / min(rate[f"baseline-{r}"], rate[f"baseline-{r}.2"]) for r in (1, 2)]
    speedup = by_variant.loc["dp", "speedup"]
    assert math.sqrt(low[0] * low[1]) - 1e-9 <= speedup <= math.sqrt(high[0] * high[1]) + 1e-9
    assert by_variant.loc["dp", "rounds_paired"] == 2 and by_variant.loc["dp", "speed_answer"] in rules.ANSWERS
    assert by_variant.loc["baseline", "runs_ok"] == 4  # two a round: first and beside dp
    for plot in "throughput.png", "memory.png", "tradeoff.png", "time.png", "curves.png":
        assert (out / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    learned = json.loads((out / "curves.json").read_text())["runs"]  # every training run's curves, no loader's
    assert sorted(learned) == sorted(train["run"])
    assert all([step for step, _ in r["loss"]] == [3] and len(r["val"]) == 1 for r in learned.values())
    bench_id = runs["bench_id"].iloc[0]
    assert sorted(p.name for p in (out / "logs" / bench_id / "tensorboard").iterdir()) == sorted(learned)
    assert f"tensorboard --logdir {out / 'logs' / bench_id / 'tensorboard'}" in result.stdout
    text = (out / "summary.md").read_text()
    assert "| baseline |" in text and "- baseline: the reference" in text and "- dp: " in text
    assert by_variant.loc["dp", "verdict"] in text and by_variant.loc["dp", "verdict"] in result.stdout
    assert list(runs["run"])[:4] == ["baseline-1", "dp-1", "baseline-1.2", "loader-1"]  # round 1 in priority order
    assert "What to adopt for" in text and "What to adopt for" in result.stdout  # the answer first
    # where each run's time went: its phases add up to its wall time
    phases = train[["setup_s", "warmup_s", "window_s", "eval_s", "other_s"]]
    assert (phases >= -0.05).all().all() and ((phases.sum(axis=1) - train["wall_s"]).abs() < 1e-6).all()


@pytest.mark.slow
def test_a_failing_variant_is_a_row_and_the_others_run(tiny_data, tmp_path):
    # 16 images do not split over 3 DDP processes: that variant fails, the rest goes on
    out = tmp_path / "results"
    result = bench(tiny_data, out, "--variants", "ddp,baseline", "--loaders", "none", "--repeats", 1, "--nproc", 3)
    assert result.returncode == 1, result.stdout + result.stderr
    runs = pd.read_csv(out / "runs.csv").set_index("run")
    assert runs.loc["ddp-1", "status"] == "failed" and "does not split evenly" in runs.loc["ddp-1", "error"]
    assert runs.loc["baseline-1", "status"] == "ok" and runs.loc["baseline-1.2", "status"] == "ok"  # and beside it
    summary = pd.read_csv(out / "summary.csv").set_index("variant")
    assert summary.loc["ddp", "runs_failed"] == 1 and summary.loc["baseline", "runs_ok"] == 2


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGTERM])  # SIGINT: tests/test_execute.py, every mode; SIGKILL: test_faults
def test_a_stopped_bench_keeps_every_finished_row(tiny_data, tmp_path, how):
    out = tmp_path / "results"
    cmd = [PY, "-m", "bench", "--data", tiny_data, "--out", out, *TINY, "--variants", "baseline", "--loaders", "none"]
    job = subprocess.Popen([*map(str, cmd), "--repeats", "20"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        wait_for_rows(out / "runs.csv", 1, time.time() + 300)
        job.send_signal(how)
        job.wait(timeout=60)
    finally:
        job.kill()
    runs = pd.read_csv(out / "runs.csv")
    assert 1 <= len(runs) < 20 and (runs["status"] == "ok").all() and runs["samples_per_s"].notna().all()
    if how != signal.SIGKILL:  # a clean stop: the summary is written from the finished rows
        assert job.returncode == 130
        assert pd.read_csv(out / "summary.csv").loc[0, "runs_ok"] == len(runs)
    time.sleep(3)
    assert_no_orphans(out)  # the interrupted run's processes


@pytest.mark.slow
@pytest.mark.xdist_group("tiny_bench")  # one worker makes the bench they share
def test_save_baseline_then_a_bench_appends_and_prints_the_comparison(tiny_data, tiny_bench, tmp_path):
    _, out = tiny_bench
    saved = tmp_path / "baselines"
    result = run("-m", "bench", "--out", out, "--save-baseline", "--baseline-dir", saved)
    assert result.returncode == 0, result.stderr
    (folder,) = saved.iterdir()  # named for this machine's class (the runs' machine: this one)
    assert folder.name.startswith("cpu-") and {p.name for p in folder.iterdir()} >= {
        "summary.csv", "summary.md", "throughput.png", "memory.png", "machine.json", "runs.csv"
    }  # fmt: skip
    last = record.read_runs(out / "runs.csv").iloc[-1]
    kept = pd.read_csv(folder / "runs.csv")
    assert set(kept["bench_id"]) == {last["bench_id"]} and kept["command"].str.contains("train.py").any()
    assert json.loads((folder / "machine.json").read_text())["cpu_cores"] == len(os.sched_getaffinity(0))
    brought = tmp_path / "brought"  # a bench brought from a GPU machine is saved as that machine's, not this one's
    shutil.copytree(out, brought)
    runs = pd.read_csv(brought / "runs.csv")
    runs = runs.assign(machine_class="1x-nvidia-made-up", gpu_name="NVIDIA Made Up", gpu_count=1, gpu_tf32=True)
    runs.to_csv(brought / "runs.csv", index=False)
    result = run("-m", "bench", "--out", brought, "--save-baseline", "--baseline-dir", saved)
    assert result.returncode == 0, result.stderr
    machine = json.loads((saved / "1x-nvidia-made-up" / "machine.json").read_text())
    assert machine["gpu_name"] == "NVIDIA Made Up" and machine["gpu_count"] == 1 and machine["gpu_tf32"] is True
    copy = tmp_path / "again"  # a results folder that holds the bench's rows already: the next bench appends
    copy.mkdir()
    (copy / "runs.csv").write_bytes((out / "runs.csv").read_bytes())
    again = bench(tiny_data, copy, "--variants", "baseline", "--loaders", "loader", "--repeats", 1, "--baseline-dir",
                  saved)  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"against the saved {folder}:" in again.stdout
    assert "  baseline: " in again.stdout and "  loader: " in again.stdout and "  dp: " not in again.stdout
    runs = pd.read_csv(copy / "runs.csv")
    assert len(runs) == 8 + 2 and runs["bench_id"].nunique() == 2  # the tiny bench's and baseline-1, loader-1
    assert list(pd.read_csv(copy / "summary.csv")["variant"]) == ["baseline", "loader"]  # the summary: the last bench


# python -m bench with one more script trusted in a plan (bench/stages/planning/planfile.py trusted: the catalogue's
# alone)
TRUSTING = (
    "import sys; from bench.stages.planning import planfile; planfile.SCRIPTS |= {sys.argv[1]}; from bench import cli;"
    " cli.main(sys.argv[2:])"
)


@pytest.mark.slow
def test_a_bench_killed_at_any_instant_loses_at_most_the_run_in_flight(tmp_path):
    """SIGKILL at many moments of a bench (starting, during a run, appending a row, writing the tables, plots and
    report): each time every finished row reads back whole and --summarize works; --resume then reruns only what has
    no finished row, so that in the end each planned run has exactly one row."""
    script = tmp_path / "quick.py"
    script.write_text(QUICK)
    planned = [Run(f"fake-{i}", "loader", "loader", i, 1, [sys.executable, str(script)], "custom") for i in range(1, 9)]
    out, logs = tmp_path / "results", tmp_path / "results" / "logs" / "b1"
    logs.mkdir(parents=True)
    works = {"custom": Work(data=str(tmp_path), timeout=60)}
    planfile.save(logs / "plan.json", "b1", modes.this_machine()["machine_class"], planned, works)
    resume = [PY, "-c", TRUSTING, str(script), "--resume", "--out", str(out), "--baseline-dir", str(tmp_path / "none")]
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


@pytest.mark.slow
def test_the_bench_records_it_and_goes_on(big_data, tmp_path):
    out = tmp_path / "results"
    args = ("--variants", "baseline", "--loaders", "loader", "--repeats", 1, "--loader-steps", 2)
    result = run("-m", "bench", "--data", big_data, "--out", out, *TOO_BIG, *args, memory_limit=LIMIT)
    runs = pd.read_csv(out / "runs.csv").set_index("variant")
    assert runs.loc["baseline", "status"] == "failed", result.stdout + result.stderr
    assert "out of memory, try a smaller --batch-size" in runs.loc["baseline", "error"]
    assert runs.loc["loader", "status"] == "ok" and runs.loc["loader", "samples_per_s"] > 0
    assert "| loader |" in (out / "summary.md").read_text()


@pytest.mark.slow
def test_the_bench_runs_a_model_of_ones_own(tiny_data, tmp_path):
    out = tmp_path / "results"
    flags = ["--steps", 3, "--warmup-steps", 1, "--batch-size", 16, "--workers", 1, "--loaders", "none"]
    result = run("-m", "bench", "--data", tiny_data, "--out", out, "--model", EXAMPLE, "--variants", "baseline", *flags)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{EXAMPLE} on custom" in (out / "summary.md").read_text()


@pytest.mark.slow
def test_a_profiled_bench_with_a_power_counter_reports_operators_and_energy(tiny_data, tmp_path):
    """A fake RAPL counter that a thread drives at 20 W: every training run's row has the energy of its window
    at that power, the tables a J per 1k samples column, a technique's verdict its energy against the baseline's;
    round 1 is profiled, its traces beside the logs, and the technique's section in the report shows the operators it
    changed. channels_last: its runs take as long on a CPU of either class (as AVX2 computes, ATEN_CPU_CAPABILITY=avx2
    ONEDNN_MAX_CPU_ISA=AVX2, amp's bf16 made the test 27 s, channels_last 14 s; natively 13 s each)."""
    root = rapl(tmp_path / "powercap")
    going, started = threading.Event(), time.time()

    def drive():
        while not going.wait(0.01):
            set_uj(root, int(20e6 * (time.time() - started)))

    thread = threading.Thread(target=drive, daemon=True)
    thread.start()
    out = tmp_path / "results"
    flags = ["--variants", "baseline,channels_last", "--loaders", "none", "--repeats", 2, "--steps", 7]
    # shufflenet's steps, not the tiny model's (6 of them took ~10 ms, one update of the fake counter: one window read
    # 0 J); its windows of a few tenths of a second hold tens of updates
    flags += ["--warmup-steps", 1, "--batch-size", 16, "--workers", 1, "--model", SMALL_MODEL, "--profile"]
    try:
        result = run("-m", "bench", "--data", tiny_data, "--out", out, *flags, env={"BENCH_POWERCAP": str(root)})
    finally:
        going.set()
        thread.join()
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    runs = pd.read_csv(out / "runs.csv")
    # each window is a fraction of a second, the counter moves every 10 ms: each run within 15%, all of them within 5%
    assert (runs["avg_power_w"].between(17.0, 23.0)).all(), runs[["avg_power_w", "energy_source"]]
    assert 19.0 < runs["energy_j"].sum() / (runs["energy_j"] / runs["avg_power_w"]).sum() < 21.0
    assert runs["energy_source"].str.startswith("RAPL package-0").all()
    samples = runs["steps_timed"] * runs["global_batch_size"]
    assert (runs["energy_per_1k_samples_j"] - 1e3 * runs["energy_j"] / samples).abs().max() < 1e-6
    traced = runs[runs["profile_trace"].notna()]
    assert sorted(traced["run"]) == ["baseline-1", "channels_last-1"] and (traced["profile_steps"] == 3).all()
    logs = next((out / "logs").iterdir())
    assert sorted(p.name for p in logs.glob("*.pt.trace.json.gz")) == [
        "baseline-1.pt.trace.json.gz",
        "channels_last-1.pt.trace.json.gz",
    ]
    summary = (out / "summary.md").read_text()
    assert "J per 1k samples" in summary and "the energy per sample" in summary
    assert "J per 1,000 samples (RAPL package-0" in summary
    assert "Energy (J per 1k samples) over each run's timed window, from RAPL package-0" in summary
    html = (out / "report.html").read_text()
    assert "The operators whose time changed most" in html and "from RAPL package-0 (powercap" in html
    section = html.split('id="technique-channels_last"')[1].split("</section>")[0]
    assert "<td>cpu</td>" in section and ("faster" in section or "slower" in section)
    saved = json.loads((out / "profiles.json").read_text())["workloads"]["custom"]
    assert (
        set(saved) == {"baseline", "channels_last"}
        and saved["channels_last"]["trace"] == "channels_last-1.pt.trace.json.gz"
    )


@pytest.mark.slow
def test_a_bench_and_summarize_write_the_report(report, tmp_path):
    """--summarize writes it (the fixture's path is write_outputs, which every bench and --summarize call)."""
    shutil.copy(SAVED / "runs.csv", tmp_path / "runs.csv")
    assert cli.main(["--summarize", "--out", str(tmp_path)]) in (0, None)
    assert (tmp_path / "report.html").read_text().startswith("<!doctype html>")
    assert Path(SAVED / "report.html").exists()  # the saved baseline has its own


BENCH = ["--variants", "baseline", "--loaders", "none", "--repeats", 1, "--steps", 40, "--warmup-steps", 2]
BENCH += ["--batch-size", 16, "--workers", 0]


@pytest.mark.slow
@pytest.mark.alone
def test_a_bench_beside_a_cpu_hog_is_flagged_busy(tiny_data, tmp_path):
    quiet = run("-m", "bench", "--data", tiny_data, "--out", tmp_path / "quiet", *BENCH)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    row = pd.read_csv(tmp_path / "quiet" / "runs.csv").iloc[0]
    assert not row["busy"] and row["other_cpu_frac"] < 0.10, row[["other_cpu_frac", "busy_reason"]]
    assert "busy during" not in (tmp_path / "quiet" / "summary.md").read_text()
    hog = subprocess.Popen([PY, "-c", "while True: pass"], cwd=ROOT)
    try:
        loud = run("-m", "bench", "--data", tiny_data, "--out", tmp_path / "loud", *BENCH)
    finally:
        hog.kill()
    assert loud.returncode == 0, loud.stdout + loud.stderr
    row = pd.read_csv(tmp_path / "loud" / "runs.csv").iloc[0]
    assert row["busy"] and row["other_cpu_frac"] > 0.2 and "other processes used" in row["busy_reason"]
    assert "BUSY: other processes used" in loud.stdout
    assert "busy during 1 of 1 runs" in (tmp_path / "loud" / "summary.md").read_text()


CASTS = (
    "    def casts(module, inputs, out):  # new # every module's output to float64 and back, 16 times: casts, no gain\n"
    "        for _ in range(16):  # new #\n"
    "            out = out.double().float()  # new #\n"
    "        return out  # new #\n"
    "\n"
    "    for module in model.modules():  # new #\n"
    "        module.register_forward_hook(casts)  # new #\n"
)
CASTS_ROW = (
    '    Row("casts", "train_casts.py", base="train.py", lesson=12),  # made up by tests/e2e/test_bench_run.py\n'
)
WAITS = (
    "    slow = train_set.transform  # new # each training image 3 ms late: the loader, not the model, slower\n"
    '    train_set.transform = lambda image: (__import__("time").sleep(0.003), slow(image))[1]  # new #\n'
)
WAITS_ROW = (
    '    Row("waits", "train_waits.py", base="train.py", lesson=13),  # made up by tests/e2e/test_bench_run.py\n'
)
MODEL_LINE = "    model = build_model(args.model, info.num_classes, info.image_size).to(device)\n"


@pytest.mark.slow
@pytest.mark.minutes(1)
def test_causes_made_on_purpose_are_named_in_a_real_bench(tiny_data, tmp_path):
    """Why not faster, for real (bench/stages/statistics/causes.py), in a copy of the suite with two made-up techniques,
    profiled, with --workers 0 (the training process loads every batch itself) against the tiny model: train_waits.py
    (train.py whose every training image comes 3 ms late: 48 ms a batch of 16) is slower for its data, its compute per
    step as the baseline's; train_casts.py (train.py whose every module's output goes to float64 and back, 16 times) is
    slower for the conversions, while its compute per step grows (so the wait is not why). (dp, a passthrough on a CPU,
    once stood for the data: as fast as the baseline, it came out faster by chance, or by its place in the round, and
    was then not asked.)"""
    copy = tmp_path / "suite"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".*", "baseline", "data", "results", "docs", "*.png"))
    script = (ROOT / "train.py").read_text()
    assert MODEL_LINE in script
    (copy / "train_casts.py").write_text(script.replace(MODEL_LINE, MODEL_LINE + CASTS))
    (copy / "train_waits.py").write_text(script.replace(MODEL_LINE, MODEL_LINE + WAITS))
    catalogue = (copy / "bench" / "catalogue.py").read_text()
    end = "]  # fmt: skip\nBY_NAME"
    (copy / "bench" / "catalogue.py").write_text(catalogue.replace(end, CASTS_ROW + WAITS_ROW + end))
    out = tmp_path / "out"
    cmd = ["-m", "bench", "--data", tiny_data, "--out", out, "--variants", "baseline,synthetic,waits,casts"]
    cmd += ["--workers", "0", "--profile", "--loaders", "none", "--repeats", "2", "--steps", "6", "--warmup-steps", "1"]
    cmd += ["--batch-size", "16", "--model", TINY_MODEL]
    result = run(*cmd, cwd=copy)  # the bench of the copy, as a user's python -m bench there
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    summary = pd.read_csv(out / "summary.csv").set_index("variant")
    shown = ["cause", "speed_answer", "data_wait_frac", "convert_ms", "verdict"]
    waits, casts = summary.loc["waits"], summary.loc["casts"]
    assert waits["cause"] == "data" and "waiting for data: it waited for data" in waits["verdict"], waits[
        shown
    ].to_dict()
    assert casts["convert_ms"] > summary.at["baseline", "convert_ms"] >= 0, casts[shown].to_dict()
    assert casts["cause"] == "conversions", casts[shown].to_dict()
    assert "conversions and layout: casts and layout conversions take" in casts["verdict"]
    assert summary["cause"].drop(["waits", "casts"]).isna().all()  # the baseline and the ceiling are not asked
    assert "casts: conversions and layout" in (out / "summary.md").read_text()
