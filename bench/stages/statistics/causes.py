"""Why is it not faster? The likeliest cause, from the run's own evidence, for every row that does not pay in full.

A training row is asked (`asked`) where its speed answer is not faster (slower, no measurable difference, not
settled) or where it is faster but its paired interval against its ceiling (the synthetic row of its precision) lies
wholly below 100%: faster by less than its ceiling says it could be. The baseline, the ceilings, the loader rows, a
failed or diverged row and a row whose technique did not apply (tf32 without TF32) are not asked.

The rules are one table, RULES: a cause, the evidence it reads, the threshold past which it is named, its words and
what to try. Each rule reads the row, its workload's baseline and the workload's other rows (the loaders alone, the
rows of the same precision) and returns the numbers its words need where the evidence passes the threshold, else
None. The first rule in the table's order whose evidence passes is the cause (`cause` in summary.csv, said first in
the verdict); the others that pass follow it. Where none passes, the verdict says the cause is not shown by what was
measured, and which flag would show it (`unshown`). docs/bench.md holds the table (`python -m
bench.stages.statistics.causes` prints it), and tests/bench/stages/statistics/test_causes.py injects each cause and its
absence.

The operators' evidence (casts and layout conversions, collectives) comes from a bench with --profile: its round-1
runs' operators per step (bench/stages/records/profiles.py), summed here by name into `convert_ms` and `collective_ms`.
"""

import math
from typing import Callable, NamedTuple

import pandas as pd

from bench import catalogue
from bench.schema import SummaryRow, num
from bench.stages.statistics.rules import (
    STALL,
    WAIT_BOUND,
    WAIT_LITTLE,
    against_ceiling,
    compute_ms,
    emulated_bf16,
    step_ms,
    waited,
)

LOADER_NEAR = 0.9  # a row training at this share of its loader's rate alone, or more, is held by the loader
STALL_MORE = 0.25  # ... and it stalls more than the baseline by this much (p90 / median) or more
SHARE = 0.1  # conversions or collectives: this share of the row's step or more (added over the baseline's)
WAIT_OVER_GROWTH = 2  # a data wait per step this many times its compute's growth per step, or more: the wait is why
LAYOUT_GAIN = 1.2  # a row of the same precision in channels_last this many times as fast: the layout costs
RECOMPUTE = 1.1  # this many times the baseline's FLOPs a step, or more: recomputation
HOST_BUSY = 0.7  # a GPU whose kernels fill less than this share of a step (its data wait left out) idles between them

# operator and kernel names (lower case, substrings) that convert: dtype casts and memory-format changes; on a CPU
# aten::copy_ does a cast's work (aten::to and aten::_to_copy call it), oneDNN reorders between layouts; on a GPU
# cuDNN's and torch's NCHW <-> NHWC kernels and the elementwise copy kernels that cast
CONVERSIONS = ("copy", "contiguous", "reorder", "nchwtonhwc", "nhwctonchw", "transpose", "convert", "cast")
KERNELS = ("conv", "mm", "matmul", "linear", "gemm", "cudnn", "cutlass", "xmma", "attention")  # the compute itself
# not a bare "broadcast": aten::broadcast_tensors is compute (c10d::broadcast_ and NCCL's kernels are kept)
COLLECTIVES = ("allreduce", "all_reduce", "allgather", "all_gather", "reduce_scatter", "reducescatter", "nccl", "gloo",
               "c10d")  # fmt: skip


class Rule(NamedTuple):
    cause: str  # its key: summary.csv's cause
    name: str  # the practitioner's words for it
    evidence: str  # what it reads
    threshold: str  # when it is named
    test: Callable  # (row, base, rows) -> {numbers its words need}, or None where the evidence does not pass
    words: str  # the evidence, said (str.format of the numbers)
    remedy: str  # what to try


def ratio(value, of):
    return value / of if of > 0 else math.nan


def precision(row, base, rows):
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    if emulated_bf16(row):
        where = "GPU before Ampere" if row.device == "cuda" else "CPU without AVX-512-BF16 or AMX"
        return dict(where=where)
    return None


def compile_(row, base, rows):
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    if pd.isna(row.compile_mode):
        return None
    breaks, recompiles = num(row.compile_graph_breaks), num(row.compile_recompiles_timed)
    said = []
    if breaks > 0:
        said.append(f"{breaks:.0f} graph break{'s' if breaks != 1 else ''} (each a return to Python)")
    if recompiles > 0:
        said.append(f"{recompiles:.0f} graph{'s' if recompiles != 1 else ''} compiled inside the timed window")
    if row.payback_answer == "never":
        said.append("its compile never pays back (its speed-up's interval lies below 1)")
    return dict(found="; ".join(said)) if said else None


def recompute(row, base, rows):
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    times = ratio(num(row.flop_per_step), num(base.flop_per_step))
    return dict(times=times) if times >= RECOMPUTE else None


def shared_cores(row, base, rows):
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    if row.device == "cpu" and num(row.world_size) > 1:
        return dict(processes=num(row.world_size))
    return None


def one_gpu(row, base, rows):
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    if row.variant in catalogue.MULTI_GPU and row.device == "cuda" and not num(row.world_size) > 1:
        return {}
    return None


def collectives(row, base, rows):
    """A collective's time per step with no compute beside it (exposed_collective_ms), where the profile measured it;
    else (a profile before it was recorded) the collectives' own time."""
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    spent, exposed, step = num(row.collective_ms), num(row.exposed_collective_ms), step_ms(row)
    if math.isnan(exposed):
        share = ratio(spent, step)
        return dict(ms=spent, step=step, share=share, hidden="") if share >= SHARE else None
    share = ratio(exposed, step)
    hidden = f"; {exposed:.1f} ms of it with no compute beside it"
    return dict(ms=spent, step=step, share=share, hidden=hidden) if share >= SHARE else None


def data(row, base, rows):
    """A row that waits for its data, WAIT_OVER_GROWTH times as long a step as its compute per step grew over the
    baseline's, or longer: its step went to the wait (a row whose compute grew as much lost its speed there, whatever
    it waited). Against the growth, not the step: where both wait most of a step, the split of a short step into
    wait and compute moves by a tenth of it between two runs of the same work (seen in CI)."""
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    wait = waited(row)
    grown = compute_ms(row) - compute_ms(base)
    if not wait >= WAIT_BOUND or wait * step_ms(row) < WAIT_OVER_GROWTH * (0.0 if math.isnan(grown) else grown):
        return None
    ceiling = ceiling_rate(row, rows)
    return dict(wait=wait, also=f"; its ceiling trains {ceiling:,.1f} samples/s" if ceiling > 0 else "")


def loader_limit(row, base, rows):
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    alone = loader_rate(row, rows)
    share = ratio(num(row.rate_median), alone)
    if not share >= LOADER_NEAR:
        return None
    return dict(rate=num(row.rate_median), alone=alone, share=share)


def conversions(row, base, rows):
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    added = num(row.convert_ms) - (0.0 if pd.isna(num(base.convert_ms)) else num(base.convert_ms))
    share = ratio(added, step_ms(row))
    if not share >= SHARE:
        return None
    return dict(ms=num(row.convert_ms), base_ms=num(base.convert_ms), step=step_ms(row), share=share)


def kernels(row, base, rows):
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    added = num(row.kernels_ms) - num(base.kernels_ms)
    share = ratio(added, step_ms(row))
    if not share >= SHARE:
        return None
    return dict(ms=num(row.kernels_ms), base_ms=num(base.kernels_ms), share=share)


def layout(row, base, rows):
    """A mixed-precision row in NCHW against the fastest row of the same precision in channels_last, not compiled and
    on as many processes (all:no-ddp:no-compile against amp): what the layout alone is worth."""
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    if pd.isna(row.amp_dtype) or row.memory_format != "contiguous":
        return None
    same = rows[(rows["kind"] == "train") & (rows["dataset"] != "synthetic") & (rows["runs_ok"] > 0)]
    same = same[(same["amp_dtype"] == row.amp_dtype) & (same["memory_format"] == "channels_last")]
    same = same[same["compile_mode"].isna() & (same["world_size"] == row.world_size)]  # layout alone differs
    same = same[same["rate_median"].notna()]  # a row whose rate was not measured steadily has none to compare
    if same.empty:
        return None
    best = same.loc[same["rate_median"].idxmax()]
    times = ratio(num(best.rate_median), num(row.rate_median))
    return dict(other=best.variant, times=times) if times >= LAYOUT_GAIN else None


def host(row, base, rows):
    """The device idle between its kernels (a GPU: its kernels fill less than HOST_BUSY of the step, the data wait
    left out), or the time between operators (Python, the loop) grown by SHARE of the step over the baseline's."""
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    step, wait = step_ms(row), waited(row)
    busy = ratio(num(row.gpu_busy_ms), step * (1 - (0.0 if pd.isna(wait) else wait)))
    if busy < HOST_BUSY:
        return dict(
            said=f"its GPU kernels fill {busy:.0%} of its step beyond the data wait: the GPU idles between them"
        )
    gap, base_gap = num(row.between_ops_ms), num(base.between_ops_ms)
    if ratio(gap - (0.0 if pd.isna(base_gap) else base_gap), step) >= SHARE:
        return dict(said=f"the time between operators (Python, the loop) is {gap:.1f} ms of its {step:.1f} ms step,"
                         f" against {base_gap:.1f} ms in the baseline's")  # fmt: skip
    return None


def stalls(row, base, rows):
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    p90, median = num(row.step_time_p90_ms), num(row.step_time_median_ms)
    mine = ratio(p90, median)
    theirs = ratio(num(base.step_time_p90_ms), num(base.step_time_median_ms))
    if not mine >= STALL or mine < (1.0 if pd.isna(theirs) else theirs) + STALL_MORE:
        return None
    return dict(p90=p90, median=median, times=mine, base=theirs, wait=waited(row))


RULES = [
    Rule("precision", "the precision is emulated", "bf16_native of a bf16 autocast row (train_amp.py, train_all.py)",
         "the device does not compute bf16 natively", precision,
         "bf16 is emulated on this {where}, so autocast costs more than it saves",
         "full precision (the baseline) on this device"),
    Rule("compile", "compile", "compile_graph_breaks, compile_recompiles_timed, payback_answer",
         "a graph break, a graph compiled inside the window, or a compile that never pays back", compile_,
         "torch.compile: {found}", "TORCH_LOGS=graph_breaks,recompiles to see where, then the code it names, or"
         " compile the model's blocks alone"),
    Rule("recompute", "recomputation", "flop_per_step against the baseline's (FlopCounterMode, recompute included)",
         f"{RECOMPUTE:g}x the baseline's FLOPs a step or more", recompute,
         "it computes {times:.2f}x the baseline's FLOPs a step (activation checkpointing runs the forward again)",
         "checkpoint fewer stages, or only where memory, not speed, is the limit"),
    Rule("shared_cores", "processes share the cores", "world_size and device of the row",
         "2 or more processes on one CPU", shared_cores,
         "its {processes:.0f} processes share one CPU's cores: more processes bring no more compute here, only"
         " their communication", "one process on a CPU; DDP pays across GPUs or machines"),
    Rule("one_gpu", "one GPU", "world_size of a row whose technique spreads work over GPUs (DDP, FSDP, DP)",
         "it ran on one GPU", one_gpu,
         "it ran on one GPU, where there is nothing to spread: only its overhead shows",
         "two GPUs or more (python -m bench --scaling)"),
    Rule("collectives", "communication", "exposed_collective_ms (--profile: the time per step a collective, all-reduce,"
         " all-gather, reduce-scatter, ran with no compute beside it; collective_ms where that was not recorded)",
         f"{SHARE:.0%} of the step or more", collectives,
         "collectives take {ms:.1f} ms of its {step:.1f} ms step{hidden} ({share:.0%})",
         "a larger batch per process, gradient bucketing (bucket_cap_mb), or fewer processes"),
    Rule("data", "waiting for data", "data_wait_frac (the GPU's starved_frac), compute per step against the"
         " baseline's, the ceiling's rate", f"{WAIT_BOUND:.0%} of the window or more, and its wait per step"
         f" {WAIT_OVER_GROWTH:g}x what its compute per step grew over the baseline's, or more", data,
         "it waited for data {wait:.0%} of its window{also}",
         "the loader's settings (python -m bench --tune-loader), or DALI (loader_dali.py)"),
    Rule("loader_limit", "the loader's limit", "rate_median against its loader's rate alone (loader.py --bench,"
         " loader_dali.py --bench rows)", f"{LOADER_NEAR:.0%} of the loader's rate alone or more", loader_limit,
         "it trains {rate:,.0f} samples/s, {share:.0%} of the {alone:,.0f} images/s its loader delivers alone",
         "more loading processes (python -m bench --tune-loader), or DALI (loader_dali.py)"),
    Rule("conversions", "conversions and layout", "convert_ms (--profile: casts and memory-format conversions per"
         " step) against the baseline's", f"{SHARE:.0%} of the step or more added over the baseline's", conversions,
         "casts and layout conversions take {ms:.1f} ms of its {step:.1f} ms step, against {base_ms:.1f} ms in the"
         " baseline's", "channels_last with mixed precision (train_all.py), or keep the tensors in one dtype"),
    Rule("kernels", "the kernel is not faster here", "kernels_ms (--profile: convolutions, matrix multiplies and"
         " attention per step) against the baseline's", f"{SHARE:.0%} of the step or more added over the baseline's",
         kernels, "its convolutions and matrix multiplies take {ms:.1f} ms a step against the baseline's {base_ms:.1f}"
         " ms: at its precision or layout they are not faster on this device",
         "the baseline's precision and layout here; the technique where its kernels are faster (a GPU's tensor"
         " cores)"),
    Rule("layout", "conversions and layout", "rate_median against the fastest row of the same precision in"
         " channels_last, not compiled, on as many processes", f"that row {LAYOUT_GAIN:g}x as fast or more", layout,
         "{other}, the same precision in channels_last, trains {times:.2f}x as fast: mixed-precision convolutions"
         " in NCHW pay layout conversions", "channels_last with mixed precision (train_all.py)"),
    Rule("host", "the host, not the device", "--profile: gpu_busy_ms (the GPU kernels' time per step) against the"
         " step less its data wait; between_ops_ms (the time between operators) against the baseline's",
         f"the kernels fill under {HOST_BUSY:.0%} of the step, or the time between operators grew by {SHARE:.0%} of"
         " the step or more", host, "{said}", "CUDA graphs (torch.compile mode=reduce-overhead), fewer small"
         " operators (torch.compile), a larger batch"),
    Rule("stalls", "the host, not the device", "step_time_p90_ms against step_time_median_ms, the baseline's too",
         f"p90 {STALL:g}x the median or more, and {STALL_MORE:g} more than the baseline's ratio", stalls,
         "its steps stall: the slowest tenth take {p90:,.0f} ms or more against a median of {median:,.0f} ms"
         " ({times:.1f}x) while it waited for data {wait:.0%} of the time",
         "--profile to see what the host does between steps, fewer host syncs, or a larger batch"),
]  # fmt: skip

NAMES = {rule.cause: rule.name for rule in RULES}
UNSHOWN = "the cause is not shown by what was measured"


def asked(row):
    """The row is asked why it is not faster: not faster, or faster but wholly below its ceiling."""
    row = SummaryRow.of(row)
    if row.kind != "train" or row.dataset == "synthetic" or row.variant == "baseline":
        return False
    if row.variant == catalogue.SELF:  # the baseline against itself: no technique to explain
        return False
    if not num(row.runs_ok) > 0 or num(row.runs_diverged) > 0 or pd.isna(row.speed_answer):
        return False
    if row.variant == "tf32" and row.matmul_precision == "fp32":
        return False  # did not apply here: its verdict says why
    if row.rate_basis == "unknown":
        return False  # its steady rate is not known: nothing to explain (its verdict says why)
    return row.speed_answer != "faster" or against_ceiling(row)[0] == "below"


def found(row, base, rows):
    """[(rule, its numbers)] of every rule whose evidence passes for the row, in the table's order."""
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    return [(rule, numbers) for rule in RULES if (numbers := rule.test(row, base, rows)) is not None]


def unshown(row):
    """What would show the cause, where no rule's evidence passes."""
    row = SummaryRow.of(row)
    flags = []
    if pd.isna(row.convert_ms):
        flags.append("--profile shows its operators against the baseline's")
    wait = waited(row)
    if not wait < WAIT_LITTLE:
        flags.append("--tune-loader shows whether the loader holds it back")
    return flags


def ceiling_rate(row, rows):
    row = SummaryRow.of(row)
    ceiling = rows[rows["variant"] == row.ceiling] if pd.notna(row.ceiling) else rows.iloc[0:0]
    return num(SummaryRow.of(ceiling.iloc[0]).rate_median) if not ceiling.empty else math.nan


def loader_rate(row, rows):
    """The images/s the row's loader delivers alone (its loader row), times the row's processes (a loader each)."""
    row = SummaryRow.of(row)
    name = catalogue.ALONE.get(row.loader)  # the loader row that times its --loader alone
    alone = rows[(rows["kind"] == "loader") & (rows["variant"] == name)]
    if alone.empty:
        return math.nan
    processes = num(row.world_size)
    return num(SummaryRow.of(alone.iloc[0]).rate_median) * (processes if processes > 1 else 1)


def profile_ms(profiled, workload, variant, device, names, on=None):
    """The self time per step of the profiled operators (on a CPU) or kernels (on a GPU) whose names hold one of
    names (every one for names None), for one variant of one workload; NaN where it was not profiled."""
    entry = profiled.get(workload, {}).get(variant)
    if not entry or (device != "cuda" and on == "gpu"):
        return math.nan
    on = on or ("gpu" if device == "cuda" else "cpu")
    chosen = [op for op in entry["ops"] if op["on"] == on]
    return sum(op["ms_per_step"] for op in chosen if names is None or any(n in op["name"].lower() for n in names))


PROFILED = dict(  # summary.csv's columns from a profile: (names, on: the row's device, or cpu or gpu alone)
    convert_ms=(CONVERSIONS, None), collective_ms=(COLLECTIVES, None), kernels_ms=(KERNELS, None),
    gpu_busy_ms=(None, "gpu"),
    between_ops_ms=(("(between operators)",), "cpu"),
)  # fmt: skip


def measured_ms(profiled, workload, variant, field):
    """A profile's own measure (collective_ms, exposed_ms: meter.collective_time's), NaN where it has none."""
    value = profiled.get(workload, {}).get(variant, {}).get(field)
    return math.nan if value is None else float(value)


def with_profiles(summary, profiled):
    """summary with PROFILED's columns for every profiled training row (profiled: profiles.gather's): collective_ms
    the time a collective ran where the profile measured it (on a CPU gloo's work runs on threads of its own, which
    the operators' self time leaves out), else the collectives' self time; exposed_collective_ms its time with no
    compute beside it."""
    profiled, summary = profiled or {}, summary.copy()
    rows = [row for _, row in summary.iterrows()]
    for column, (names, on) in PROFILED.items():
        summary[column] = [
            profile_ms(profiled, row.workload, row.variant, row.device, names, on) if row.kind == "train"
            else math.nan
            for row in rows
        ]  # fmt: skip

    def measured(field):
        found = [
            measured_ms(profiled, row.workload, row.variant, field) if row.kind == "train" else math.nan for row in rows
        ]
        return pd.Series(found, index=summary.index)

    summary["collective_ms"] = measured("collective_ms").fillna(summary["collective_ms"])
    summary["exposed_collective_ms"] = measured("exposed_ms")
    return summary


COLUMNS = ("causes_found", "causes_unshown")  # what with_causes adds to every row beside summary.csv's cause


def with_causes(summary):
    """summary with each row's causes, found once for the words to read: `cause` (summary.csv's: the first rule found,
    "none shown" where none passed, None for a row not asked), `causes_found` ([(rule, its numbers)] of every rule
    that passed, [] where none did, None for a row not asked) and `causes_unshown` (the flags that would show a cause
    none of the rules found). Each row is read against its workload's reference (baseline; loader.py for a loader)."""
    summary = summary.copy()
    every, flags = [], []
    for _, row in summary.iterrows():
        row = SummaryRow.of(row)
        workload = summary[summary["workload"] == row.workload]
        same = workload[workload["kind"] == row.kind]
        reference = same[same["variant"] == ("baseline" if row.kind == "train" else "loader")]
        mine = found(row, reference.iloc[0], workload) if not reference.empty and asked(row) else None
        every.append(mine)
        flags.append(tuple(unshown(row)) if mine == [] else ())
    cause = [None if mine is None else mine[0][0].cause if mine else "none shown" for mine in every]
    summary["cause"] = pd.Series(cause, index=summary.index, dtype=object)
    found_column, unshown_column = COLUMNS
    summary[found_column] = pd.Series(every, index=summary.index, dtype=object)
    summary[unshown_column] = pd.Series(flags, index=summary.index, dtype=object)
    return summary


def table():
    """docs/bench.md's table of the rules, as markdown."""
    lines = ["| cause | evidence | named when | what to try |", "|---|---|---|---|"]
    lines += [f"| {r.name} (`{r.cause}`) | {r.evidence} | {r.threshold} | {r.remedy} |" for r in RULES]
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
