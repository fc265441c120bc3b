"""bench/modes/max_batch.py (--max-batch): doubling then bisecting, the step-down on a failure, the estimate, each
variant timed at its largest batch, memory.png."""

import pandas as pd
import pytest

from bench import modes
from bench.config import Config, Limits, Outputs
from bench.modes import max_batch
from bench.stages.planning.planned import Run, Work
from bench.stages.running import execute
from bench.stages.statistics import intervals
from helpers import run


def fake_probes(monkeypatch, fits_up_to, other_error=None, train_size=100_000):
    """launch() made up: a probe fits up to fits_up_to images, runs out of memory above, and fails for
    other_error at any batch when given. Returns the batches probed."""
    probed = []

    def launch(run, log_dir, timeout, stop, tensorboard=False, memory_limit_mib=None):
        batch = int(run.cmd[len(run.cmd) - run.cmd[::-1].index("--batch-size")])  # the last --batch-size wins
        probed.append(batch)
        if other_error:
            return dict(status="failed", error=other_error)
        if batch > train_size:
            error = f"train.py: error: --batch-size {batch} is larger than the training set ({train_size} images)"
            return dict(status="failed", error=error)
        if batch > fits_up_to:
            return dict(status="failed", error="train.py: error: out of memory, try a smaller --batch-size: ...")
        return dict(status="ok", samples_per_s=100.0)

    monkeypatch.setattr(execute, "launch", launch)
    return probed


class Job:
    """The executor's job (bench/stages/running/execute.py), its launch the one monkeypatched into
    bench.stages.running.execute."""

    def over(self):
        return False

    def launch(self, run, **options):
        return execute.launch(run, None, 60, None, **options)


def search(processes=1, start=64):
    job = Run("baseline-1", "baseline", "train", 1, processes, ["train.py", "--batch-size", str(start)])
    return max_batch.search(job, start, 4500, Job())


def flag_of(run, name):
    return int(run.cmd[len(run.cmd) - run.cmd[::-1].index(name)])  # the last one wins


def test_doubling_then_bisecting_ends_within_a_step(monkeypatch):
    probed = fake_probes(monkeypatch, fits_up_to=300)
    fits, fails, why, probes, error = search()
    assert (fits, why, error) == (288, "out of memory", None) and fits <= 300 < fails
    assert fails - fits <= max_batch.step(fits) and probes == len(probed)
    assert probed[:4] == [64, 128, 256, 512]  # doubling from the plan's batch


def test_a_start_that_does_not_fit_halves_first(monkeypatch):
    probed = fake_probes(monkeypatch, fits_up_to=20)
    fits, fails, why, _, _ = search()
    assert probed[:3] == [64, 32, 16] and fits <= 20 < fails and fails - fits <= max_batch.step(fits)


def test_ddp_batches_split_evenly_over_its_processes(monkeypatch):
    probed = fake_probes(monkeypatch, fits_up_to=301)
    fits, fails, _, _, _ = search(processes=2)
    assert all(batch % 2 == 0 for batch in probed) and fits <= 301 < fails


def test_the_training_set_caps_the_batch(monkeypatch):
    fake_probes(monkeypatch, fits_up_to=10**9, train_size=1000)
    fits, fails, why, _, _ = search()
    assert why == "the training set's size" and fits <= 1000 < fails


@pytest.mark.parametrize("fits_up_to,why", [(0, "even the smallest batch does not fit")])
def test_nothing_fits(monkeypatch, fits_up_to, why):
    fake_probes(monkeypatch, fits_up_to=fits_up_to)
    assert search()[:3] == (None, 1, why)


def test_another_failure_stops_the_search_and_is_said(monkeypatch):
    fake_probes(monkeypatch, fits_up_to=300, other_error="train.py: error: model x cannot take 32 px images")
    fits, _, why, probes, error = search()
    assert (fits, why, probes) == (None, "a probe failed", 1) and "cannot take 32 px" in error


@pytest.mark.slow  # a process each (5 s): the one-line rule in make test-fast is test_cli's and test_modes'
@pytest.mark.parametrize(
    "flags,words",
    (
        [
            (["--memory-limit", "4000"], "--memory-limit goes with --max-batch"),
            (["--max-batch"], "--max-batch on a CPU needs --memory-limit MIB"),
            (["--max-batch", "--memory-limit", "0"], "--memory-limit 0: MiB, 1 or more"),
            (["--max-batch", "--memory-limit", "lots"], "invalid int value: 'lots'"),
            (["--max-batch", "--summarize"], "are two modes: give one"),
            (["--max-batch", "--tensorboard", "--memory-limit", "4000"], "--tensorboard goes with a bench or --resume"),
            (["--max-batch", "--variants", "synthetic", "--memory-limit", "4000"], "--max-batch searches training"),
        ]
    ),
)
def test_bad_flags_are_one_line(flags, words, tiny_data, tmp_path):
    result = run("-m", "bench", "--data", tiny_data, "--out", tmp_path / "out", "--loaders", "none", *flags)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and words in result.stderr, result.stderr
    assert not (tmp_path / "out" / "max_batch.csv").exists()


@pytest.mark.slow
def test_a_gpu_plan_shows_the_mode_and_its_time(tiny_data):
    flags = ("--data", tiny_data, "--loaders", "none", "--batch-size", 16)
    result = run("-m", "bench", "--max-batch", "--dry-run", "--gpus", 1, *flags)
    assert result.returncode == 0, result.stderr
    assert "max batch: 9 variants, about " in result.stdout and "min (22 cold compiles of about " in result.stdout
    assert "  baseline: " in result.stdout and "train.py --data" in result.stdout and "--batch-size N" in result.stdout


def test_memory_png_says_each_rows_largest_batch_from_the_same_workload_and_model(monkeypatch, tmp_path, capsys):
    """A --max-batch table beside the bench's (max_batch.csv) joins the bench's summary (the mode's joins) and puts
    each row's largest batch on memory.png, for the rows of its workload and model only; a table of another model
    adds nothing, and one from before it named its model is read as the bench's one workload and model's, or, where
    the bench trained several, said once and left out."""
    from bench.outputs import plots

    summary = pd.DataFrame(
        dict(workload=["small", "small", "small", "big"], variant=["baseline", "checkpoint", "amp", "checkpoint"])
    ).assign(kind="train", runs_ok=3, model=["resnet18"] * 3 + ["resnet50"], peak_host_mem_mib=[900.0, 600, 800, 2e3])
    summary = summary.assign(nvml_peak_mib=None, peak_mem_allocated_mib=None, peak_mem_reserved_mib=None)
    table = pd.DataFrame(dict(variant=["baseline", "checkpoint"], max_batch=[176, 308], batch_vs_baseline=[1, 1.75]))
    (tmp_path / "max_batch.csv").write_text(table.to_csv(index=False))
    assert (
        max_batch.numbers(summary, tmp_path) is summary and "goes on without --max-batch's" in capsys.readouterr().err
    )
    one = summary[summary["workload"] == "small"]  # one workload and model: the older table's, read by its version
    assert [max_batch.mark(row) for _, row in max_batch.numbers(one, tmp_path).iterrows()] == [
        "largest batch 176 (1.00x)",
        "largest batch 308 (1.75x)",
        "",
    ]
    assert capsys.readouterr().err == ""
    assert max_batch.numbers(summary, tmp_path / "missing") is summary
    table = table.assign(workload="small", model="resnet18")
    (tmp_path / "max_batch.csv").write_text(table.to_csv(index=False))
    joined = max_batch.numbers(summary, tmp_path)
    assert [max_batch.mark(row) for _, row in joined.iterrows()] == [
        "largest batch 176 (1.00x)",
        "largest batch 308 (1.75x)",
        "",
        "",
    ]
    drawn = []
    monkeypatch.setattr(plots, "save", lambda fig, path: drawn.append(fig))
    plots.plot_memory(joined, tmp_path / "memory.png", {"small": "small", "big": "big"}, (max_batch.JOINS,))
    small, big = drawn[0].axes
    assert [t.get_text() for t in small.texts] == [" largest batch 176 (1.00x)", " largest batch 308 (1.75x)"]
    assert "largest batch: --max-batch" in small.get_xlabel() and not big.texts  # another model: none
    drawn.clear()
    bare = summary.assign(**dict.fromkeys(max_batch.JOINS.fields))  # a summary without the table: its fields None
    plots.plot_memory(bare, tmp_path / "memory.png", {"small": "small", "big": "big"}, (max_batch.JOINS,))
    assert not any(ax.texts for ax in drawn[0].axes) and "largest batch" not in drawn[0].axes[0].get_xlabel()


@pytest.mark.parametrize(
    "steps,train_size,timed",
    [
        (905, 50_000, 28),  # the plan's 875 timed steps of 256 are 28 of 8,192: the same seconds, not 32x them
        (2030, 400_000, 46),  # 63 would run past the epoch of 48 steps: the run stays inside it
        (905, None, 28),  # a training set of unknown size: no cap
        (40, 50_000, 10),  # the plan's 10 timed steps would be one: MIN_TIMED
    ],
)
def test_the_run_at_the_largest_batch_is_sized_for_it(monkeypatch, tmp_path, steps, train_size, timed):
    """A GPU's plan (batch 256, calibrated steps, 30 warm-up) and a largest batch of 8,192: the measured run times the
    plan's window in seconds, warms up 2 steps, evaluates the plan's sample, and keeps inside an epoch where one holds
    it. Its launch is stubbed: which run is made is what is tested."""
    probed = fake_probes(monkeypatch, fits_up_to=8192)
    made = []
    stub = execute.launch
    monkeypatch.setattr(execute, "launch", lambda run, *a, **k: made.append(run) or stub(run, *a, **k))
    cmd = ["train.py", "--batch-size", "256", "--steps", str(steps), "--warmup-steps", "30", "--eval-samples", "2000"]
    job = Run("baseline-1", "baseline", "train", 1, 1, [*cmd, "--model", "resnet18"], "small")
    work = Work(
        batch_size=256, steps=steps, warmup_steps=30, eval_samples=2000, train_size=train_size, data=str(tmp_path)
    )
    asked = Config(mode="max_batch", outputs=Outputs(out=tmp_path), own=max_batch.Flags(memory_limit=None))
    info = dict(gpu_count=1, gpu_name="H100", machine_class="gpu-test")
    max_batch.main(asked, info, [job], tmp_path / "logs" / "b1", dict(small=work))
    *probes, measured = made
    assert probes and all(r.name.startswith("baseline-batch") for r in probes) and len(probes) == len(probed) - 1

    def flag(name):
        return int(measured.cmd[len(measured.cmd) - measured.cmd[::-1].index(name)])  # the last one wins

    assert measured.name == "baseline-at-8192" and flag("--batch-size") == 8192
    assert flag("--warmup-steps") == 2 and flag("--steps") == 2 + timed and flag("--eval-samples") == 2000
    table = pd.read_csv(tmp_path / "max_batch.csv")
    assert table.loc[0, "max_batch"] == 8192 and table.loc[0, "samples_per_s"] == 100


def test_the_estimate_counts_a_cold_compile_in_every_probe_of_a_compiled_variant():
    runs = [Run(f"{v}-1", v, "train", 1, 1, []) for v in ("baseline", "compile", "all:no-compile", "all")]
    gpu = max_batch.estimate_s(runs, True, max_batch.PROBES)
    cold = max_batch.cost.COST_S["gpu"]["cold"]
    assert gpu == 4 * 11 * max_batch.PROBE_S["gpu"] + 2 * 11 * cold
    said = max_batch.say_estimate(runs, True, budget_s=2 * 11 * max_batch.PROBE_S["gpu"] + 11 * cold + 100)
    assert f"about {gpu / 60:.0f} min (22 cold compiles of about {cold:.0f} s" in said
    assert said.endswith("which reaches about 2: baseline, compile")  # the third would pass the budget


def test_each_variant_is_timed_at_its_largest_batch_in_paired_rounds(monkeypatch, tmp_path):
    """After the searches, --repeats rounds at each variant's own largest batch, the order reversed every other round;
    the speed against the baseline's at its own largest batch is paired by round (a drift that slows a whole round
    cancels), with its interval and answer. A round that runs out of memory at the batch found steps down, and the
    later rounds train the lower batch. Launches are made up: what is run, and what is made of it, is tested."""
    limits, rates = dict(baseline=300, checkpoint=600), dict(baseline=100.0, checkpoint=130.0)
    drift = {1: 1.0, 2: 0.8, 3: 1.1}  # a round's machine speed: both variants alike
    noise = {("checkpoint", 2): 1.02, ("checkpoint", 3): 0.98}  # and a little of the checkpoint's own
    made, flaky = [], {"baseline-largest-r1"}  # the baseline's first round runs out of memory at the batch found

    def launch(run, log_dir, timeout, stop, tensorboard=False, memory_limit_mib=None):
        made.append(run)
        batch = flag_of(run, "--batch-size")
        if batch > limits[run.variant] or (run.name in flaky and batch == 288):
            return dict(status="failed", error="train.py: error: out of memory, try a smaller --batch-size", wall_s=1)
        rate = rates[run.variant] * drift.get(run.repeat, 1.0) if max_batch.timed(run) else rates[run.variant]
        rate *= noise.get((run.variant, run.repeat), 1.0) if max_batch.timed(run) else 1.0
        return dict(status="ok", samples_per_s=rate, wall_s=1.0)

    monkeypatch.setattr(execute, "launch", launch)
    work = Work(batch_size=64, steps=40, warmup_steps=5, eval_samples=500, train_size=100_000, data=str(tmp_path))
    jobs = [Run(f"{v}-1", v, "train", 1, 1, [f"train_{v}.py"], "small", model="net", batch_size=64,
                flags={"--batch-size": "64"}) for v in ("baseline", "checkpoint")]  # fmt: skip
    asked = Config(mode="max_batch", limits=Limits(repeats=3), outputs=Outputs(out=tmp_path),
                   own=max_batch.Flags(memory_limit=4500))  # fmt: skip
    info = dict(gpu_count=0, machine_class="cpu-test", cpu_cores=2)
    max_batch.main(asked, info, jobs, tmp_path / "logs" / "b1", dict(small=work))
    rounds = [r for r in made if max_batch.timed(r)]
    assert [r.name for r in rounds] == ["baseline-largest-r1", "baseline-largest-r1", "checkpoint-largest-r1",
                                        "checkpoint-largest-r2", "baseline-largest-r2", "baseline-largest-r3",
                                        "checkpoint-largest-r3"]  # fmt: skip
    assert [flag_of(r, "--batch-size") for r in rounds] == [288, 252, 576, 576, 252, 252, 576]
    # sized as the run at the largest batch (sized_run): the plan's 35 timed steps of 64 are 8 of 288, MIN_TIMED 10
    assert all((flag_of(r, "--warmup-steps"), flag_of(r, "--steps")) == (2, 12) for r in rounds)
    table = pd.read_csv(tmp_path / "max_batch.csv").set_index("variant")
    assert (
        table.loc["baseline", "max_batch"] == 252
        and table.loc["baseline", "why_it_stops"] == "out of memory in a round"
    )
    assert table.loc["checkpoint", "max_batch"] == 576 and table.loc["checkpoint", "rounds"] == 3
    ratios = [1.3, 1.3 * 1.02, 1.3 * 0.98]  # the drift cancels in each pair
    found = tuple(table.loc["checkpoint", ["speed_vs_baseline", "speed_low", "speed_high"]])
    assert found == pytest.approx(intervals.interval(ratios)) and table.loc["checkpoint", "speed_answer"] == "faster"
    text = (tmp_path / "max_batch.md").read_text()
    assert "in 3 paired rounds" in text and "| checkpoint | 576 |" in text
    low, high = found[1:]
    assert (
        f"at 1.30x its speed at its own, faster (95% interval {low:.2f}x to {high:.2f}x over 3 paired rounds)" in text
    )


def test_a_bench_beside_the_rounds_says_what_a_row_is_at_its_largest_batch(tmp_path):
    """A max_batch.csv with rounds in the bench's results folder: a row slower at the bench's batch but faster at its
    own largest says so in the answer, its verdict and the table; a row whose answer does not change keeps its
    answer's words; rows of another model are not joined."""
    from bench.modes import speed
    from bench.outputs import headline, markdown
    from helpers import STEADY, runs_of

    slow = [(rate * 0.7, {"peak_host_mem_mib": 700}) for rate, _ in STEADY]  # slower, for less memory
    runs = runs_of({"baseline": STEADY, "checkpoint": slow, "amp": [(rate * 1.5, {}) for rate, _ in STEADY]})
    table = pd.DataFrame(dict(variant=["baseline", "checkpoint", "amp"], max_batch=[252, 576, 300],
                              batch_vs_baseline=[1.0, 576 / 252, 300 / 252], speed_vs_baseline=[1.0, 1.3, 1.6],
                              speed_low=[None, 1.2, 1.5], speed_high=[None, 1.4, 1.7],
                              speed_answer=[None, "faster", "faster"], rounds=[3, 3, 3]))  # fmt: skip
    (tmp_path / "max_batch.csv").write_text(table.assign(workload="small", model="net").to_csv(index=False))
    summary = speed.summary_of(runs, tmp_path).set_index("variant")
    assert summary.loc["checkpoint", "largest_answer"] == "faster" and summary.loc["checkpoint", "largest_batch"] == 576
    assert "at its largest batch (576, 2.29x the baseline's) 1.30x the baseline's speed at the baseline's own largest" \
        " (95% interval 1.20x to 1.40x): faster (max_batch.md)" in summary.loc["checkpoint", "verdict"]  # fmt: skip
    said = dict(headline.items(summary.reset_index(), modes.joined()))
    assert said["Trades speed for memory"].startswith("checkpoint 0.70x (1.30x at its largest batch: faster)")
    assert said["Pays"].startswith("amp 1.50x,")  # faster at both batches: nothing added
    cells = dict(markdown.train_columns(summary.reset_index(), modes.joined()))
    assert cells["at its largest batch (--max-batch)"](summary.loc["checkpoint"]) == (
        "1.30x (1.20x to 1.40x), faster, at 2.29x the batch"
    )
    (tmp_path / "max_batch.csv").write_text(table.assign(workload="small", model="other").to_csv(index=False))
    assert speed.summary_of(runs, tmp_path)["largest_answer"].isna().all()
