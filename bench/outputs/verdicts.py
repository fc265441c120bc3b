"""The words of a bench: each row's verdict and the summary's notes, from the numbers, the answers and the causes
the stages put in the summary (bench/stages/statistics/rules.py, its DERIVED; bench/stages/statistics/causes.py), never
written by hand and never worked out here: every number in a verdict is a field of the summary, so it matches the table.
The renderers (bench/outputs/markdown.py, bench/outputs/headline.py, bench/outputs/report.py) read the summary and these
words, and the cells' rules (fmt, present) are here once for all of them.

    with_verdicts(summary, joined)
                             the summary (its numbers, answers and causes) with a verdict for every row: what
                             summary.csv holds (bench/modes/speed.py summary_of puts them together); joined: what
                             the modes' tables add to it, as they declare it (bench/outputs/declared.py Joins)
"""

import math

import pandas as pd

from bench.catalogue import SELF
from bench.outputs.declared import pointed
from bench.schema import SummaryRow, num
from bench.stages.statistics.causes import UNSHOWN
from bench.stages.statistics.rules import (
    ACCURACY_GAP,
    CORES_CHANGE,
    DECIDING,
    EQUIVALENCE,
    MARGIN,
    WAIT_BOUND,
    WAIT_CHANGE,
    WAIT_LITTLE,
)


def present(value):
    """A cell's value is there: not None, not NaN (nor pandas' NA), not ''."""
    if value is None or (isinstance(value, str) and value == ""):
        return False
    try:
        return not bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or an array: there
        return True


def fmt(value, pattern="{:,.0f}"):
    """A table's cell: the value by pattern, '' where it is not there."""
    return pattern.format(value) if present(value) else ""


def with_verdicts(summary, joined=()):
    """summary (its numbers, each row's answers and causes: bench/stages) with a `verdict` for every row: training
    rows against their workload's baseline, loader rows against loader.py; joined: the modes' Joins, whose words a
    row's verdict says too."""
    summary = summary.copy()
    summary["verdict"] = None
    for i, row in summary.iterrows():
        workload = summary[summary["workload"] == row.workload]
        same = workload[workload["kind"] == row.kind]
        reference = same[same["variant"] == ("baseline" if row.kind == "train" else "loader")]
        base = reference.iloc[0] if not reference.empty else None
        summary.at[i, "verdict"] = verdict(row, base, row.causes_found, joined)
    return summary


def why_words(row, found, joined=()):
    """' Why not faster: waiting for data: it waited for data 35% of its window; try the loader's settings (...).
    Also: ...', from the causes found (bench/stages/statistics/causes.py); where none passed, that the run does not show
    it; a row held back by its data is told what the joined modes say of its data (a Joins' on_data)."""
    row = SummaryRow.of(row)
    answer = row.speed_answer
    why = {"faster": "Why not nearer its ceiling", "unsettled": "What may hold it back"}.get(answer, "Why not faster")
    if not found:
        flags = row.causes_unshown or ()
        return f" {why}: {UNSHOWN}{': ' + ', '.join(flags) if flags else ''}."
    (rule, numbers), others = found[0], found[1:]
    said = f" {why}: {rule.name}: {rule.words.format(**numbers)}; to try: {rule.remedy}."
    if rule.cause in ("data", "loader_limit"):
        said += "".join(f" {words}." for words in (joins.on_data(row) for joins in joined) if words)
    if others:
        said += " Also " + "; ".join(f"{r.name}: {r.words.format(**n)}" for r, n in others) + "."
    return said


def verdict(row, base, found=None, joined=()):
    """One line: what the variant did (speed, memory, each against the noise of the repeats) and why, from its
    measured fields; found: the causes of a row that is not faster (bench/stages/statistics/causes.py), said last;
    joined: the modes' Joins, their words said too."""
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    name = row.variant
    if not row.runs_ok:
        return f"{name}: no verdict: all {row.runs_failed} of its runs failed ({row.error})."
    if row.runs_diverged:
        return (
            f"{name}: no verdict: its loss diverged (NaN or inf) in {row.runs_diverged} of {row.runs_ok} runs, so its"
            " speed was measured on meaningless numbers."
        )
    if row.kind == "loader":
        if base is None or row.variant == base.variant:
            return f"{name}: the input pipeline alone delivers {row.rate_median:,.0f} images/s{noise_of(row)}."
        return f"{name}: {speed(row, 'images/s of loader.py')}, the input pipeline alone.{busy(row)}"
    if row.dataset == "synthetic":
        return (
            f"{name}: the ceiling: {row.rate_median:,.1f} samples/s on batches already on the device, the speed"
            f" limit of {row.model} here; the real rows of its precision are read against it.{busy(row)}"
        )
    if row.rate_basis == "unknown":
        return f"{name}: no verdict on its speed.{basis_words(row)}{busy(row)}"
    if base is None or name == base.variant:
        reached = ceiling_words(row)
        parts = [f"compute {num(row.compute_ms):.1f} ms a step"] if pd.notna(num(row.compute_ms)) else []
        parts += [f"waiting for data {num(row.wait_share):.0%} of the time"] if pd.notna(num(row.wait_share)) else []
        parts += [stall_words(row)] if stall_words(row) else []
        if pd.notna(num(row.energy_per_1k_samples_j)):
            parts += [f"{num(row.energy_per_1k_samples_j):,.1f} J per 1,000 samples ({row.energy_source})"]
        said = f": {', '.join(parts)}" if parts else ""
        return (
            f"{name}: the reference, {row.rate_median:,.1f} samples/s{noise_of(row)}{said}{reached}.{mfu_words(row)}"
            f"{basis_words(row)}{busy(row)}"
        )
    if not_applied(row):
        return f"{name}: does not apply here: {not_applied(row)}, as the baseline ({speed(row, 'speed')}).{busy(row)}"
    if ran_eager(row):
        return f"{name}: no verdict on compiling: {ran_eager(row)} ({speed(row, 'speed')} is eager code's).{busy(row)}"
    if name == SELF:
        return f"{name}: {self_words(row)}{busy(row)}"
    head = f"{name}: {speed(row, 'speed')}{busy_rounds_words(row)}"
    if pd.notna(row.memory_vs_baseline):
        head += f", {memory(row)}"
    if pd.notna(num(row.energy_per_1k_samples_j_vs_baseline)):  # energy: the medians' ratio (energy_source's)
        head += f" and {num(row.energy_per_1k_samples_j_vs_baseline):.2f}x the energy per sample"
    named = {rule.cause for rule, _ in found or []}
    said = reasons(row, base, named, joined)
    why = why_words(row, found, joined) if found is not None else ""
    return (
        f"{head}{': ' + '; '.join(said) if said else ''}.{peer_words(row)}{mfu_words(row)}{basis_words(row)}{why}"
        f"{busy(row)}"
    )


def basis_words(row):
    """' Read at its median step: its windows held an epoch start 41x as often as training on ImageNet-1k would ...'
    where its rate is not its window's (bench/stages/statistics/summarize.py rate_of), or where a folder of one's own
    put epoch starts in its windows at its own rate; '' elsewhere."""
    row = SummaryRow.of(row)
    basis, over, real = row.rate_basis, num(row.epoch_starts_over), row.stands_for
    starts = num(row.epoch_starts_timed)
    if basis == "window" or not isinstance(basis, str):
        if real == "its own data" and starts > 0:
            epoch = fmt(num(row.steps_per_epoch), " (an epoch of {:,.0f} steps at this batch)")
            return (
                f" Its windows held {plural(starts, 'epoch start')} each, as often as training on this folder does"
                f"{epoch}: each a refill of the loader, which a folder that samples a larger set makes more often"
                " than training on that set would."
            )
        return ""
    held = (
        f"its windows held epoch starts {over:.0f}x as often as training on {real} would (each a refill of the loader)"
    )
    unsteady, runs = num(row.runs_unsteady), num(row.runs_ok)
    some = f" in {plural(runs - unsteady, 'run')} of {runs:.0f}" if unsteady > 0 else ""
    if basis == "median step":
        said = (
            f" Read at its median step{some} (its steps were steady): {held}, and its records do not separate them,"
            " nor its data wait between them."
        )
    elif basis == "steady steps":
        said = f" Read at its steady steps{some}: {held}; the steps that began an epoch are left out."
    elif basis == "mixed":
        said = f" Read at its steady steps or its median step{some}: {held}."
    else:
        said = ""
    if said and not unsteady:
        return said
    floor = num(row.rate_floor)
    floor = fmt(floor, " Its window's rate, refill included, is a floor: {:,.1f} samples/s")
    floor += fmt(num(row.speedup_floor), ", {:.2f}x the baseline's") + "." if floor else ""
    p90, median = num(row.step_time_p90_ms), num(row.step_time_median_ms)
    stalled = fmt(p90 / median, " (the slowest tenth {:.1f}x its median step)") if median > 0 else ""
    if basis == "unknown":
        return (
            f" Its steady rate is not known: {held}, which its records do not separate, and its steps"
            f" stalled{stalled}, so its median step is not its steady step either.{floor}"
        )
    return (
        f"{said} In its other {plural(unsteady, 'run')} its steps stalled, so neither its window nor its median step"
        f" is its steady rate: they are left out.{floor}"
    )


def stall_words(row):
    """'its steps stall: the slowest tenth take 102 ms or more against a median of 58 ms (1.8x), while the GPU waited
    for data 4% of the time: stalls between steps, not waits for data', or '' where its steps are steady."""
    row = SummaryRow.of(row)
    p90, median = num(row.stall_p90_ms), num(row.stall_median_ms)
    if pd.isna(p90):
        return ""
    said = f"its steps stall: the slowest tenth take {p90:,.0f} ms or more against a median of {median:,.0f} ms"
    said += f" ({p90 / median:.1f}x)"
    wait = num(row.wait_share)
    if pd.notna(wait) and wait < WAIT_BOUND:
        who = "the GPU" if row.device == "cuda" else "the model"
        said += f", while {who} waited for data {wait:.0%} of the time: stalls between steps, not waits for data"
    elif pd.notna(wait):
        said += f", with a data wait of {wait:.0%}: the input pipeline falls behind now and then"
    return said


def ran_eager(row):
    """Why a compiled row measured no compiled code ('compiled code did not run in its timed window'), or ''.
    Its runs count the timed steps whose loss came through compiled code (meter.py): none, and the row's speed is
    eager code's, whatever it reads (torch 2.11 once fell back to eager silently after the FLOP count)."""
    row = SummaryRow.of(row)
    if pd.isna(row.compile_mode) or num(row.compiled_steps_timed) != 0:
        return ""
    return "compiled code did not run in its timed window (torch.compile fell back to eager code)"


def mfu_words(row):
    """' It reaches 41% of this GPU's datasheet peak for its precision (MFU).', or '' where the peak is not known."""
    row = SummaryRow.of(row)
    mfu = num(row.mfu_pct)
    if pd.isna(mfu):
        return ""
    peak, gpus = num(row.peak_tflop_per_s), num(row.world_size)
    whose = "this GPU's" if not gpus > 1 else f"its {gpus:.0f} GPUs'"
    return f" It reaches {mfu:.0f}% of {whose} datasheet peak for its precision ({peak:.0f} TFLOP/s: MFU)."


def peer_words(row):
    """' Against ddp (the same 2 processes and global batch): 0.84x the speed (...), 0.95x the memory per process
    (...).', or '' for a row without a peer."""
    row = SummaryRow.of(row)
    peer = row.peer
    if not isinstance(peer, str) or pd.isna(num(row.speedup_vs_peer)):
        return ""
    said = f" Against {peer} (the same {num(row.world_size):.0f} processes and global batch): "
    said += ratio_words(row, "speedup_vs_peer", "the speed")
    if pd.notna(num(row.memory_vs_peer)):
        said += ", " + ratio_words(row, "memory_vs_peer", "the memory per process")
    return said + "."


def ratio_words(row, column, what):
    """'0.84x the speed, slower (0.80x to 0.88x)' by the interval (as the speed-up's answer), '(one round)' without."""
    row = SummaryRow.of(row)
    value, low, high = (num(getattr(row, name)) for name in (column, f"{column}_low", f"{column}_high"))
    answer = row.peer_speed_answer if column == "speedup_vs_peer" else row.peer_memory_answer
    if pd.isna(low) or not isinstance(answer, str):
        return f"{value:.2f}x {what} (one round)"
    said = dict(same="no measurable difference", unsettled="not settled").get(answer, answer)
    return f"{value:.2f}x {what}, {said} ({low:.2f}x to {high:.2f}x)"


def plural(count, word):
    """'1 round', '3 rounds'."""
    return f"{count:.0f} {word}{'' if round(count) == 1 else 's'}"


def not_applied(row):
    """Why a row's technique did nothing here, where its own record says so, else '': tf32 on a device with neither
    TF32 nor native bf16 left its matmuls in fp32 (train_tf32.py said so), so the run was the baseline's."""
    row = SummaryRow.of(row)
    if row.variant == "tf32" and row.matmul_precision == "fp32":
        return f"this {'GPU' if row.device == 'cuda' else 'CPU'} has neither TF32 nor native bf16, so it ran fp32"
    return ""


def ceiling_words(row):
    """'; it reaches 76% of the ceiling (71% to 80%)', or that it cannot be told from it, by the paired interval."""
    row = SummaryRow.of(row)
    standing = row.ceiling_standing
    pct, low, high = num(row.ceiling_pct), num(row.ceiling_low_pct), num(row.ceiling_high_pct)
    if not isinstance(standing, str):
        return ""
    if standing == "one":
        return f"; it reaches {pct:.0f}% of the ceiling (one round)"
    if standing == "at":
        return f"; it runs at the ceiling, as far as the rounds tell ({low:.0f}% to {high:.0f}% of it)"
    spread = f" ({low:.0f}% to {high:.0f}%)" if round(low) != round(high) else ""
    return f"; it reaches {pct:.0f}% of the ceiling{spread}"


def interval_words(low, high, rounds, share=95):
    return f"{share:g}% interval {low:.2f}x to {high:.2f}x over {plural(rounds, 'paired round')}"


def margin_of(row):
    """A row's margin (its summary's), MARGIN where a summary has none."""
    row = SummaryRow.of(row)
    margin = num(row.margin)
    return MARGIN if math.isnan(margin) else margin


def margin_words(row):
    """'+-10%': the margin a row's speed-up is read against, as every answer says it."""
    row = SummaryRow.of(row)
    return f"+-{100 * margin_of(row):.3g}%"


def rounds_left(row):
    """'about 3 more rounds at this noise would decide it (--repeats 5)', from rounds_to_settle; '' without."""
    row = SummaryRow.of(row)
    needed, ran = num(row.rounds_to_settle), num(row.rounds_paired)
    if math.isnan(needed):
        return ""
    if math.isinf(needed):
        return "no count of rounds decides it at this noise"
    return f"about {plural(max(1, needed - ran), 'more round')} at this noise would decide it (--repeats {needed:.0f})"


def busy_rounds_words(row):
    """' (2 of its rounds read a run taken on a busy machine; without them it is faster: its answer rests on them, so
    it stays open)', from rounds_busy and quiet_answer (bench/stages/statistics/summarize.py); '' where no round was
    busy."""
    row = SummaryRow.of(row)
    n = num(row.rounds_busy)
    if not n > 0 or not isinstance(row.quiet_answer, str):
        return ""
    quiet, busy = row.quiet_answer, row.busy_answer
    said = f" ({plural(n, 'round')} read a run taken on a busy machine (steal or other processes' CPU)"
    if quiet == busy or not isinstance(busy, str):
        return f"{said}; without them the answer is the same)"
    return (f"{said}; with them it is {SPEED_WORDS.get(busy, busy)}, without them {SPEED_WORDS.get(quiet, quiet)}: its"
            " answer rests on them, so it stays open)")  # fmt: skip


def self_words(row):
    """The baseline against itself (catalogue.SELF): what its answer says of the rule on this machine."""
    row = SummaryRow.of(row)
    s, low, high = row.speedup, num(row.within_low), num(row.within_high)
    if row.self_check == "fails":
        return (f"the baseline's script against itself came out {row.speed_answer} ({speed(row, 'speed')}): the"
                " intervals here are narrower than this machine's noise (a disturbed round, or drift the pairing"
                " did not take out): read every answer beside it with care, or run it again.")  # fmt: skip
    if row.speed_answer == "same":
        return (f"the baseline's script against itself, within the margin ({s:.2f}x; 90% interval {low:.2f}x to"
                f" {high:.2f}x, inside {margin_words(row)}): the rule holds here, as it must.")  # fmt: skip
    return (f"the baseline's script against itself, open ({speed(row, 'speed')}): never faster or slower, as it must"
            " be; its interval says how wide this machine's noise leaves a row after these rounds.")  # fmt: skip


def speed(row, what):
    """'1.51x faster (95% interval 1.21x to 1.88x over 3 paired rounds)', 'not settled after 3 rounds ...'."""
    row = SummaryRow.of(row)
    s, low, high, rounds = (
        row.speedup,
        num(row.speedup_low),
        num(row.speedup_high),
        num(row.rounds_paired),
    )
    answer = row.speed_answer
    if pd.isna(low):
        return f"{s:.2f}x the {what}, open: one paired round, no interval to judge the noise by"
    if answer in ("faster", "slower") and pd.notna(num(row.deciding_low)):
        words = interval_words(num(row.deciding_low), num(row.deciding_high), rounds, share=100 * DECIDING)
        return f"{s:.2f}x {answer} ({words}, wholly {'above' if answer == 'faster' else 'below'} 1)"
    if answer in ("faster", "slower"):
        return f"{s:.2f}x {answer} ({interval_words(low, high, rounds)})"
    if answer == "same":
        words = interval_words(num(row.within_low), num(row.within_high), rounds, share=100 * EQUIVALENCE)
        return f"within the margin in {what} ({s:.2f}x; {words}, inside {margin_words(row)}): not worth adopting for it"
    left = rounds_left(row)
    return (
        f"{s:.2f}x the {what}, open after {plural(rounds, 'round')} ({interval_words(low, high, rounds)}: the noise,"
        f" +-{row.speedup_precision_pct:.0f}%, is wider than its distance from 1 and from the margin,"
        f" {margin_words(row)}{'; ' + left if left else ''})"
    )


def memory(row):
    row = SummaryRow.of(row)
    what = "GPU memory" if row.memory_source == "nvml_peak_mib" else "memory"
    if row.memory_source == "peak_host_mem_mib":
        what = "host memory"
    m, low, high = row.memory_vs_baseline, num(row.memory_vs_baseline_low), num(row.memory_vs_baseline_high)
    answer = row.memory_answer
    if pd.isna(low):
        return f"{m:.2f}x the {what} (one round)"
    if answer == "same":
        return f"{what} unchanged ({m:.2f}x, {low:.2f}x to {high:.2f}x)"
    if answer in ("more", "less"):
        return f"{m:.2f}x the {what}, {answer} ({low:.2f}x to {high:.2f}x)"
    return f"{m:.2f}x the {what}, not settled ({low:.2f}x to {high:.2f}x)"


def reasons(row, base, named=(), joined=()):
    """Why, from the fields: the data wait and the compute per step, then what else the row shows; what a cause
    named (named: bench/stages/statistics/causes.py's keys) is said there, not here."""
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    said = []
    wait, base_wait = num(row.wait_share), num(base.wait_share)
    faster = row.speed_answer == "faster"
    fresh_loader = pd.notna(row.loader) and row.loader != base.loader
    if fresh_loader and pd.notna(base_wait) and base_wait < WAIT_LITTLE and not faster:
        said.append(f"the baseline waited for data {base_wait:.0%} of the time, so a faster loader had little to win")
    if base_wait >= WAIT_BOUND and wait >= WAIT_BOUND and not faster:
        said.append(
            f"the data wait stayed high ({base_wait:.0%} to {wait:.0%}): the input pipeline, not compute, sets the pace"
        )
    if row.bf16_emulated is True and row.speedup < 1 and "precision" not in named:
        where = "GPU (before Ampere)" if row.device == "cuda" else "CPU (no AVX-512-BF16 or AMX)"
        said.append(f"bf16 is emulated on this {where}, so autocast costs more than it saves")
    step = f"compute per step went from {num(base.compute_ms):.1f} ms to {num(row.compute_ms):.1f} ms"
    if pd.isna(num(row.compute_ms)) or pd.isna(num(base.compute_ms)):
        step = None
    if pd.isna(wait) or pd.isna(base_wait):
        said += [step] if step else []
    elif abs(wait - base_wait) < WAIT_CHANGE:
        said.append(f"{step or 'compute per step unknown'} while the data wait stayed at {wait:.0%}")
    else:
        moved = "fell" if wait < base_wait else "rose"
        said.append(
            f"{step or 'compute per step unknown'} and the data wait {moved} from {base_wait:.0%} to {wait:.0%}"
        )
    cores = cores_words(row, base)
    if cores:
        said.append(cores)
    if stall_words(row) and "stalls" not in named:
        said.append(stall_words(row))
    if row.torch_blind is True:
        said.append(
            "its GPU memory is NVML's, which sees DALI's own memory where its batches live (torch's counters do not)"
            if row.memory_source == "nvml_peak_mib"
            else "its GPU memory is not compared: its batches live in DALI's own memory, which torch's counters do"
            " not see, and NVML gave no figure"
        )
    if num(row.world_size) > 1:
        where = "the same CPU" if row.device == "cpu" else f"{row.world_size:.0f} GPUs"
        said.append(f"{row.world_size:.0f} processes of batch {row.global_batch_size / row.world_size:.0f} on {where}")
    if pd.notna(num(row.compile_s)):
        cold = f" ({row.compile_cold_s:.1f} s on an empty cache)" if pd.notna(num(row.compile_cold_s)) else ""
        said.append(f"compiling took {row.compile_s:.1f} s{cold} before the first timed step")
    if payback_words(row):
        said.append(payback_words(row))
    said += [words for words in (joins.said(row) for joins in joined) if words]  # what the modes' tables add
    if num(row.compile_graph_breaks) > 0:  # torch.compile ran, in pieces: each break a return to Python
        graphs, breaks = int(num(row.compile_graphs)), int(num(row.compile_graph_breaks))
        said.append(f"torch.compile made {plural(graphs, 'graph')} with {plural(breaks, 'graph break')}")
    if learning_words(row, base, joined):
        said.append(learning_words(row, base, joined))
    return said


def learning_words(row, base, joined=()):
    """'its final training loss is 1.84x the baseline's over 3 rounds at their seeds (1.52x to 2.23x), more than reruns
    show: check that it learns alike (COMMAND)' (bench/stages/statistics/rules.py learning); with one round,
    no interval: a validation accuracy ACCURACY_GAP or more from the baseline's is pointed to the mode that compares
    learning over seeds (joined: the modes' Joins, declared.pointed), not judged; '' elsewhere (a difference no larger
    than reruns show says nothing)."""
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    command = pointed(joined, "learning")
    answer = row.learning_answer
    if answer in ("worse", "better"):
        low, high = num(row.loss_ratio_low), num(row.loss_ratio_high)
        return (
            f"its final training loss is {num(row.loss_ratio):.2f}x the baseline's over"
            f" {plural(num(row.rounds_paired), 'round')} at their seeds ({low:.2f}x to {high:.2f}x), beyond"
            f" what reruns show: it learns {answer}; check that it learns alike" + (f" ({command})" if command else "")
        )
    if pd.notna(num(row.loss_ratio_low)) or base is None:
        return ""
    if pd.notna(num(row.val_acc)) and pd.notna(num(base.val_acc)):
        if abs(row.val_acc - base.val_acc) >= ACCURACY_GAP:
            return (
                f"its validation accuracy, {row.val_acc:.3f} against the baseline's {base.val_acc:.3f}, is one run"
                " each: no rerun says how far apart two runs end"
                + (f" ({command} compares learning over seeds)" if command else "")
            )
    return ""


ANSWER_WORDS = {"faster": "faster", "slower": "slower", "same": "no measurable difference", "unsettled": "not settled"}
SPEED_WORDS = {**ANSWER_WORDS, "same": "within the margin", "unsettled": "open"}  # a bench row's speed answer


def payback_steps(row):
    """'1,900 steps from a cold cache, 60 from a warm one' ('' where neither is known)."""
    row = SummaryRow.of(row)
    cold, warm = num(row.payback_cold_steps), num(row.payback_warm_steps)
    if math.isnan(cold):
        return "" if math.isnan(warm) else f"{warm:,.0f} step{'' if warm == 1 else 's'} from a warm cache"
    said = f"{cold:,.0f} step{'' if cold == 1 else 's'} from a cold cache"
    return said if math.isnan(warm) else f"{said}, {warm:,.0f} from a warm one"


def payback_words(row):
    """When compiling pays for itself: 'compiling pays back after 1,900 steps from a cold cache and 60 from a warm
    one', never, or not settled (with the steps of the estimate where it is above 1)."""
    row = SummaryRow.of(row)
    answer, steps = row.payback_answer, payback_steps(row)
    if answer == "pays back" and steps:
        return f"compiling pays back after {steps}"
    if answer == "never":
        return "compiling never pays back here: it is slower than the baseline"
    if answer == "not settled":
        why = "its speed-up has no interval yet (one round)" if math.isnan(num(row.speedup_low)) else (
            "its speed-up's interval holds 1")  # fmt: skip
        would = f"at its estimated speed-up it would pay back after {steps}, but " if steps else ""
        return f"whether compiling pays back is not settled: {would}{why}"
    return ""


def cores_words(row, base):
    """On a CPU, where a change of loader (or its share) moved the cores: 'its loading took 0.1 cores from the model
    (the baseline's: 0.4), which used 1.9 (1.6)'; None where not measured or not moved."""
    row, base = SummaryRow.of(row), SummaryRow.of(base)
    if row.device != "cpu":
        return None
    loader, model = num(row.cpu_loader_cores), num(row.cpu_model_cores)
    base_loader, base_model = num(base.cpu_loader_cores), num(base.cpu_model_cores)
    if any(pd.isna(v) for v in (loader, model, base_loader, base_model)):
        return None
    fresh_loader = pd.notna(row.loader) and row.loader != base.loader
    if not fresh_loader and abs(loader - base_loader) < CORES_CHANGE:
        return None
    return (
        f"on this CPU its loading took {loader:.2f} cores from the model (the baseline's: {base_loader:.2f}), and the"
        f" model used {model:.2f} ({base_model:.2f})"
    )


def noise_of(row):
    row = SummaryRow.of(row)
    if row.runs_ok < 2:
        return " (one run)"
    return f" (repeats spread {row.spread_pct:.0f}%)"


def busy(row):
    row = SummaryRow.of(row)
    if not row.runs_busy:
        return ""
    return f" Taken on a busy machine in {row.runs_busy} of {row.runs_ok} runs: not to be trusted."


def busy_note(summary):
    """A sentence on the runs taken while something else competed, or None."""
    busy, total = int(summary["runs_busy"].sum()), int(summary["runs_ok"].sum())
    if not busy:
        return None
    return (
        f"The machine was busy during {busy} of {total} runs: read these numbers with care (busy_reason in runs.csv)."
    )


def diverged_note(summary):
    """A sentence on the runs whose loss diverged, or None: their speed must not be read without it."""
    diverged = summary[summary["runs_diverged"] > 0]
    if diverged.empty:
        return None
    names = ", ".join(sorted(set(diverged["variant"])))
    return (
        f"The loss diverged (NaN or inf) in {int(diverged['runs_diverged'].sum())} runs ({names}): their speed was"
        " measured on meaningless numbers and is not a fair comparison (diverged_step in runs.csv; try a lower --lr)."
    )


def settled_note(summary):
    """How many of the rows compared with a reference got an answer (faster, slower, within the margin), over how many
    rounds, and what the baseline against itself says of the rule (catalogue.SELF)."""
    asked = summary[summary["speed_answer"].notna()] if "speed_answer" in summary else summary.iloc[:0]
    if "dataset" in asked:  # the ceilings are limits, not answers
        asked = asked[asked["dataset"] != "synthetic"]
    check = asked[asked["variant"] == SELF]
    asked = asked[asked["variant"] != SELF]
    if asked.empty:
        return None
    decided = asked[asked["speed_answer"] != "unsettled"]
    rounds = asked["rounds_paired"][asked["rounds_paired"] > 0]  # a row not measured steadily has none
    rounds = rounds if not rounds.empty else asked["rounds_paired"]
    span = plural(rounds.max(), "paired round")
    span = span if rounds.min() == rounds.max() else f"{rounds.min():.0f} to {span}"
    said = (
        f"Decided: {len(decided)} of {plural(len(asked), 'row')} (faster or slower by {100 * DECIDING:g}% intervals, or"
        f" within the margin, {margin_words(asked.iloc[0])}, by {100 * EQUIVALENCE:g}% intervals; over {span})."
    )
    if not check.empty:
        row = check.iloc[0]
        answer = dict(same="within the margin", unsettled="open").get(row.speed_answer, row.speed_answer)
        holds = "the rule holds" if row.self_check != "fails" else "the rule FAILS here: read every row with care"
        said += f" The baseline against itself ({SELF}): {answer}, {row.speedup:.2f}x: {holds}."
    return said
