"""bench/stages/statistics/causes.py: each cause injected into made-up runs, and its absence, through the summary the
bench writes (bench/outputs/verdicts.py), so the cause in summary.csv, the verdict's words and the answer are checked at
once."""

import pandas as pd
import pytest

from bench import catalogue
from bench.modes import speed
from bench.outputs import headline
from bench.stages.statistics import causes
from helpers import ROOT, STEADY, runs_of, scaled

FLOP = 1e9


def summarized(variants, profiled=None):
    """{variant: verdict}, the summary by variant."""
    summary = speed.summary_of(runs_of(variants), profiled=profiled)
    return dict(zip(summary["variant"], summary["verdict"])), summary.set_index("variant")


def cause_of(variants, variant, profiled=None):
    said, summary = summarized(variants, profiled)
    return summary.at[variant, "cause"], said[variant]


def ops(**ms):
    """A profiled run's operators: {name: ms per step} on the CPU."""
    return dict(ops=[dict(on="cpu", name=name.replace("__", "::"), ms_per_step=v) for name, v in ms.items()])


def test_bf16_on_a_cpu_without_it_is_emulated_precision():
    amp = dict(amp_dtype="bf16", bf16_native=False)
    cause, said = cause_of({"baseline": STEADY, "amp": scaled(0.4, **amp)}, "amp")
    assert cause == "precision"
    assert "Why not faster: the precision is emulated: bf16 is emulated on this CPU without AVX-512-BF16 or AMX" in said
    assert said.count("emulated on this") == 1  # said once, as the cause
    cause, said = cause_of({"baseline": STEADY, "amp": scaled(0.9, **(amp | dict(bf16_native=True)))}, "amp")
    assert cause == "none shown" and "emulated" not in said


def test_graph_breaks_name_compile_and_a_clean_compile_does_not():
    compiled = dict(compile_mode="default", compile_s=30.0, compiled_steps_timed=10, compile_graphs=1)
    cause, said = cause_of({"baseline": STEADY, "compile": scaled(1.0, **compiled, compile_graph_breaks=3)}, "compile")
    assert cause == "compile" and "torch.compile: 3 graph breaks (each a return to Python)" in said
    assert "TORCH_LOGS=graph_breaks,recompiles" in said
    cause, _ = cause_of({"baseline": STEADY, "compile": scaled(1.0, **compiled, compile_graph_breaks=0)}, "compile")
    assert cause == "none shown"


def test_a_compile_recompiling_in_the_window_or_never_paying_back_is_compile():
    compiled = dict(compile_mode="default", compile_s=30.0, compiled_steps_timed=10, compile_graph_breaks=0)
    cause, said = cause_of(
        {"baseline": STEADY, "compile": scaled(1.0, **compiled, compile_recompiles_timed=2)}, "compile"
    )
    assert cause == "compile" and "2 graphs compiled inside the timed window" in said
    cause, said = cause_of({"baseline": STEADY, "compile": scaled(0.8, **compiled)}, "compile")
    assert cause == "compile" and "its compile never pays back" in said


def test_more_flops_a_step_is_recomputation():
    base = [(rate, dict(fields, flop_per_step=FLOP)) for rate, fields in STEADY]
    cause, said = cause_of({"baseline": base, "checkpoint": scaled(0.75, flop_per_step=1.33 * FLOP)}, "checkpoint")
    assert cause == "recompute" and "it computes 1.33x the baseline's FLOPs a step" in said
    cause, _ = cause_of({"baseline": base, "checkpoint": scaled(0.75, flop_per_step=1.05 * FLOP)}, "checkpoint")
    assert cause == "none shown"


def test_processes_on_one_cpu_share_its_cores_and_ddp_on_one_gpu_has_nothing_to_spread():
    cause, said = cause_of({"baseline": STEADY, "ddp": scaled(1.0, world_size=2)}, "ddp")
    assert cause == "shared_cores" and "its 2 processes share one CPU's cores" in said
    gpu = [(rate, dict(device="cuda")) for rate, _ in STEADY]
    cause, said = cause_of({"baseline": gpu, "ddp": scaled(0.95, device="cuda", world_size=1)}, "ddp")
    assert cause == "one_gpu" and "it ran on one GPU, where there is nothing to spread" in said
    cause, _ = cause_of({"baseline": gpu, "ddp": scaled(1.0, device="cuda", world_size=2)}, "ddp")
    assert cause == "none shown"


def test_collectives_past_a_tenth_of_the_step_are_communication():
    gpu = [(rate, dict(device="cuda")) for rate, _ in STEADY]
    variants = {"baseline": gpu, "ddp": scaled(1.0, device="cuda", world_size=2)}
    kernels = [dict(on="gpu", name="ncclDevKernel_AllReduce_Sum_f32_RING_LL", ms_per_step=100.0)]
    kernels.append(dict(on="gpu", name="sm90_xmma_gemm", ms_per_step=500.0))  # the GPU busy: not the host
    # a step: 64 samples at 100 samples/s, 640 ms; 100 ms of all-reduce is 16% of it
    cause, said = cause_of(variants, "ddp", {"small": {"ddp": dict(ops=kernels), "baseline": dict(ops=kernels[1:])}})
    assert cause == "collectives" and "collectives take 100.0 ms of its 640.0 ms step (16%)" in said
    kernels[0]["ms_per_step"] = 30.0
    cause, _ = cause_of(variants, "ddp", {"small": {"ddp": dict(ops=kernels), "baseline": dict(ops=kernels[1:])}})
    assert cause == "none shown"


def test_collectives_hidden_behind_compute_are_not_the_cause_and_exposed_ones_are():
    """Where the profile measured it (meter.collective_time), the time a collective ran with no compute beside it is
    the evidence: 200 ms of all-reduce a step, 40 ms of it exposed (6% of the 640 ms step), is not why; 100 ms exposed
    (16%) is, said with both."""
    variants = {"baseline": STEADY, "ddp": scaled(1.0, world_size=2)}
    profile = dict(ops=[dict(on="cpu", name="c10d::allreduce_", ms_per_step=1.0)], collective_ms=200.0)
    said, summary = summarized(variants, {"small": {"ddp": dict(profile, exposed_ms=40.0)}})
    assert summary.at["ddp", "collective_ms"] == 200.0 and summary.at["ddp", "exposed_collective_ms"] == 40.0
    assert "collectives take" not in said["ddp"]  # its cause is the shared cores (2 processes on one CPU), not this
    said, summary = summarized(variants, {"small": {"ddp": dict(profile, exposed_ms=100.0)}})
    assert (
        "collectives take 200.0 ms of its 640.0 ms step; 100.0 ms of it with no compute beside it (16%)" in said["ddp"]
    )


def test_a_long_data_wait_is_waiting_for_data_with_the_ceiling_beside_it():
    ceiling = [(200.0, dict(dataset="synthetic", loader="synthetic", data_wait_frac=0.0))] * 3
    slow = scaled(0.9, data_wait_frac=0.3)
    cause, said = cause_of({"baseline": STEADY, "synthetic": ceiling, "channels_last": slow}, "channels_last")
    assert cause == "data" and "it waited for data 30% of its window; its ceiling trains 200.0 samples/s" in said
    assert "--tune-loader" in said
    cause, _ = cause_of({"baseline": STEADY, "channels_last": scaled(0.9, data_wait_frac=0.1)}, "channels_last")
    assert cause == "none shown"
    # half the speed, a third of it waiting: its compute per step grew (640 ms to 896), so the wait is not why
    cause, _ = cause_of({"baseline": STEADY, "channels_last": scaled(0.5, data_wait_frac=0.3)}, "channels_last")
    assert cause == "none shown"
    # both wait most of a short step (CI's real bench: 78% and 65%): the split moved 83 ms of the 640 ms step from the
    # wait to the compute, less than half the 416 ms the row still waits: the wait is why
    waiting = [(rate, dict(fields, data_wait_frac=0.78)) for rate, fields in STEADY]
    cause, _ = cause_of({"baseline": waiting, "dp": scaled(1.0, data_wait_frac=0.65)}, "dp")
    assert cause == "data"


def test_a_row_waiting_for_its_data_is_told_the_loader_sweeps_answer(tmp_path):
    """Where a --tune-loader run left its table in the results folder, its answer (the mode's joins) follows the data
    cause; a folder without one adds nothing."""
    from bench.modes import speed, tune_loader

    saved = ROOT / "baseline" / "cpu-2core-amd-epyc-avx512-bf16"
    runs = runs_of({"baseline": STEADY, "dp": scaled(1.0, data_wait_frac=0.3)})
    tuned = tune_loader.numbers(speed.summary_of(runs), saved)["loader_sweep"].iloc[0]
    assert tuned and f"**The answer**: {tuned}." in (saved / "tune_loader.md").read_text()
    assert tune_loader.numbers(speed.summary_of(runs), tmp_path)["loader_sweep"].isna().all()
    said = speed.summary_of(runs, saved).set_index("variant").at["dp", "verdict"]
    assert f"The loader's sweep in this folder (--tune-loader) says: {tuned}." in said
    assert "loader's sweep" not in speed.summary_of(runs, tmp_path).set_index("variant").at["dp", "verdict"]


def test_a_row_at_its_loaders_rate_alone_is_held_by_the_loader():
    def variants(loader_rate):
        loader = [(loader_rate, dict(kind="loader", dataset="generated"))] * 3
        return {"baseline": STEADY, "channels_last": scaled(1.0), "loader": loader}

    cause, said = cause_of(variants(105.0), "channels_last")
    assert cause == "loader_limit" and "95% of the 105 images/s its loader delivers alone" in said
    cause, _ = cause_of(variants(200.0), "channels_last")
    assert cause == "none shown"


def test_casts_and_conversions_past_a_tenth_of_the_step_are_conversions():
    variants = {"baseline": STEADY, "amp": scaled(0.9, amp_dtype="bf16", bf16_native=True)}
    # the step: 64 samples at 90 samples/s, 711 ms; 100 ms of copies added is 14% of it
    profiled = {"small": {"baseline": ops(aten__mm=300.0, aten__copy_=2.0), "amp": ops(aten__copy_=102.0)}}
    cause, said = cause_of(variants, "amp", profiled)
    assert cause == "conversions" and "casts and layout conversions take 102.0 ms of its 711.1 ms step" in said
    assert "against 2.0 ms in the baseline's" in said
    profiled["small"]["amp"] = ops(aten__copy_=40.0, aten__mm=300.0)
    cause, said = cause_of(variants, "amp", profiled)
    assert cause == "none shown" and "--profile" not in said  # profiled: the operators showed nothing


def test_slower_convolutions_and_matmuls_than_the_baselines_are_the_kernel():
    variants = {"baseline": STEADY, "amp": scaled(0.9, amp_dtype="bf16", bf16_native=True)}
    profiled = {"small": {"baseline": ops(aten__mkldnn_convolution=200.0, aten__addmm=10.0)}}
    profiled["small"]["amp"] = ops(aten__mkldnn_convolution=300.0, aten__addmm=10.0)  # 100 ms more: 14% of 711
    cause, said = cause_of(variants, "amp", profiled)
    assert (
        cause == "kernels" and "convolutions and matrix multiplies take 310.0 ms a step against the baseline's" in said
    )
    profiled["small"]["amp"] = ops(aten__mkldnn_convolution=240.0, aten__addmm=10.0)
    assert cause_of(variants, "amp", profiled)[0] == "none shown"


def test_mixed_precision_in_nchw_against_the_same_precision_in_channels_last_is_layout():
    amp = dict(amp_dtype="bf16", bf16_native=True, memory_format="contiguous")
    recipe = dict(amp_dtype="bf16", bf16_native=True, memory_format="channels_last")
    for rate, named in (1.5, "layout"), (1.1, "none shown"):
        cause, said = cause_of({"baseline": STEADY, "amp": scaled(1.0, **amp), "all": scaled(rate, **recipe)}, "amp")
        assert cause == named
    assert "all, the same precision in channels_last, trains" not in said
    compiled = recipe | dict(compile_mode="default", compile_s=10.0, compiled_steps_timed=5)
    cause, _ = cause_of({"baseline": STEADY, "amp": scaled(1.0, **amp), "all": scaled(1.5, **compiled)}, "amp")
    assert cause == "none shown"  # compiled too: its speed is not the layout's alone


def test_a_gpu_idle_between_its_kernels_or_python_between_operators_is_the_host():
    gpu = [(rate, dict(device="cuda")) for rate, _ in STEADY]
    variants = {"baseline": gpu, "compile": scaled(1.0, device="cuda")}

    def kernels(ms):
        return dict(
            ops=[
                dict(on="gpu", name="sm90_xmma_gemm", ms_per_step=ms),
                dict(on="cpu", name="aten::mm", ms_per_step=1.0),
            ]
        )

    # the step: 64 samples at 100 samples/s, 640 ms, 1% of it waiting: kernels of 200 ms fill 32% of the rest
    cause, said = cause_of(variants, "compile", {"small": {"baseline": kernels(600.0), "compile": kernels(200.0)}})
    assert cause == "host" and "its GPU kernels fill 32% of its step beyond the data wait" in said
    cause, _ = cause_of(variants, "compile", {"small": {"baseline": kernels(600.0), "compile": kernels(600.0)}})
    assert cause == "none shown"
    cpu = {"baseline": STEADY, "fused": scaled(0.9)}  # a step of 711 ms: 100 ms between operators is 14% of it
    profiled = {"small": {"baseline": ops(aten__mm=300.0, **{"(between operators)": 5.0})}}
    profiled["small"]["fused"] = ops(aten__mm=300.0, **{"(between operators)": 100.0})
    cause, said = cause_of(cpu, "fused", profiled)
    assert cause == "host" and "the time between operators (Python, the loop) is 100.0 ms of its 711.1 ms step" in said
    profiled["small"]["fused"] = ops(aten__mm=300.0, **{"(between operators)": 40.0})
    assert cause_of(cpu, "fused", profiled)[0] == "none shown"


def test_steps_that_stall_more_than_the_baselines_are_the_host():
    def variants(base_p90):
        base = [(rate, dict(step_time_median_ms=600.0, step_time_p90_ms=base_p90)) for rate, _ in STEADY]
        return {"baseline": base, "all": scaled(1.0, step_time_median_ms=600.0, step_time_p90_ms=1200.0)}

    cause, said = cause_of(variants(630.0), "all")
    assert cause == "stalls" and "the host, not the device: its steps stall" in said
    assert said.count("its steps stall") == 1  # said once, as the cause
    cause, _ = cause_of(variants(1100.0), "all")  # the baseline stalls as much: the machine's, not the technique's
    assert cause == "none shown"


def test_the_first_cause_in_the_tables_order_leads_and_the_others_follow():
    amp = dict(amp_dtype="bf16", bf16_native=False, step_time_median_ms=1600.0, step_time_p90_ms=3200.0)
    cause, said = cause_of({"baseline": STEADY, "amp": scaled(0.4, **amp)}, "amp")
    assert cause == "precision" and "Also the host, not the device: its steps stall" in said
    assert said.index("precision is emulated") < said.index("Also the host")


def test_what_is_asked_and_what_would_show_a_cause_none_passed():
    ceiling = [(200.0, dict(dataset="synthetic", loader="synthetic", data_wait_frac=0.0))] * 3
    faster = scaled(1.3, data_wait_frac=0.3)  # faster, yet at 65% of its ceiling: asked why not nearer
    said, summary = summarized({"baseline": STEADY, "synthetic": ceiling, "dali": faster, "amp": scaled(2.0)})
    assert summary.at["dali", "cause"] == "data" and "Why not nearer its ceiling: waiting for data" in said["dali"]
    assert summary.at["amp", "cause"] is None and "Why" not in said["amp"]  # faster, at its ceiling: not asked
    assert summary.at["baseline", "cause"] is None and summary.at["synthetic", "cause"] is None
    said, summary = summarized({"baseline": STEADY, "amp": scaled(1.0, data_wait_frac=0.08)})
    assert said["amp"].endswith(
        "Why not faster: the cause is not shown by what was measured: --profile shows its operators against the"
        " baseline's, --tune-loader shows whether the loader holds it back."
    )
    unsettled = [(100.0, {}), (150.0, {}), (60.0, {})]
    said, _ = summarized({"baseline": STEADY, "amp": unsettled})
    assert "What may hold it back: the cause is not shown" in said["amp"]


def test_the_answer_names_each_rows_cause_and_the_rows_without_one():
    amp = dict(amp_dtype="bf16", bf16_native=False)
    summary = speed.summary_of(runs_of({"baseline": STEADY, "amp": scaled(0.4, **amp), "channels_last": scaled(1.0)}))
    said = dict(headline.items(summary))
    assert said["Why not faster"] == (
        "amp: the precision is emulated; channels_last: not shown by what was measured (each verdict says what would"
        " show it)"
    )


@pytest.mark.parametrize("rule", causes.RULES, ids=lambda r: r.cause)
def test_every_rule_is_a_row_of_the_docs_table(rule):
    assert f"| {rule.name} (`{rule.cause}`) | {rule.evidence} | {rule.threshold} | {rule.remedy} |" in causes.table()
    assert causes.table() in (ROOT / "docs" / "bench.md").read_text()


@pytest.mark.parametrize(
    "p90, base_p90, caused",
    [
        (140.0, 115.0, True),  # 1.40x against the baseline's 1.15x: 0.25 more (STALL_MORE), and 1.25x or more (STALL)
        (140.0, 115.0 + 1e-3, False),  # a hair less than 0.25 more than the baseline's
        (125.0, 100.0, True),  # on STALL, 0.25 over a baseline that never stalls
        (125.0 - 1e-3, 100.0, False),  # a hair under STALL
    ],
)
def test_stalls_are_a_cause_only_at_1_25x_the_median_and_a_quarter_more_than_the_baselines(p90, base_p90, caused):
    row = dict(step_time_p90_ms=p90, step_time_median_ms=100.0)
    base = dict(step_time_p90_ms=base_p90, step_time_median_ms=100.0)
    assert (causes.stalls(row, base, None) is not None) is caused


EDGE = 1e-4  # a share this far either side of a cause's threshold


def stepping(**fields):
    """A row of 100 ms steps (batch 100 at 1,000 samples/s) on a CPU, and its made-up measurements."""
    return pd.Series({"global_batch_size": 100, "rate_median": 1000.0, "device": "cpu", **fields}, dtype=object)


@pytest.mark.parametrize("over, caused", [(EDGE, True), (0.0, True), (-EDGE, False)])
def test_a_tenth_of_the_step_is_where_collectives_conversions_and_kernels_become_the_cause(over, caused):
    """SHARE (0.1): 10 ms of a 100 ms step spent (collectives) or added over the baseline's (conversions, kernels) is
    the cause; a hair less is not."""
    ms = 100 * (causes.SHARE + over)
    base = stepping(convert_ms=5.0, kernels_ms=5.0)
    assert (causes.collectives(stepping(collective_ms=ms), base, None) is not None) == caused
    assert (
        causes.collectives(stepping(collective_ms=50.0, exposed_collective_ms=ms), base, None) is not None
    ) == caused
    assert (causes.conversions(stepping(convert_ms=5.0 + ms), base, None) is not None) == caused
    assert (causes.kernels(stepping(kernels_ms=5.0 + ms), base, None) is not None) == caused


@pytest.mark.parametrize("over, caused", [(EDGE, True), (0.0, True), (-EDGE, False)])
def test_a_fifth_of_the_window_waiting_is_where_the_data_becomes_the_cause(over, caused):
    """WAIT_BOUND (0.2) of the window waiting, with the compute per step no larger than the baseline's: data."""
    wait = causes.WAIT_BOUND + over
    row = stepping(data_wait_steady_frac=wait)
    base = pd.Series(dict(global_batch_size=100, rate_median=1000 / (1 - wait), device="cpu"), dtype=object)
    rows = pd.DataFrame(dict(variant=["baseline"], rate_median=[1000.0]))
    assert (causes.data(row, base, rows) is not None) == caused


@pytest.mark.parametrize("over, caused", [(EDGE, True), (0.0, True), (-EDGE, False)])
def test_nine_tenths_of_the_loaders_rate_alone_is_where_the_loader_holds_a_row(over, caused):
    """LOADER_NEAR (0.9): a row training at 90% of its loader's rate alone (its loader row), or more, is held by it."""
    alone = catalogue.ALONE[catalogue.DEFAULT_LOADER]
    rows = pd.DataFrame(dict(kind=["loader"], variant=[alone], rate_median=[1000.0]))
    row = stepping(loader=catalogue.DEFAULT_LOADER, rate_median=1000 * (causes.LOADER_NEAR + over))
    assert (causes.loader_limit(row, None, rows) is not None) == caused


@pytest.mark.parametrize("over, caused", [(EDGE, True), (-EDGE, False)])
def test_a_tenth_more_flops_a_step_than_the_baselines_is_recomputation(over, caused):
    """RECOMPUTE (1.1): the row's FLOPs a step that many times the baseline's, or more."""
    row, base = stepping(flop_per_step=1e9 * (causes.RECOMPUTE + over)), stepping(flop_per_step=1e9)
    assert (causes.recompute(row, base, None) is not None) == caused


@pytest.mark.parametrize("over, caused", [(-EDGE, True), (EDGE, False)])
def test_a_gpu_whose_kernels_fill_under_seven_tenths_of_its_step_idles_between_them(over, caused):
    """HOST_BUSY (0.7) of the 100 ms step beyond its data wait (a fifth: 80 ms): kernels under 56 ms leave it idle."""
    row = stepping(device="cuda", starved_steady_frac=0.2, gpu_busy_ms=80 * (causes.HOST_BUSY + over))
    assert (causes.host(row, stepping(), None) is not None) == caused


@pytest.mark.parametrize("over, caused", [(EDGE, True), (-EDGE, False)])
def test_the_time_between_operators_grown_by_a_tenth_of_the_step_is_the_host(over, caused):
    base = stepping(between_ops_ms=5.0)
    row = stepping(gpu_busy_ms=100.0, between_ops_ms=5.0 + 100 * (causes.SHARE + over))
    assert (causes.host(row, base, None) is not None) == caused


@pytest.mark.parametrize("over, caused", [(EDGE, True), (-EDGE, False)])
def test_a_wait_twice_the_computes_growth_or_more_is_why_a_row_waits(over, caused):
    """WAIT_OVER_GROWTH (2): a wait per step (a quarter of 100 ms) that many times the compute's growth or more."""
    wait = 0.25
    grown = 100 * wait / (causes.WAIT_OVER_GROWTH + over)  # the row's compute per step over the baseline's
    row = stepping(data_wait_steady_frac=wait)
    base = pd.Series(dict(global_batch_size=100, rate_median=1000 / (75 - grown) * 100, device="cpu"), dtype=object)
    rows = pd.DataFrame(dict(variant=["baseline"], rate_median=[1000.0]))
    assert (causes.data(row, base, rows) is not None) == caused


@pytest.mark.parametrize("over, caused", [(EDGE, True), (-EDGE, False)])
def test_a_row_of_its_precision_in_channels_last_a_fifth_faster_says_the_layout_costs(over, caused):
    """LAYOUT_GAIN (1.2): a mixed-precision NCHW row against the fastest of its precision in channels_last, not
    compiled and on as many processes, that many times as fast or more."""
    rows = pd.DataFrame(
        dict(variant=["amp", "amp_cl", "amp_cl_compiled"], kind="train", dataset="small", runs_ok=3, amp_dtype="bf16",
             memory_format=["contiguous", "channels_last", "channels_last"], compile_mode=[None, None, "default"],
             world_size=1, rate_median=[100.0, 100 * (causes.LAYOUT_GAIN + over), 500.0])
    )  # fmt: skip
    row = rows.iloc[0]
    found = causes.layout(row, None, rows)
    assert (found is not None) == caused and (not caused or found["other"] == "amp_cl")
