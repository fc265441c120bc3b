"""The markdown tables: summary.md (one row per variant, its verdict beside) from the summary, and the cells that
report.html shows alike."""

import pandas as pd

from bench import catalogue
from bench.catalogue import SELF
from bench.outputs import declared, headline, verdicts
from bench.outputs.verdicts import busy_note, diverged_note, fmt, settled_note
from bench.schema import SummaryRow, num, rows_of


def cells(frame, columns):
    """(headers, rows of cells) for frame's rows; columns: (header, function of a row giving the cell)."""
    return [header for header, _ in columns], [[cell(row) for _, cell in columns] for row in rows_of(frame)]


def table(frame, columns):
    """Markdown lines for frame's rows."""
    headers, rows = cells(frame, columns)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def runs_cell(row):
    row = SummaryRow.of(row)
    cell = f"{row.runs_ok}" + (f" ({row.runs_failed} failed)" if row.runs_failed else "")
    cell += f", {row.runs_diverged} DIVERGED" if row.runs_diverged else ""
    return cell + (f", {row.runs_busy} busy" if row.runs_busy else "")


def interval_cell(row):
    """The speed-up's 95% interval over the paired rounds."""
    row = SummaryRow.of(row)
    low, high = row.speedup_low, row.speedup_high
    if row.speed_answer is None or pd.isna(row.speed_answer):
        return ""
    return "one round" if pd.isna(low) else f"{low:.2f}-{high:.2f}x"


def answer_cell(row):
    row = SummaryRow.of(row)
    if row.dataset == "synthetic":  # a speed limit to read the real rows against, not an option
        return "limit (no loading)" if row.kind == "train" else ""
    if verdicts.not_applied(row):
        return "does not apply here"
    answer = row.speed_answer
    if answer is None or pd.isna(answer):
        return "reference" if pd.notna(row.speedup) and row.dataset != "synthetic" else ""
    if row.rate_basis == "unknown":
        return "not measured steadily"
    if row.variant == SELF:  # the baseline against itself: the rule's check
        return f"{'FAILS' if row.self_check == 'fails' else 'holds'}: {verdicts.SPEED_WORDS[answer]}"
    margin = verdicts.margin_words(row)
    words = dict(same=f"within {margin}", unsettled=f"open ({verdicts.plural(row.rounds_paired, 'round')})")
    return words.get(answer, answer)


def ceiling_cell(row):
    """The row's rate against its ceiling's, paired by round: a share where its interval lies below 100%, 'at it'
    where the interval holds 100% (the two cannot be told apart), 'ABOVE' where it lies wholly above."""
    row = SummaryRow.of(row)
    standing = row.ceiling_standing
    pct, low, high = num(row.ceiling_pct), num(row.ceiling_low_pct), num(row.ceiling_high_pct)
    if not isinstance(standing, str):
        return ""
    words = {"one": f"{pct:.0f}% (one round)", "above": f"ABOVE it ({low:.0f}-{high:.0f}%)"}
    return words.get(standing, f"at it ({low:.0f}-{high:.0f}%)" if standing == "at" else f"{pct:.0f}%")


def memory_cell(row):
    """Memory against the baseline's: the one ratio of the table, the verdicts and the plots
    (bench/stages/statistics/summarize.py: paired by round, of the memory the verdict reads)."""
    row = SummaryRow.of(row)
    return fmt(row.memory_vs_baseline, "{:.2f}x")


def payback_cell(row):
    """'1,900 / 60' steps, 'never', 'not settled' (with the estimate's steps where above 1), or '' (not compiled)."""
    row = SummaryRow.of(row)
    answer = row.payback_answer
    if not isinstance(answer, str):
        return ""
    cold, warm = (fmt(num(getattr(row, f"payback_{which}_steps")), "{:,.0f}") or "-" for which in ("cold", "warm"))
    steps = "" if cold == warm == "-" else f"{cold} / {warm}"
    if answer == "pays back":
        return steps
    return answer if answer == "never" or not steps else f"{steps} (not settled)"


def compile_cell(row):
    """The first step's time, which compiles: on an empty cache, and the median over the repeats."""
    row = SummaryRow.of(row)
    if pd.isna(row.compile_s):
        return ""
    return f"{fmt(row.compile_cold_s, '{:.1f}') or '-'} / {row.compile_s:.1f}"


def label(row):
    """A variant's name, and what its row can and cannot show."""
    row = SummaryRow.of(row)
    if row.runs_diverged:
        return f"{row.variant} (DIVERGED)"
    if row.dataset == "synthetic":
        return f"{row.variant} (ceiling)"
    if row.variant in catalogue.MULTI_GPU and row.device == "cuda":
        gpus = row.dp_devices if row.variant == "dp" else row.world_size
        if pd.notna(gpus) and gpus < 2:
            return f"{row.variant} (1 GPU: overhead only)"
    if row.variant == "dp" and row.device == "cpu":
        return "dp (no GPU: a passthrough)"
    if verdicts.not_applied(row):
        return f"{row.variant} (does not apply here)"
    return row.variant


def markdown(summary, headings, stamp, notes=(), joined=()):
    """The summary as markdown: per workload, a table for training runs and one for the input pipeline alone; joined:
    what the modes' tables add (their Joins: bench/outputs/declared.py)."""
    lines = []
    for workload, heading in headings.items():
        lines += section(summary[summary["workload"] == workload], f"{heading} ({stamp})", joined)
    for note in [settled_note(summary), *notes, diverged_note(summary), busy_note(summary)]:
        if note:
            lines += ["", f"**{note}**"]
    return "\n".join(lines) + "\n"


def section(summary, title, joined=()):
    lines = [f"### {title}", ""]
    train, loaders = summary[summary["kind"] == "train"], summary[summary["kind"] == "loader"]
    if not train.empty:
        lines += headline.lines(train, joined)
        lines += table(train, train_columns(train, joined))
        lines += ["", blind_note(train)] if blind_note(train) else []
        lines += ["", energy_note(train)] if energy_note(train) else []
        lines += ["", "Verdicts (from the fields above, by the rules of bench/outputs/verdicts.py):", ""]
        lines += [f"- {v}" for v in train["verdict"].dropna()]
    if not loaders.empty:
        lines += ["", "Input pipeline alone (`loader.py --bench`, `loader_dali.py --bench`):", ""]
        lines += table(loaders, LOADER_COLUMNS)
        lines += [""] + [f"- {v}" for v in loaders["verdict"].dropna()]
    return lines + [""]


def train_columns(train, joined=()):
    """The training table's columns: the memory ones by what was measured (GPU or host), compile time if any, then
    the column of each joined mode (a Joins' column) where some row has a cell in it."""
    columns = [
        ("variant", label),
        ("samples/s (median)", rate_cell),
        ("speed-up", lambda r: fmt(r.speedup, "{:.2f}x")),
        ("95% interval", interval_cell),
        ("answer", answer_cell),
        ("of ceiling", ceiling_cell),
        ("data wait", lambda r: fmt(r.data_wait_steady_frac, "{:.1%}")),
        ("starved", lambda r: fmt(r.starved_steady_frac, "{:.1%}")),
        ("ms per step", step_cell),
        ("epoch starts", lambda r: fmt(r.epoch_starts_timed, "{:.0f}")),
    ]
    if train["nvml_peak_mib"].notna().any() or train["peak_mem_allocated_mib"].notna().any():
        columns += [
            ("torch allocated MiB", lambda r: torch_cell(r, r.peak_mem_allocated_mib)),
            ("torch reserved MiB", lambda r: torch_cell(r, r.peak_mem_reserved_mib)),
            ("NVML MiB (process tree)", lambda r: fmt(r.nvml_peak_mib)),
            ("memory vs baseline", memory_cell),
        ]
    else:
        columns += [
            ("host memory MiB (PSS)", lambda r: fmt(r.peak_host_mem_mib)),
            ("memory vs baseline", memory_cell),
        ]
    if "cpu_loader_cores" in train and train["cpu_loader_cores"].notna().any() and (train["device"] == "cpu").all():
        columns += [("cores: model / loader", cores_cell)]
    if "compile_s" in train and train["compile_s"].notna().any():
        columns += [("compile s, cold / median", compile_cell), ("pays back after, steps cold / warm", payback_cell)]
    if "achieved_tflop_per_s" in train and train["achieved_tflop_per_s"].notna().any():
        columns += [("GFLOP per step", lambda r: fmt(num(r.flop_per_step) / 1e9, "{:,.1f}"))]
        columns += [("TFLOP/s", lambda r: fmt(r.achieved_tflop_per_s, "{:.3g}"))]
    if "mfu_pct" in train and train["mfu_pct"].notna().any():
        columns += [("MFU", lambda r: fmt(r.mfu_pct, "{:.1f}%"))]
    if "energy_per_1k_samples_j" in train and train["energy_per_1k_samples_j"].notna().any():
        columns += [("J per 1k samples", lambda r: fmt(num(r.energy_per_1k_samples_j), "{:,.1f}"))]
        columns += [("energy vs baseline", lambda r: fmt(num(r.energy_per_1k_samples_j_vs_baseline), "{:.2f}x"))]
        columns += [("mean W", lambda r: fmt(num(r.avg_power_w), "{:,.0f}"))]
    for joins in joined:
        if joins.column is not None and any(joins.column[1](row) for row in rows_of(train)):
            columns += [joins.column]
    return columns + [("val acc", lambda r: fmt(r.val_acc, "{:.3f}")), ("runs", runs_cell)]


def rate_cell(row):
    """The row's median rate; where it is not its windows' (rate_basis), how it was read; where not known, its floor."""
    row = SummaryRow.of(row)
    basis = row.rate_basis
    if basis == "unknown":
        return fmt(row.rate_floor, "not known (at least {:,.1f})") or "not known"
    cell = fmt(row.rate_median, "{:,.1f}")
    if not cell or not isinstance(basis, str) or (basis == "window" and not num(row.runs_unsteady)):
        return cell
    unsteady, runs = num(row.runs_unsteady), num(row.runs_ok)
    some = f", {runs - unsteady:.0f} of {runs:.0f} runs" if unsteady > 0 else ""
    return f"{cell} ({basis}{some})"


def step_cell(row):
    """A step at the row's rate; where its steps stall (stall_p90_ms), its median and 90th percentile too."""
    row = SummaryRow.of(row)
    cell, p90, median = (
        fmt(num(row.step_ms), "{:.1f}"),
        num(row.stall_p90_ms),
        num(row.stall_median_ms),
    )
    return f"{cell} (median {median:,.0f}, p90 {p90:,.0f})" if cell and pd.notna(p90) else cell


def cores_cell(row):
    """On a CPU, the cores the training process and its loader used in the window (medians over the runs)."""
    row = SummaryRow.of(row)
    model, loader = row.cpu_model_cores, row.cpu_loader_cores
    return "" if pd.isna(model) or pd.isna(loader) else f"{model:.2f} / {loader:.2f}"


# the columns that answer the title's question, speed and memory, on a laptop's screen (the report's first table, the
# README's): the rest are one click away in the report and all in summary.md
MAIN = [
    "variant",
    "samples/s (median)",
    "speed-up",
    "95% interval",
    "answer",
    "of ceiling",
    "host memory MiB (PSS)",
    "NVML MiB (process tree)",
    "memory vs baseline",
    "MFU",
    "J per 1k samples",
]


def main_columns(train, joined=()):
    return [(header, cell) for header, cell in train_columns(train, joined) if header in MAIN]


def energy_note(train):
    """Where the energy column's figures came from (energy_source of the rows that have one), or None."""
    if "energy_per_1k_samples_j" not in train or train["energy_per_1k_samples_j"].isna().all():
        return None
    sources = sorted(set(train.loc[train["energy_per_1k_samples_j"].notna(), "energy_source"].dropna()))
    return f"Energy (J per 1k samples) over each run's timed window, from {'; '.join(sources)}."


def blind_note(train):
    """The note under a training table whose torch memory figures leave DALI's batches out, or None."""
    blind = [row.variant for row in rows_of(train) if row.torch_blind is True and pd.notna(row.peak_mem_allocated_mib)]
    if not blind:
        return None
    return (
        f"(not seen) {', '.join(blind)}: DALI hands out its batches in its own GPU memory, which torch's counters do"
        " not see; its torch figures leave them out and are compared with nothing: compare the NVML column."
    )


def torch_cell(row, value):
    """A torch memory figure; a DALI row's marked: it leaves out DALI's own memory (see the note under the table)."""
    row = SummaryRow.of(row)
    return fmt(value) + (" (not seen)" if row.torch_blind is True and pd.notna(value) else "")


LOADER_COLUMNS = [
    ("loader", lambda r: r.variant),
    ("images/s (median)", lambda r: fmt(r.rate_median)),
    ("vs loader.py", lambda r: fmt(r.speedup, "{:.2f}x")),
    ("95% interval", interval_cell),
    ("answer", answer_cell),
    ("epoch starts", lambda r: fmt(r.epoch_starts_timed, "{:.0f}")),
    ("runs", runs_cell),
]


# ----------------------------------------------------------------------------- a mode's page, as its module declares
# it (bench/outputs/declared.py): its title, then its blocks


def page(title, blocks):
    """A mode's page: '### title', then its blocks (drawn)."""
    return f"### {title}\n\n" + drawn(blocks)


def drawn(blocks):
    """A page's blocks in markdown, each followed by a blank line: a paragraph, a list (Bullets), a table (Rows)."""
    lines = []
    for block in blocks:
        if isinstance(block, declared.Rows):
            lines += rows(block)
        elif isinstance(block, declared.Bullets):
            lines += [f"- {line}" for line in block.lines]
        else:
            lines.append(block)
        lines.append("")
    return "\n".join(lines)


def rows(table):
    """A Rows block's markdown lines: its headers, the rule, a line a record."""
    lines = ["| " + " | ".join(header for header, _ in table.columns) + " |", "|" + "---|" * len(table.columns)]
    return lines + ["| " + " | ".join(cell(r) for _, cell in table.columns) + " |" for r in table.records]
