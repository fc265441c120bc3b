"""bench/outputs/verdicts.py: every rule of the verdicts on runs made up for it, through the same summarize() the bench
uses, checked against its table."""

import pandas as pd
import pytest

from bench.modes import speed
from bench.outputs import headline, markdown
from bench.outputs import verdicts as words
from bench.stages.statistics import intervals, rules, summarize
from helpers import (
    STEADY,
    runs_of,
    scaled,
    verdicts,
)


def pd_isna(value):
    return value is None or value != value


def gpu_runs(nvml):
    """A GPU bench's baseline and dali rows: DALI's batches (800 MiB) live in its own memory, seen by NVML alone."""
    gpu = dict(device="cuda", peak_host_mem_mib=None)
    base = gpu | dict(peak_mem_allocated_mib=2000, peak_mem_reserved_mib=2200, nvml_peak_mib=3000 if nvml else None)
    dali = gpu | dict(peak_mem_allocated_mib=1200, peak_mem_reserved_mib=1400, nvml_peak_mib=3300 if nvml else None)
    return {"baseline": [(100.0, base)] * 3, "dali": [(130.0, dali | dict(loader="dali"))] * 3}


def compiled_runs(rates, cold_s=60.0, warm_s=4.0, compiled_steps=10):
    """A compiled row's runs at those rates: the first from an empty compile cache, the rest from a warm one."""
    return [(rate, {"compile_s": cold_s if i == 0 else warm_s, "compile_cache_warm": i > 0,
                    "compile_mode": "default", "compiled_steps_timed": compiled_steps})
            for i, rate in enumerate(rates)]  # fmt: skip


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


def test_a_slower_amp_row_names_emulated_bf16():
    base = dict(workload="small", kind="train", variant="baseline", runs_ok=3, runs_failed=0, rate_median=100.0)
    amp = dict(base, variant="amp", rate_median=20.0, speedup=0.2, speedup_low=0.18, speedup_high=0.22, rounds_paired=3)
    amp["speed_answer"] = "slower"
    amp.update(amp_dtype="bf16", bf16_native=False, device="cpu")
    rows = rules.derived(pd.DataFrame([base, amp, dict(amp, variant="native", bf16_native=True)]))
    line = words.verdict(rows.iloc[1], rows.iloc[0])  # the words read the row's answers (bf16_emulated)
    assert "0.20x slower" in line and "bf16 is emulated on this CPU (no AVX-512-BF16 or AMX)" in line
    assert "emulated" not in words.verdict(rows.iloc[2], rows.iloc[0])


def test_fsdp_is_answered_against_ddp_at_the_same_processes():
    said, summary = verdicts(
        {
            "baseline": STEADY,
            "ddp": scaled(1.2, memory=2000, world_size=2),
            "fsdp": scaled(1.0, memory=1600, world_size=2),
        }
    )
    assert summary.loc["fsdp", "peer"] == "ddp" and pd_isna(summary.loc["ddp", "peer"])
    assert summary.loc["fsdp", "speedup_vs_peer"] == pytest.approx(1 / 1.2)
    assert summary.loc["fsdp", "memory_vs_peer"] == pytest.approx(0.8)
    assert "Against ddp (the same 2 processes and global batch): 0.83x the speed, slower (" in said["fsdp"]
    assert "0.80x the memory per process, less (" in said["fsdp"]


def test_a_clear_gain_is_said_with_its_interval_and_the_compute_per_step():
    said, summary = verdicts({"baseline": STEADY, "amp": [(200.0, {}), (210.0, {}), (190.0, {})]})
    low, high = summary.loc["amp", "speedup_low"], summary.loc["amp", "speedup_high"]
    assert (summary.loc["amp", "speedup"], low, high) == pytest.approx(
        intervals.interval([200 / 100, 210 / 102, 190 / 98])
    )
    low, high = summary.loc["amp", "deciding_low"], summary.loc["amp", "deciding_high"]  # the one that decides
    assert rules.deciding_interval(summary.loc["amp"]) == pytest.approx((low, high))
    assert said["amp"].startswith(
        f"amp: 2.00x faster (98% interval {low:.2f}x to {high:.2f}x over 3 paired rounds, wholly above 1)"
    )
    assert "compute per step went from 633.6 ms to 316.8 ms while the data wait stayed at 1%" in said["amp"]


def test_a_change_inside_the_noise_of_the_rounds_is_not_settled():
    said, summary = verdicts({"baseline": STEADY, "channels_last": [(103.0, {}), (95.0, {}), (110.0, {})]})
    low, high = summary.loc["channels_last", "speedup_low"], summary.loc["channels_last", "speedup_high"]
    assert low < 1 < high and summary.loc["channels_last", "speed_answer"] == "unsettled"
    assert f"1.02x the speed, open after 3 rounds (95% interval {low:.2f}x to {high:.2f}x" in said["channels_last"]
    assert "from the margin, +-10%" in said["channels_last"]
    assert "faster" not in said["channels_last"] and "slower" not in said["channels_last"]


def test_a_clear_loss_is_slower():
    said, _ = verdicts({"baseline": STEADY, "checkpoint": [(75.0, {}), (76.0, {}), (74.0, {})]})
    assert said["checkpoint"].startswith(
        "checkpoint: 0.75x slower (98% interval 0.73x to 0.77x over 3 paired rounds, wholly below 1)"
    )
    assert "compute per step went from 633.6 ms to 844.8 ms" in said["checkpoint"]


def test_one_run_each_has_no_noise_to_read_against():
    said, _ = verdicts({"baseline": [(100.0, {})], "amp": [(150.0, {})]})
    assert "1.50x the speed, open: one paired round, no interval to judge the noise by" in said["amp"]


def test_memory_is_a_paired_ratio_too():
    low = [(100.0, {"peak_host_mem_mib": m}) for m in (600, 610, 590)]
    same = [(100.0, {"peak_host_mem_mib": m}) for m in (1010, 990, 1000)]
    said, summary = verdicts({"baseline": STEADY, "checkpoint": low, "dp": same})
    assert summary.loc["checkpoint", "memory_vs_baseline"] == pytest.approx(0.6, rel=0.01)
    assert "0.60x the host memory, less (0.58x to 0.63x)" in said["checkpoint"]
    assert "host memory unchanged (1.00x, 0.98x to 1.03x)" in said["dp"]


def test_a_faster_loader_where_the_baseline_hardly_waited_had_little_to_win():
    dali = [(101.0, {"loader": "dali"}), (99.0, {"loader": "dali"}), (103.0, {"loader": "dali"})]
    said, _ = verdicts({"baseline": STEADY, "dali": dali})
    assert "the baseline waited for data 1% of the time, so a faster loader had little to win" in said["dali"]


def test_a_loader_that_cuts_the_data_wait_says_so():
    waiting = [(r, {"data_wait_frac": 0.5, "compute_samples_per_s": 2 * r}) for r in (100.0, 102.0, 98.0)]
    dali = [(r, {"loader": "dali", "data_wait_frac": 0.05}) for r in (180.0, 185.0, 175.0)]
    said, _ = verdicts({"baseline": waiting, "dali": dali})
    assert said["dali"].startswith("dali: 1.80x faster")
    assert "and the data wait fell from 50% to 5%" in said["dali"] and "little to win" not in said["dali"]


def test_on_a_gpu_the_wait_for_data_is_the_devices_own():
    """DALI's iterator makes the host wait where the GPU is busy (the first GPU run: the host waited 41% of the window,
    the GPU starved 2.6%): on a GPU the compute per step and the data wait are read from the device's starved time."""
    gpu = dict(device="cuda", data_wait_frac=0.003, starved_frac=0.02)
    base = [(r, gpu) for r in (100.0, 102.0, 98.0)]
    dali = [(r, dict(gpu, loader="dali", data_wait_frac=0.41, starved_frac=0.026)) for r in (97.0, 99.0, 95.0)]
    said, summary = verdicts({"baseline": base, "dali": dali})
    ms = 1e3 * 64 / summary.loc["dali", "rate_median"] * (1 - 0.026)
    assert f"to {ms:.1f} ms while the data wait stayed at 3%" in said["dali"]
    assert "waiting for data 2% of the time" in said["baseline"]


def test_a_technique_on_a_data_bound_run_is_told_the_pipeline_sets_the_pace():
    bound = [(r, {"data_wait_frac": 0.6, "compute_samples_per_s": 3 * r}) for r in (100.0, 102.0, 98.0)]
    amp = [(r, {"data_wait_frac": 0.75, "compute_samples_per_s": 6 * r}) for r in (101.0, 99.0, 100.0)]
    said, _ = verdicts({"baseline": bound, "amp": amp})
    assert "the data wait stayed high (60% to 75%): the input pipeline, not compute, sets the pace" in said["amp"]
    assert "compute per step went from 256.0 ms to 160.0 ms and the data wait rose from 60% to 75%" in said["amp"]


def test_a_diverged_or_failed_variant_gets_no_verdict():
    nan = [(100.0, {"diverged_step": 7}), (100.0, {})]
    failed = [(float("nan"), {"status": "failed", "error": "out of memory"})] * 2
    said, _ = verdicts({"baseline": STEADY, "amp": nan, "compile": failed})
    assert said["amp"] == (
        "amp: no verdict: its loss diverged (NaN or inf) in 1 of 2 runs, so its speed was measured on meaningless"
        " numbers."
    )
    assert said["compile"] == "compile: no verdict: all 2 of its runs failed (out of memory)."


def test_compile_time_processes_accuracy_and_a_busy_machine_are_said():
    compiled = [(100.0, {"compile_s": s, "compile_cache_warm": w}) for s, w in ((60.0, False), (4.0, True))]
    ddp = [(100.0, {"world_size": 2, "val_acc": 0.3, "busy": True}), (100.0, {"world_size": 2, "val_acc": 0.3})]
    said, _ = verdicts({"baseline": STEADY, "compile": compiled, "ddp": ddp})
    assert "compiling took 32.0 s (60.0 s on an empty cache) before the first timed step" in said["compile"]
    assert "2 processes of batch 32 on the same CPU" in said["ddp"]
    # no final losses to read against reruns: the one accuracy each row has is pointed to --parity, not judged
    assert "its validation accuracy, 0.300 against the baseline's 0.500, is one run each" in said["ddp"]
    assert "--parity" in said["ddp"] and "learns" not in said["ddp"]
    assert said["ddp"].endswith("Taken on a busy machine in 1 of 2 runs: not to be trusted.")
    assert "accuracy" not in said["compile"] and "busy" not in said["compile"]


def test_the_reference_and_the_ceiling_say_what_they_are():
    synthetic = [(r, {"dataset": "synthetic"}) for r in (200.0, 204.0, 196.0)]
    said, _ = verdicts({"baseline": STEADY, "synthetic": synthetic})
    assert said["baseline"] == (
        "baseline: the reference, 100.0 samples/s (repeats spread 4%): compute 633.6 ms a step, waiting for data 1%"
        " of the time; it reaches 50% of the ceiling."
    )
    assert said["synthetic"].startswith("synthetic: the ceiling: 200.0 samples/s on batches already on the device")


def test_the_verdicts_are_in_summary_md_and_match_its_table():
    runs = runs_of({"baseline": STEADY, "amp": [(200.0, {}), (210.0, {}), (190.0, {})]})
    summary = speed.summary_of(runs)
    text = markdown.markdown(summary, {"small": "small"}, "now")
    amp_row = next(line for line in text.splitlines() if line.startswith("| amp |"))
    cells = [cell.strip() for cell in amp_row.split("|")]
    speedup = next(cell for cell in cells if cell.endswith("x"))
    verdict = next(line for line in text.splitlines() if line.startswith("- amp: "))
    assert verdict.startswith(f"- amp: {speedup} faster") and "Verdicts" in text
    assert text.index("| amp |") < text.index("- baseline: the reference")


@pytest.mark.parametrize("nvml", [True, False])
def test_dalis_memory_is_read_from_nvml_never_from_torchs_counters(nvml):
    """torch's counters miss DALI's batches: the dali row's torch figures are marked and compared with nothing; its
    memory comparison is NVML's, and without NVML there is none (not a 0.6x that is DALI's batches left out)."""
    said, summary = verdicts(gpu_runs(nvml))
    dali = summary.loc["dali"]
    assert pd.isna(dali["peak_mem_allocated_vs_baseline"]) and pd.isna(dali["peak_mem_reserved_vs_baseline"])
    text = markdown.markdown(summary.reset_index(), {"small": "small"}, "now")
    row = next(line for line in text.splitlines() if line.startswith("| dali |"))
    assert "1,200 (not seen)" in row and "1,400 (not seen)" in row
    assert "(not seen) dali: DALI hands out its batches in its own GPU memory" in text
    if nvml:
        assert dali["memory_source"] == "nvml_peak_mib" and dali["memory_vs_baseline"] == pytest.approx(1.1)
        assert "1.10x the GPU memory" in said["dali"] and "its GPU memory is NVML's, which sees DALI's" in said["dali"]
    else:
        assert pd.isna(dali["memory_source"]) and pd.isna(dali["memory_vs_baseline"])
        assert "the GPU memory" not in said["dali"] and "its GPU memory is not compared" in said["dali"]
        base = summary.loc["baseline"]
        assert base["memory_source"] == "peak_mem_reserved_mib"  # the baseline's own figure stays


def test_compiling_pays_back_after_the_steps_its_faster_steps_take_to_repay_it():
    """The baseline: 64 samples a step at about 100/s (0.64 s a step), its first step 1 s; compile: twice as fast,
    every round, so a step saves 0.32 s: a 60 s cold compile (59 s more than the eager first step) is repaid after
    185 steps, a 4 s warm one after 10."""
    base = [(rate, {"first_step_s": 1.0}) for rate, _ in STEADY]
    said, summary = verdicts({"baseline": base, "compile": compiled_runs([200.0, 204.0, 196.0])})
    row = summary.loc["compile"]
    assert (row.compile_cold_s, row.compile_warm_s) == (60.0, 4.0) and row.payback_answer == "pays back"
    saved_s = 0.64 * (1 - 1 / row.speedup)
    assert row.payback_cold_steps == -(-59 // saved_s) and row.payback_warm_steps == -(-3 // saved_s)
    assert (row.payback_cold_steps, row.payback_warm_steps) == (185, 10)
    assert "compiling pays back after 185 steps from a cold cache, 10 from a warm one" in said["compile"]
    assert markdown.payback_cell(row) == "185 / 10"
    (pays,) = [words for label, words in headline.items(summary.reset_index()) if label == "Pays"]
    assert "its compile paid back after 185 steps from a cold cache, 10 from a warm one" in pays


def test_a_compile_that_is_slower_never_pays_back_and_one_inside_the_noise_is_not_settled():
    base = [(rate, {"first_step_s": 1.0}) for rate, _ in STEADY]
    said, summary = verdicts({"baseline": base, "compile": compiled_runs([50.0, 51.0, 49.0])})
    assert summary.loc["compile", "payback_answer"] == "never" and pd.isna(summary.loc["compile", "payback_cold_steps"])
    assert "compiling never pays back here: it is slower than the baseline" in said["compile"]
    assert markdown.payback_cell(summary.loc["compile"]) == "never"
    said, summary = verdicts({"baseline": base, "compile": compiled_runs([150.0, 70.0, 140.0])})
    row = summary.loc["compile"]
    assert row.speedup_low < 1 < row.speedup_high and row.payback_answer == "not settled"
    assert f"would pay back after {row.payback_cold_steps:,.0f} steps from a cold cache" in said["compile"]
    assert "but its speed-up's interval holds 1" in said["compile"]
    assert markdown.payback_cell(row).endswith("(not settled)")


def test_one_round_gives_no_settled_payback_and_an_eager_window_none_at_all():
    base = [(100.0, {"first_step_s": 1.0})]
    said, summary = verdicts({"baseline": base, "compile": compiled_runs([200.0])})
    row = summary.loc["compile"]
    assert row.payback_answer == "not settled" and row.payback_cold_steps == 185 and pd.isna(row.payback_warm_steps)
    assert (
        "it would pay back after 185 steps from a cold cache, but its speed-up has no interval yet" in said["compile"]
    )
    said, summary = verdicts({"baseline": base, "compile": compiled_runs([200.0], compiled_steps=0)})
    assert pd.isna(summary.loc["compile", "payback_answer"]) and "pays back" not in said["compile"]


def test_the_payback_arithmetic_alone():
    base = dict(rate_median=100.0, global_batch_size=100, first_step_s=2.0)  # 1 s a step, 2 s the first
    row = dict(speedup=2.0, speedup_low=1.5, speedup_high=2.5, compile_cold_s=52.0, compile_warm_s=2.5)
    assert summarize.payback(row, base) == ("pays back", 100, 1)  # 0.5 s saved a step
    assert summarize.payback(dict(row, compile_warm_s=1.0), base) == ("pays back", 100, 0)  # cheaper than eager's
    assert summarize.payback(dict(row, speedup_high=0.9, speedup=0.8, speedup_low=0.7), base) == ("never", None, None)
    no_first = dict(base, first_step_s=None)
    assert summarize.payback(dict(row, compile_warm_s=None), no_first) == ("pays back", 104, None)


def test_the_tradeoff_plot_places_a_row_of_one_round_as_a_hollow_point_and_says_when_it_has_none(monkeypatch):
    """One round gives no interval: the row is still placed (its legend says so), never an empty frame; with no row to
    place, the figure says why."""
    from bench.outputs import plots

    drawn = []
    monkeypatch.setattr(plots, "save", lambda fig, path: drawn.append(fig))
    one_round = {"baseline": [(100.0, {})], "amp": [(150.0, {"peak_host_mem_mib": 800})]}
    summary = speed.summary_of(runs_of(one_round))
    plots.plot_tradeoff(summary, "unused.png", {"small": "one round"})
    (ax,) = drawn[-1].axes[:1]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "amp: 1.50x speed, 0.80x memory (one round: no interval)" in legend
    assert "hollow: one round, no interval" in ax.get_title()
    plots.plot_tradeoff(summary.iloc[:0], "unused.png", {"small": "nothing"})
    texts = [t.get_text() for t in drawn[-1].axes[0].texts]
    assert texts == ["no row has both a speed-up and a memory ratio to place"]


def test_steps_that_stall_are_said_with_their_p90_against_their_median():
    """The H200 of 2026-11-27: the recipe without compile stepped in 58-62 ms at the median and 102-120 ms at the 90th
    percentile, 4-5% starved. From a p90 of STALL times the median on, the verdict and the table say it; steadier
    steps are not mentioned; a row that also waits for data is told apart."""
    gpu = dict(device="cuda", starved_frac=0.04, step_time_median_ms=100.0)
    steady = [(rate, dict(gpu, step_time_p90_ms=105.0)) for rate, _ in STEADY]
    stall = rules.STALL
    said, summary = verdicts({
        "baseline": steady,
        "all": [(150.0, dict(gpu, step_time_median_ms=60.0, step_time_p90_ms=p90)) for p90 in (102.0, 120.0, 110.0)],
        "amp": [(120.0, dict(gpu, step_time_median_ms=80.0, step_time_p90_ms=80.0 * stall * 0.99))] * 3,
        "dali": [(110.0, dict(gpu, starved_frac=0.3, step_time_median_ms=80.0, step_time_p90_ms=200.0))] * 3,
    })  # fmt: skip
    assert (
        "its steps stall: the slowest tenth take 110 ms or more against a median of 60 ms (1.8x), while the GPU"
        " waited for data 4% of the time: stalls between steps, not waits for data" in said["all"]
    )
    assert "stall" not in said["amp"] and "stall" not in said["baseline"]  # just under the rule, and steady
    assert "with a data wait of 30%: the input pipeline falls behind now and then" in said["dali"]
    cells = {row.variant: markdown.step_cell(row) for _, row in summary.reset_index().iterrows()}
    assert cells["all"].endswith("(median 60, p90 110)") and "p90" not in cells["amp"] + cells["baseline"]
    gpu_base = dict(gpu, step_time_p90_ms=200.0)
    said, _ = verdicts({"baseline": [(rate, gpu_base) for rate, _ in STEADY]})
    assert "its steps stall: the slowest tenth take 200 ms" in said["baseline"]  # the reference's own, too


@pytest.mark.parametrize("gap, said", [(0.1 + 1e-4, True), (0.1 - 1e-4, False)])
def test_one_runs_accuracy_a_tenth_from_the_baselines_is_pointed_to_a_comparison_over_seeds(gap, said):
    """ACCURACY_GAP (0.1): with no interval on the loss, a validation accuracy that far from the baseline's, either
    way, is said as one run each (and where to compare learning); a hair nearer is not said."""
    base = pd.Series(dict(val_acc=0.5), dtype=object)
    for val_acc in (0.5 + gap, 0.5 - gap):
        row = pd.Series(dict(val_acc=val_acc), dtype=object)
        assert bool(words.learning_words(row, base)) == said
        assert ("is one run each" in words.learning_words(row, base)) == said
    assert words.ACCURACY_GAP == 0.1


def waiting(wait, **fields):
    """A row's fields as the data-wait words read them."""
    return pd.Series(dict(wait_share=wait, compute_ms=10.0, **fields), dtype=object)


@pytest.mark.parametrize("moved, said", [(0.05 - 1e-4, "stayed at"), (0.05 + 1e-4, "rose from")])
def test_a_data_wait_that_moved_less_than_five_points_stayed(moved, said):
    """WAIT_CHANGE (0.05, absolute): the wait moved by less than that stayed; by more, it rose (or fell)."""
    line = "; ".join(words.reasons(waiting(0.1 + moved), waiting(0.1)))
    assert said in line and words.WAIT_CHANGE == 0.05


@pytest.mark.parametrize("wait, said", [(0.2, True), (0.2 - 1e-4, False)])
def test_a_wait_high_for_both_a_fifth_or_more_says_the_pipeline_sets_the_pace(wait, said):
    """WAIT_BOUND (0.2): the row and the baseline both waiting that share or more, and the row not faster."""
    line = "; ".join(words.reasons(waiting(wait), waiting(wait)))
    assert ("the input pipeline, not compute, sets the pace" in line) == said


@pytest.mark.parametrize("wait, said", [(0.05 - 1e-4, True), (0.05, False)])
def test_a_new_loader_had_little_to_win_where_the_baseline_waited_under_five_percent(wait, said):
    """WAIT_LITTLE (0.05): a row of another loader, not faster, where the baseline waited less than that."""
    line = "; ".join(words.reasons(waiting(0.01, loader="dali"), waiting(wait, loader="torchvision")))
    assert ("a faster loader had little to win" in line) == said


@pytest.mark.parametrize("moved, said", [(0.1 + 1e-4, True), (0.1 - 1e-4, False)])
def test_the_cores_a_cpu_loader_took_are_said_from_a_tenth_of_a_core_moved(moved, said):
    """CORES_CHANGE (0.1): on a CPU, the loader's cores moved by that or more (the same loader) are said."""
    cores = dict(device="cpu", cpu_model_cores=1.5, loader="torchvision")
    row = pd.Series(dict(cores, cpu_loader_cores=0.4 + moved), dtype=object)
    base = pd.Series(dict(cores, cpu_loader_cores=0.4), dtype=object)
    assert (words.cores_words(row, base) is not None) == said
