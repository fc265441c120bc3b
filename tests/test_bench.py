"""The bench runner: a tiny plan end to end, failed runs, interruption, and the baseline comparison."""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pandas as pd
import pytest

from bench import BenchError, cli
from bench.observe.sample import Sampler
from bench.outputs import markdown, verdicts
from bench.stages import baseline, record, summarize
from bench.stages.launch import launch
from bench.stages.plan import Run
from helpers import PY, ROOT, assert_no_orphans, fast_first, run

TINY = ["--steps", 3, "--warmup-steps", 1, "--batch-size", 16, "--loader-steps", 3, "--workers", 1]


def bench(data, out, *args, timeout=900):
    return run("-m", "bench", "--data", data, "--out", out, *TINY, *args, timeout=timeout)


@pytest.fixture(scope="module")
def tiny_bench(tiny_data, tmp_path_factory):
    """One small bench, as `make compare V=dp` runs it (the baseline and dp, paired; here also one loader benchmark),
    twice each, with TensorBoard's curves."""
    out = tmp_path_factory.mktemp("bench") / "results"
    args = ["--out", out, *TINY, "--loaders", "loader", "--repeats", 2, "--tensorboard"]
    make = ["make", "-s", "compare", "V=dp", f"PY={PY}", f"DATA={tiny_data}", "ARGS=" + " ".join(map(str, args))]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    result = subprocess.run(make, cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    return result, out


@pytest.mark.slow  # make and a fresh interpreter: 1.5 s each
@pytest.mark.parametrize("v,words", [("", "usage: make compare V=amp"), ("amq", "(did you mean 'amp'?)")])
def test_make_compare_without_a_technique_or_with_a_misspelt_one_is_one_line(v, words):
    result = subprocess.run(["make", "-s", "compare", f"V={v}", f"PY={PY}"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and words in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_tiny_bench_writes_every_table_and_plot(tiny_bench):
    result, out = tiny_bench
    assert result.returncode == 0, result.stdout + result.stderr
    runs = pd.read_csv(out / "runs.csv")
    assert list(runs.columns) == record.RUN_COLUMNS
    assert len(runs) == 6 and (runs["status"] == "ok").all()
    assert sorted(runs["run"]) == ["baseline-1", "baseline-2", "dp-1", "dp-2", "loader-1", "loader-2"]
    train = runs[runs["kind"] == "train"]
    assert (train["samples_per_s"] > 0).all() and (train["global_batch_size"] == 16).all()
    assert (train["steps_timed"] == 2).all()
    evaluated = train.set_index("run")["val_samples"]  # the first round evaluates, the second times the speed alone
    assert (evaluated[["baseline-1", "dp-1"]] == 40).all() and (evaluated[["baseline-2", "dp-2"]] == 0).all()
    assert train.set_index("run")["val_acc"][["baseline-2", "dp-2"]].isna().all()
    assert (runs["peak_host_mem_mib"] > 0).all() and runs["nvml_peak_mib"].isna().all()  # a CPU-only machine
    assert runs["git_commit"].notna().all() and runs["command"].str.contains("--metrics-out").all()
    summary = pd.read_csv(out / "summary.csv")
    by_variant = summary.set_index("variant")
    assert by_variant.loc["baseline", "speedup"] == 1.0 and by_variant.loc["loader", "speedup"] == 1.0
    rate = train.set_index(["variant", "repeat"])["samples_per_s"]  # paired: dp over the baseline of its round
    ratios = [rate[("dp", r)] / rate[("baseline", r)] for r in (1, 2)]
    assert by_variant.loc["dp", "speedup"] == pytest.approx(math.sqrt(ratios[0] * ratios[1]))
    assert by_variant.loc["dp", "rounds_paired"] == 2 and by_variant.loc["dp", "speed_answer"] in summarize.ANSWERS
    assert by_variant.loc["baseline", "runs_ok"] == 2
    for plot in "throughput.png", "memory.png", "tradeoff.png", "time.png", "curves.png":
        assert (out / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    learned = json.loads((out / "curves.json").read_text())["runs"]  # every training run's curves, no loader's
    assert sorted(learned) == ["baseline-1", "baseline-2", "dp-1", "dp-2"]
    assert all([step for step, _ in r["loss"]] == [3] and len(r["val"]) == 1 for r in learned.values())
    bench_id = runs["bench_id"].iloc[0]
    assert sorted(p.name for p in (out / "logs" / bench_id / "tensorboard").iterdir()) == sorted(learned)
    assert f"tensorboard --logdir {out / 'logs' / bench_id / 'tensorboard'}" in result.stdout
    text = (out / "summary.md").read_text()
    assert "| baseline |" in text and "- baseline: the reference" in text and "- dp: " in text
    assert by_variant.loc["dp", "verdict"] in text and by_variant.loc["dp", "verdict"] in result.stdout
    assert list(runs["run"])[:3] == ["baseline-1", "dp-1", "loader-1"]  # the first round in priority order
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
    runs = pd.read_csv(out / "runs.csv").set_index("variant")
    assert runs.loc["ddp", "status"] == "failed" and "does not split evenly" in runs.loc["ddp", "error"]
    assert runs.loc["baseline", "status"] == "ok"
    summary = pd.read_csv(out / "summary.csv").set_index("variant")
    assert summary.loc["ddp", "runs_failed"] == 1 and summary.loc["baseline", "runs_ok"] == 1


def wait_for_rows(path, rows, deadline):
    while time.time() < deadline:
        if path.exists() and len(path.read_text().splitlines()) > rows:
            return
        time.sleep(0.5)
    raise AssertionError(f"{path} did not get {rows} rows in time")


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


def fake_run(tmp_path, code, kind="train"):
    """A Run whose command is a Python snippet; it gets --metrics-out PATH like a real script."""
    script = tmp_path / "fake.py"
    script.write_text("import json, sys, time\npath = sys.argv[sys.argv.index('--metrics-out') + 1]\n" + code)
    return Run("fake-1", "fake", kind, 1, 1, [sys.executable, str(script)])


@pytest.mark.parametrize(
    "code,error",
    fast_first(
        [
            ("print('train.py: error: something named'); sys.exit(2)", "train.py: error: something named"),
            ("raise RuntimeError('boom')", "RuntimeError: boom"),
            ("time.sleep(60)", "timed out after 3 s"),
            ("open(path, 'w').write('{not json')", "no readable metrics"),
            ("json.dump({'samples_per_s': float('nan')}, open(path, 'w'))", "samples_per_s"),
            ("json.dump({'samples_per_s': 5, 'steps_timed': 2}, open(path, 'w'))", "compute_samples_per_s"),
            ("pass", "no readable metrics"),
        ]
    ),
)
def test_a_bad_run_becomes_a_failed_row(tmp_path, code, error):
    row = launch(fake_run(tmp_path, code), tmp_path, timeout=3, stop=threading.Event())
    assert row["status"] == "failed" and error in row["error"], row["error"]


def test_a_good_run_becomes_a_row_with_its_metrics(tmp_path):
    code = "json.dump({'samples_per_s': 123.0, 'argv': ['x']}, open(path, 'w'))"
    row = launch(fake_run(tmp_path, code, kind="loader"), tmp_path, timeout=30, stop=threading.Event())
    assert row["status"] == "ok" and row["samples_per_s"] == 123.0 and row["error"] is None
    assert row["wall_s"] > 0 and row["runner_cpu_s"] >= 0 and row["memory_samples"] >= 1


@pytest.mark.slow
def test_concurrent_writers_do_not_tear_rows(tmp_path):
    path = tmp_path / "runs.csv"
    code = (
        "import sys; from bench.outputs import markdown; from bench.stages import record, summarize\n"
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


def test_baseline_comparison_reports_the_right_ratios(tmp_path):
    work = dict(
        device="cuda", model="resnet18", dataset="generated", image_size=32, global_batch_size=256, steps_timed=100
    )
    saved = pd.DataFrame(
        [
            dict(kind="train", variant="baseline", rate_median=1000.0, nvml_peak_mib=2000.0, **work),
            dict(kind="train", variant="amp", rate_median=2000.0, nvml_peak_mib=1500.0, **work),
        ]
    )
    now = saved.copy()
    now["rate_median"] = [1100.0, 1500.0]
    now["nvml_peak_mib"] = [1000.0, 1500.0]
    saved.to_csv(tmp_path / "summary.csv", index=False)
    (tmp_path / "machine.json").write_text(json.dumps({}))
    lines = baseline.compare(now, baseline.load(".", baseline_dir=tmp_path))
    assert lines == [
        "baseline: 1,100.0 samples/s, +10.0% against 1,000.0, GPU memory (NVML) 0.50x",
        "amp: 1,500.0 samples/s, -25.0% against 2,000.0, GPU memory (NVML) 1.00x",
    ]
    other_work = now.assign(global_batch_size=512)
    assert baseline.compare(other_work, saved) == []


@pytest.mark.slow
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
    assert len(runs) == 8 and runs["bench_id"].nunique() == 2
    assert list(pd.read_csv(copy / "summary.csv")["variant"]) == ["baseline", "loader"]  # the summary: the last bench


COPY_ON_WRITE = """
import os, time
block = bytearray(100 * 2**20)  # resident: written as zeros
for i in range(0, len(block), 4096):
    block[i] = 1
if os.fork() == 0:  # the child shares the block until it writes to it: RSS stays, PSS grows
    for i in range(0, len(block), 4096):
        block[i] = 2
        if i % (20 * 2**20) == 0:
            time.sleep(0.1)
    time.sleep(1.0)
    os._exit(0)
os.wait()
"""


def test_host_memory_counts_pages_copied_after_a_fork(tmp_path):
    """A forked worker (a DataLoader's) that writes to what it shares: the tree's PSS doubles while its RSS does not
    move. In the fast tests: a run's memory is its whole tree's."""
    job = subprocess.Popen([PY, "-c", COPY_ON_WRITE])
    sampler = Sampler(job.pid)
    sampler.start()
    job.wait(timeout=60)
    peak = sampler.stop()["peak_host_mem_mib"]
    assert peak > 190, f"peak PSS {peak:.0f} MiB: the child's 100 MiB of copied pages were missed"


@pytest.mark.slow
def test_the_runner_does_not_import_torch():
    """Its libraries would be shared with every run, which would then be charged only half of them (PSS)."""
    probe = "import sys; from bench import cli; from bench.observe import machine; machine.machine_info()\n"
    probe += "print('torch' in sys.modules)"
    result = run("-c", probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_flags_are_read_before_the_machine_is_probed(monkeypatch, capsys):
    """--help and a bad flag cost no torch import: the machine (torch, NVML, git) is looked at only to run."""

    def probe():
        raise AssertionError("the machine was probed")

    monkeypatch.setattr(cli, "machine_info", probe)
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0 and "--variants" in capsys.readouterr().out
    with pytest.raises(BenchError, match="unknown variant 'nosuch'"):
        cli.main(["--variants", "nosuch"])


@pytest.mark.parametrize(
    "args,words",
    fast_first(
        [
            (["--variants", "nosuch"], "unknown variant 'nosuch': choose from"),
            (["--variants", "baseline,chanels_last"], "unknown variant 'chanels_last' (did you mean 'channels_last'?)"),
            (["--loaders", "loader_dal"], "unknown loader benchmark 'loader_dal' (did you mean 'loader_dali'?)"),
            (["--variants", "all:no-foo"], "variant 'all:no-foo': unknown switch 'no-foo'"),
            (["--variants", "all:no-amp:no-amp"], "variant 'all:no-amp:no-amp': each switch once"),
            (["--variants", "all:no-ddp:no-amp:no-channels-last:no-compile"], "each switch once, and not all of them"),
            (["--variants", "all:"], "variant 'all:': unknown switch ''"),
            (["--variants", "baseline,amp,baseline"], "--variants names a row twice"),
            (["--loaders", "nosuch"], "unknown loader benchmark 'nosuch'"),
            (["--repeats", "0"], "--repeats must be >= 1"),
            (["--repeats", "some"], "--repeats: invalid value 'some': a number of rounds, or auto"),
            (["--readme", "--summarize"], "--summarize and --readme are two modes: give one"),
            (["--steps", "5", "--warmup-steps", "5"], "--warmup-steps 5 leaves none of the 5 steps"),
            (["--batch-size", "two"], "--batch-size: invalid int value"),
            (["--data", "/no/such/folder"], "data folder /no/such/folder does not exist"),
            (["--summarize", "--out", "/no/such/results"], "no /no/such/results/runs.csv"),
            (["--budget", "abc"], "--budget: invalid value 'abc': minutes, or none"),
            (["--budget", "0"], "--budget: 0: minutes above 0"),
            (["--budget", "-5"], "--budget: -5: minutes above 0"),
            (["--chunk", "0"], "--chunk 0: minutes above 0"),
            (["--chunk", "x"], "--chunk: invalid float value: 'x'"),
            (["--check", "--resume"], "--resume and --check are two modes: give one"),
            (["--check", "--summarize"], "--summarize and --check are two modes: give one"),
            (
                ["--dry-run", "--gpus", "2", "--nproc", "4", "--workload", "small"],
                "--nproc 4: DDP runs one process per GPU",
            ),
        ]
    ),
)
def test_bad_bench_input_is_one_line(args, words):
    result = run("-m", "bench", *args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("bench: error: ") and words in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_bad_data_is_found_before_the_first_run(tiny_data, tmp_path):
    data = tmp_path / "data"
    (data / "train" / "a").mkdir(parents=True)
    result = run("-m", "bench", "--data", data, "--out", tmp_path / "out")
    assert result.returncode == 2 and "the data cannot be used" in result.stderr and "val" in result.stderr
    assert not (tmp_path / "out" / "runs.csv").exists()


def fake_rows(workload, rates, **common):
    """Rows of runs.csv for one workload: {variant: rate}, two repeats each (rate and rate * 1.1)."""
    rows = []
    for variant, rate in rates.items():
        synthetic = variant.endswith("synthetic")
        amp = "bf16" if variant.startswith("amp") else None
        dataset = "synthetic" if synthetic else "generated"
        for repeat, r in enumerate((rate, rate * 1.1), 1):
            row = dict(workload=workload, kind="train", variant=variant, status="ok", samples_per_s=r, busy=False)
            row["repeat"] = repeat
            rows.append(dict(row, dataset=dataset, amp_dtype=amp, **common))
    return rows


def test_each_workload_is_summarized_against_its_own_baseline_and_ceilings():
    runs = pd.DataFrame(
        fake_rows("small", {"baseline": 100.0, "amp": 150.0, "synthetic": 200.0, "amp-synthetic": 300.0})
        + fake_rows("imagenet", {"baseline": 10.0, "amp": 30.0, "synthetic": 20.0, "amp-synthetic": 40.0})
    ).reindex(columns=record.RUN_COLUMNS)
    summary = verdicts.summary(runs).set_index(["workload", "variant"])
    assert summary.loc[("small", "amp"), "speedup"] == pytest.approx(1.5)
    assert summary.loc[("imagenet", "amp"), "speedup"] == pytest.approx(3.0)
    assert summary.loc[("small", "baseline"), "ceiling"] == "synthetic"
    assert summary.loc[("small", "baseline"), "ceiling_pct"] == pytest.approx(50.0)
    assert summary.loc[("imagenet", "amp"), "ceiling"] == "amp-synthetic"  # mixed precision against its own
    assert summary.loc[("imagenet", "amp"), "ceiling_pct"] == pytest.approx(75.0)
    assert pd.isna(summary.loc[("small", "synthetic"), "ceiling_pct"])  # a ceiling is not read against itself
    text = markdown.markdown(verdicts.summary(runs), {"small": "A", "imagenet": "B"}, "now")
    assert text.index("### A (now)") < text.index("| synthetic (ceiling) |") < text.index("### B (now)")


@pytest.mark.parametrize(
    "row,label",
    [
        (dict(variant="dp", device="cuda", dp_devices=1), "dp (1 GPU: overhead only)"),
        (dict(variant="dp", device="cuda", dp_devices=4), "dp"),
        (dict(variant="ddp", device="cuda", world_size=1), "ddp (1 GPU: overhead only)"),
        (dict(variant="ddp", device="cuda", world_size=8), "ddp"),
        (dict(variant="ddp", device="cpu", world_size=2), "ddp"),
        (dict(variant="dp", device="cpu", dp_devices=0), "dp (no GPU: a passthrough)"),
        (dict(variant="synthetic", device="cuda", dataset="synthetic"), "synthetic (ceiling)"),
    ],
)
def test_rows_say_what_they_can_show(row, label):
    assert markdown.label(pd.Series(dict(dataset="generated", world_size=1, dp_devices=None) | row)) == label


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
    for name in baseline.MODE_OUTPUTS:
        (out / name).write_text(f"new {name}\n")
    result = run("-m", "bench", "--out", out, "--save-baseline", "cpu-x", "--baseline-dir", saved)
    assert result.returncode == 0, result.stderr
    modes = ("accuracy", "max_batch", "scaling", "parity", "tune_loader")
    assert f"saved {', '.join(f'{out}/{mode}.*' for mode in modes)} as {folder}" in result.stdout
    for name in baseline.MODE_OUTPUTS:
        assert (folder / name).read_text() == f"new {name}\n"
    for name in "summary.csv", "runs.csv", "machine.json":
        assert (folder / name).read_text() == f"the saved {name}\n"
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run("-m", "bench", "--out", empty, "--save-baseline", "cpu-x", "--baseline-dir", saved)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "(nor a table of --to-accuracy, --max-batch or --scaling) to save" in result.stderr
