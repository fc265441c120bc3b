"""End to end: each mode run for real on tiny data (--to-accuracy, --max-batch, --parity, --scaling, --tune-loader)."""

import json
import os
import shutil

import pandas as pd
import pytest

from bench.modes import max_batch, parity, scaling
from bench.stages.statistics import rules
from helpers import ROOT, TINY_MODEL, run, train

LIMIT_MIB = 4500  # torch takes about 4 GB of address space here: batches of a few hundred 32 px images fit


BROADCAST = (
    "        for tensor in model.state_dict().values():  # every process starts from rank 0's weights (DDP does this"
    " too)\n            dist.broadcast(tensor, src=0)\n"
)


@pytest.mark.slow
def test_the_mode_times_each_variant_to_the_target_and_says_which_did_not_get_there(small_data, tiny_data, tmp_path):
    flags = ("--model", TINY_MODEL, "--batch-size", 64, "--loaders", "none", "--workers", 1)  # any model beats 2%
    out = tmp_path / "reached"
    reach = run("-m", "bench", "--to-accuracy", 0.02, "--max-epochs", 2, "--data", small_data, "--out", out,
                "--variants", "baseline,channels_last", *flags)  # fmt: skip
    assert reach.returncode == 0, reach.stdout + reach.stderr
    table = pd.read_csv(out / "to_accuracy.csv").set_index("variant")
    assert table["reached"].all() and (table["epochs"] == 1).all()  # any model beats 2% on 10 classes
    assert table.loc["baseline", "speedup"] == 1.0 and table.loc["channels_last", "speedup"] > 0
    assert (table["train_s"] < table["wall_s"]).all()
    assert (out / "to_accuracy_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    logs = next((out / "logs").iterdir()) / "to-accuracy"
    assert len(json.loads((logs / "baseline-1.json").read_text())["val_curve"]) == 1  # it stopped there
    out = tmp_path / "not"
    never = run("-m", "bench", "--to-accuracy", 1.0, "--max-epochs", 1, "--data", tiny_data, "--out", out,
                "--variants", "baseline", *flags[:2], "--batch-size", 16, "--loaders", "none")  # fmt: skip
    assert never.returncode == 0, never.stdout + never.stderr
    row = pd.read_csv(out / "to_accuracy.csv").iloc[0]
    assert not row["reached"] and row["epochs"] == 1 and pd.isna(row["train_s"])
    assert "baseline: did NOT reach 1 in 1 epochs" in (out / "to_accuracy.md").read_text()


@pytest.mark.slow
@pytest.mark.minutes(2)
def test_the_largest_batch_found_is_confirmed_by_direct_probes(small_data, tmp_path):
    """On a CPU, for real: under the limit, a bisection step below the batch found trains, and a step above the first
    that failed runs out of memory; the baseline is then timed at its largest batch. The baseline alone: the rounds
    that pair each variant's speed at its own largest batch with the baseline's are made of the same launches, and are
    tested on made-up ones (tests/bench/modes/test_max_batch.py: the order, the step-down in a round, the interval)."""
    out = tmp_path / "results"
    args = ("--variants", "baseline", "--loaders", "none", "--workers", 0, "--steps", 6, "--warmup-steps", 1)
    args += ("--batch-size", 128)  # the doubling starts nearer the limit
    result = run("-m", "bench", "--max-batch", "--memory-limit", LIMIT_MIB, "--data", small_data, "--out", out, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    table = pd.read_csv(out / "max_batch.csv").set_index("variant")
    assert "no more rounds: no round at the largest batches: the baseline's and another's are needed" in result.stdout
    assert table.loc["baseline", "why_it_stops"] in ("out of memory", "out of memory in a whole run")
    (measured,) = out.glob("logs/*/max-batch/baseline-at-*.json")  # the run at the largest batch, sized for it
    assert measured.name == f"baseline-at-{int(table.loc['baseline', 'max_batch'])}.json"
    found, failed = int(table.loc["baseline", "max_batch"]), int(table.loc["baseline", "first_failed_batch"])
    assert 64 < found < 1000 and failed - found <= max_batch.step(failed)  # small_data: 1000 training images
    assert table.loc["baseline", "samples_per_s"] > 0 and table.loc["baseline", "probes"] >= 3
    assert table.loc["baseline", "model"] == "shufflenet_v2_x0_5" and table.loc["baseline", "workload"] == "custom"
    assert (out / "max_batch.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| baseline | " in (out / "max_batch.md").read_text() and "max batch:" in result.stdout
    # the probe the mode makes, by hand: its steps (a whole run's if that is where memory ran out), the data not
    # checked again (checking it grows the heap), the bench's threads
    whole = table.loc["baseline", "why_it_stops"] == "out of memory in a whole run"
    steps = ("--steps", 6 if whole else max_batch.PROBE_STEPS, "--warmup-steps", 1, "--workers", 0, "--no-data-check")
    steps += () if whole else ("--eval-samples", "{batch}")  # a probe evaluates one batch
    threads = {"OMP_NUM_THREADS": str(len(os.sched_getaffinity(0)))}  # the bench's: its cores
    # near the limit a run's address space varies by a few percent from run to run (the allocator's arenas), so the
    # batch found may fail and the batch that failed may fit on another try (both seen in CI): a step below the one
    # found, the direct probe must train; a step above the one that failed, it must run out of memory
    for batch, fits in (found - max_batch.step(found), True), (failed + max_batch.step(failed), False):
        flags = [str(flag).format(batch=batch) for flag in steps]
        probe, _ = train("train.py", small_data, tmp_path / f"{batch}.json", *flags, "--batch-size", batch,
                         memory_limit=LIMIT_MIB << 20, env=threads)  # fmt: skip
        assert (probe.returncode == 0) == fits, (batch, probe.stderr)
        assert fits or "out of memory" in probe.stderr


@pytest.mark.slow
@pytest.mark.minutes(2)
def test_a_real_run_flags_fsdp_without_its_broadcast_as_not_the_same_run_as_ddp(small_data, tmp_path):
    """A copy of the suite whose train_fsdp.py has lost the broadcast of the initial weights (each process starts from
    its own, the bug of an earlier round): it learns inside the band of the baseline's seeds, as another seed would,
    but not as DDP does at the same seed, and is flagged; DDP learns the same, and the baseline run twice at one seed
    is the same run (a CPU: deterministic)."""
    copy = tmp_path / "suite"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".*", "baseline", "data", "results", "docs", "*.png"))
    fsdp = (copy / "train_fsdp.py").read_text()
    assert BROADCAST in fsdp
    (copy / "train_fsdp.py").write_text(fsdp.replace(BROADCAST, ""))
    out = tmp_path / "out"
    cmd = ["-m", "bench", "--parity", "--variants", "baseline,ddp,fsdp", "--seeds", "2", "--steps", "50"]
    cmd += ["--model", TINY_MODEL]  # FSDP shards a tiny model as it shards a large one: its bug shows all the same
    result = run(*cmd, "--data", small_data, "--out", out, cwd=copy)  # the bench of the copy
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    table = pd.read_csv(out / "parity.csv").set_index("variant")
    text = (out / "parity.md").read_text()
    assert table.loc["ddp", "verdict"] == "learns the same" and table.loc["fsdp", "verdict"] == "not the same run", text
    assert table.loc["fsdp", "twin"] == "ddp" and table.loc["fsdp", "repeat_distance"] == 0
    assert table.loc["fsdp", "twin_distance"] >= parity.TWIN_SHARE * table.loc["fsdp", "seed_distance"] > 0
    assert "- fsdp: not the same run as ddp: at the same seed its curve is " in text
    assert (out / "parity_curves.png").stat().st_size > 10_000


@pytest.mark.slow
@pytest.mark.alone  # a CPU process per core: two cores, which an end-to-end test of the parallel pass does not have
def test_the_mode_runs_ddp_at_one_and_two_gloo_processes(tiny_data, tmp_path):
    out = tmp_path / "out"
    flags = ["--steps", 4, "--warmup-steps", 1, "--batch-size", 8, "--workers", 0, "--eval-samples", 8]
    result = run("-m", "bench", "--scaling", "1,2", "--variants", "ddp", "--repeats", 1, "--data", tiny_data,
                 "--out", out, "--model", "examples/smallnet.py:tiny", *flags)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "processes share its" in result.stdout  # said plainly: CPU processes share cores
    table = pd.read_csv(out / "scaling.csv")
    assert list(table["processes"]) == [1, 2] and list(table["global_batch"]) == [8, 16]  # weak: 8 per process
    assert list(table["rounds_ok"]) == [1, 1] and (table["samples_per_s"] > 0).all()  # rounds: table_of's test above
    two = table.iloc[1]
    assert two["efficiency"] == pytest.approx(two["speedup"] / 2) and two["answer"] in scaling.ANSWER
    (logs,) = (out / "logs").iterdir()
    worlds = sorted(json.loads(p.read_text())["world_size"] for p in (logs / "scaling").glob("*.json"))
    assert worlds == [1, 2]  # every rank's run, at its world size
    assert (out / "scaling.png").exists() and "| ddp | 2 | 16 |" in (out / "scaling.md").read_text()
    assert not (out / "runs.csv").exists()  # its runs are not the bench's


@pytest.mark.slow
@pytest.mark.minutes(1)
def test_the_sweep_on_tiny_data_ends_with_the_settings_to_use(tiny_data, tmp_path):
    """For real, kept small: up to one worker (--workers 1), the torchvision loader alone, two rounds of training."""
    out = tmp_path / "out"
    flags = ("--workers", 1, "--loaders", "loader", "--repeats", 2, "--steps", 6, "--warmup-steps", 1)
    flags += ("--eval-samples", 16)  # the training runs' evaluation, outside the window: one batch
    result = run("-m", "bench", "--tune-loader", "--data", tiny_data, "--out", out, "--batch-size", 16, *flags)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "tune loader: 3 loader settings alone, then 2 rounds of training" in result.stdout
    table = pd.read_csv(out / "tune_loader.csv")
    loaders, trained = table[table["phase"] == "loader"], table[table["phase"] == "train"]
    assert sorted(loaders["setting"]) == ["w0", "w1-p2", "w1-p4"] and (loaders["samples_per_s"] > 0).all()
    assert sorted(trained["setting"]) == ["own", "w0", "w1-p4"] and (trained["runs"] == 2).all()
    assert trained.set_index("setting").loc["w0", "answer"] in rules.ANSWERS
    text = (out / "tune_loader.md").read_text()
    assert "**The answer**: " in text and "`--workers 1 --prefetch-factor 4`" in text
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("tune loader: ") and any(w in last for w in ("use --", "not the limit", "keep the bench"))
    assert (out / "tune_loader.png").read_bytes()[:4] == b"\x89PNG"
