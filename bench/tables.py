"""The tables: runs.csv (one row per run, appended), summary.csv and summary.md (one row per variant).

Every column is a field of bench/schema.py. runs.csv is written a whole row at a time, under an
exclusive lock, in one write and flushed to disk: a bench killed at any moment leaves every
finished row readable, and two benches writing to the same folder do not interleave their rows.
A runs.csv written by an older version is upgraded in place (its columns renamed and completed),
its old form kept beside it as runs.csv.v<N>; one from a newer version is refused.
"""

import csv
import io
import os
import shutil
from pathlib import Path

import pandas as pd

from bench import BenchError, plan, schema, stats, verdicts, write_whole

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, rows are still written whole
    fcntl = None

RUN_COLUMNS = schema.RUN_COLUMNS
RUNS_NEEDED = ("bench_id", "run", "variant")  # a runs.csv without them is another file


def load_csv(path, needed=()):
    """A CSV table the bench wrote, as a DataFrame. A torn last line (a bench killed while it appended a row) is
    left out; any other damage is a BenchError naming the file and the line, and saying how many rows before it are
    whole and how to keep them: a file that is not text, is empty, is not a table, or lacks the columns needed."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BenchError(f"{path} is not a CSV table (it is not text): move it away") from None
    if not text.strip():
        raise BenchError(f"{path} is empty: move it away, or delete it")
    if not text.endswith("\n"):  # the last line was being written when the bench stopped: it never finished
        text = text[: text.rfind("\n") + 1]
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
        for count, row in enumerate(reader):
            if len(row) != len(header):
                line = reader.line_num
                raise BenchError(
                    f"{path}: line {line} is damaged ({len(row)} fields where the header has {len(header)}); the"
                    f" {count} rows before it are whole: keep them with `head -n {line - 1} {path} > kept.csv` and"
                    f" put kept.csv in its place, or move the file away"
                )
    except csv.Error as e:
        raise BenchError(f"{path} is not a CSV table ({e}): move it away") from None
    frame = pd.read_csv(io.StringIO(text))
    try:  # a newer bench may have renamed the columns needed: say so rather than call the table foreign
        schema.check_version(frame)
    except schema.VersionError as e:
        raise BenchError(f"{path}: {e}") from None
    missing = [column for column in needed if column not in header]
    if missing:
        raise BenchError(f"{path} is not a table the bench wrote: it has no {', '.join(missing)} column: move it away")
    return frame


def read_runs(path):
    """All rows of runs.csv as a DataFrame with this version's columns, those a file lacks empty (a torn last line
    is left out; other damage is a BenchError, see load_csv)."""
    try:
        runs = schema.upgrade(load_csv(path, needed=RUNS_NEEDED))
        return runs.reindex(columns=list(dict.fromkeys(RUN_COLUMNS + list(runs.columns))))
    except schema.VersionError as e:
        raise BenchError(f"{path}: {e}") from None


def prepare_runs_file(path):
    """Before the bench starts: make sure rows can be appended to path (a torn last row cut, damage refused); upgrade
    an older file first. Returns what it did, to print, or None."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    original = load_csv(path, needed=RUNS_NEEDED)  # damage is one line, before any run
    runs = read_runs(path)  # so is a newer schema
    notes = []
    with open(path, "rb+") as f:  # a row torn by a killed bench: cut, so that the next row starts on a line of its own
        content = f.read()
        if not content.endswith(b"\n"):
            f.truncate(content.rfind(b"\n") + 1)
            notes.append(f"{path}: left out its last row, torn when a bench stopped while writing it")
    if list(original.columns) == RUN_COLUMNS:
        return "\n".join(notes) or None
    version = schema.version_of(original)
    unknown = sorted(set(runs.columns) - set(RUN_COLUMNS))
    if unknown:
        raise BenchError(f"{path} has columns this version does not know ({', '.join(unknown[:5])}): move it away")
    kept = f"{path}.v{version}"
    write_whole(kept, lambda tmp: shutil.copy2(path, tmp))
    write_whole(path, lambda tmp: runs.reindex(columns=RUN_COLUMNS).to_csv(tmp, index=False))
    notes.append(f"upgraded {path} to schema version {schema.VERSION} (the file as it was: {kept})")
    return "\n".join(notes)


def append_row(path, row):
    """Append one row to the CSV at path, with the header first if the file is new. A write that fails (a
    full disk) is cut back to the rows before it and is a BenchError: they stay readable."""
    buffer = io.StringIO()
    csv.writer(buffer).writerow(["" if row.get(c) is None else row.get(c) for c in RUN_COLUMNS])
    try:
        with open(path, "ab", buffering=0) as f:  # unbuffered: what failed to be written can be cut off
            if fcntl:
                fcntl.flock(f, fcntl.LOCK_EX)
            size, data = f.seek(0, os.SEEK_END), buffer.getvalue().encode()
            if size == 0:
                header = io.StringIO()
                csv.writer(header).writerow(RUN_COLUMNS)
                data = header.getvalue().encode() + data
            try:
                written = 0
                while written < len(data):
                    written += f.write(data[written:])
                os.fsync(f.fileno())
            except OSError:
                f.truncate(size)
                raise
    except OSError as e:
        raise BenchError(f"cannot add a row to {path}: {e.strerror or e} (the rows before it are kept)") from None


CEILINGS = {"full": "synthetic", "mixed": "amp-synthetic"}  # the synthetic row each precision is compared with
# the memory a verdict and the trade-off plot read, the first measured: the GPU's whole process tree (NVML), torch's
# reserved memory, or on a CPU the host memory of the process tree
MEMORY = ("nvml_peak_mib", "peak_mem_reserved_mib", "peak_host_mem_mib")
TORCH_MEMORY = ("peak_mem_allocated_mib", "peak_mem_reserved_mib")  # torch's own counters (torch.cuda.max_memory_*)
torch_blind = verdicts.torch_blind


def summarize(runs):
    """Per workload and variant, in plan order: median and spread of the rate, speed-up and memory against the
    reference, the share of the ceiling of its precision, and how many of its runs were taken on a busy machine.

    Training runs are compared with the `baseline` variant of their workload, loader-only runs with `loader`.
    """
    rows = []
    runs = runs.assign(workload=runs["workload"].fillna("custom"))  # rows of schema version 1 name none
    for (workload, kind, variant), group in runs.groupby(["workload", "kind", "variant"], sort=False):
        ok = group[group["status"] == "ok"]
        rate = ok["samples_per_s"]
        row = dict(workload=workload, kind=kind, variant=variant, runs_ok=len(ok), runs_failed=len(group) - len(ok))
        row["runs_busy"] = int(ok["busy"].astype(str).str.lower().eq("true").sum())
        row["runs_diverged"] = int(ok["diverged_step"].notna().sum()) if "diverged_step" in ok else 0
        row.update(rate_median=rate.median(), rate_min=rate.min(), rate_max=rate.max())
        row["spread_pct"] = 100 * (row["rate_max"] - row["rate_min"]) / row["rate_median"]
        row.update({column: ok[column].median() for column in schema.MEDIANS})
        row.update(
            {column: ok[column].dropna().iloc[0] if ok[column].notna().any() else None for column in schema.FIRSTS}
        )
        row["error"] = group.loc[group["status"] != "ok", "error"].iloc[-1] if len(ok) < len(group) else None
        blind = torch_blind(dict(loader=first(ok, "loader"), device=first(ok, "device")))
        source = next(
            (c for c in MEMORY if c in ok and ok[c].notna().any() and not (blind and c in TORCH_MEMORY)), None
        )
        if source:
            row.update(memory_source=source, memory_mib=ok[source].median())
            row.update(memory_min_mib=ok[source].min(), memory_max_mib=ok[source].max())
        if "compile_cache_warm" in ok and ok["compile_s"].notna().any():
            cold = ok[ok["compile_cache_warm"].astype(str).str.lower().eq("false")]
            row["compile_cold_s"] = cold["compile_s"].median()
        rows.append(row)
    summary = pd.DataFrame(rows)
    for workload in summary["workload"].unique():
        for kind, reference in ("train", "baseline"), ("loader", "loader"):
            mine = (summary["kind"] == kind) & (summary["workload"] == workload)
            base = summary[mine & (summary["variant"] == reference)]
            if base.empty:
                continue
            ok = runs[(runs["workload"] == workload) & (runs["kind"] == kind) & (runs["status"] == "ok")]
            paired_rates = stats.paired(ok, "samples_per_s", reference)
            source = base["memory_source"].iloc[0] if "memory_source" in base else None  # alike only: one source
            paired_memory = stats.paired(ok, source, reference) if isinstance(source, str) else {}
            for i in summary.index[mine]:
                variant = summary.at[i, "variant"]
                ratios = paired_rates.get(variant, [])
                estimate, low, high = stats.interval(ratios)
                summary.loc[i, ["speedup", "speedup_low", "speedup_high"]] = estimate, low, high
                summary.loc[i, "rounds_paired"] = len(ratios)
                summary.loc[i, "speedup_precision_pct"] = 100 * stats.half_width(estimate, low, high)
                summary.loc[i, "speed_answer"] = None if variant == reference else stats.classify(low, high)
                if isinstance(source, str) and summary.at[i, "memory_source"] == source:
                    estimate, low, high = stats.interval(paired_memory.get(variant, []))
                    summary.loc[i, ["memory_vs_baseline", "memory_vs_baseline_low", "memory_vs_baseline_high"]] = (
                        estimate,
                        low,
                        high,
                    )
                    answer = stats.classify(low, high)
                    answer = dict(faster="more", slower="less").get(answer, answer)
                    summary.loc[i, "memory_answer"] = None if variant == reference else answer
            blind = mine & summary.apply(torch_blind, axis=1)  # figures that leave DALI's batches out: not compared
            for column, ratio in schema.RATIOS.items():
                summary.loc[mine, ratio] = summary.loc[mine, column] / base[column].iloc[0]
                if column in TORCH_MEMORY:
                    summary.loc[blind, ratio] = None
    rates = {(w, v): rate for w, v, rate in zip(summary["workload"], summary["variant"], summary["rate_median"])}
    for i, row in summary.iterrows():
        ceiling = CEILINGS["mixed" if pd.notna(row.get("amp_dtype")) else "full"]
        if row["kind"] == "train" and row["dataset"] != "synthetic" and pd.notna(rates.get((row.workload, ceiling))):
            summary.loc[i, "ceiling"] = ceiling
            summary.loc[i, "ceiling_pct"] = 100 * row["rate_median"] / rates[(row.workload, ceiling)]
    summary = verdicts.add(summary)
    return summary.reindex(columns=[c for c in schema.SUMMARY_COLUMNS if c in summary] + list(schema.RATIOS.values()))


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


def fmt(value, pattern="{:,.0f}"):
    return "" if value is None or pd.isna(value) else pattern.format(value)


def cells(frame, columns):
    """(headers, rows of cells) for frame's rows; columns: (header, function of a row giving the cell)."""
    return [header for header, _ in columns], [[cell(row) for _, cell in columns] for _, row in frame.iterrows()]


def table(frame, columns):
    """Markdown lines for frame's rows."""
    headers, rows = cells(frame, columns)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def runs_cell(row):
    cell = f"{row.runs_ok}" + (f" ({row.runs_failed} failed)" if row.runs_failed else "")
    cell += f", {row.runs_diverged} DIVERGED" if row.get("runs_diverged") else ""
    return cell + (f", {row.runs_busy} busy" if row.get("runs_busy") else "")


def interval_cell(row):
    """The speed-up's 95% interval over the paired rounds (bench/stats.py)."""
    low, high = row.get("speedup_low"), row.get("speedup_high")
    if row.get("speed_answer") is None or pd.isna(row.get("speed_answer")):
        return ""
    return "one round" if pd.isna(low) else f"{low:.2f}-{high:.2f}x"


def answer_cell(row):
    answer = row.get("speed_answer")
    if answer is None or pd.isna(answer):
        return "reference" if pd.notna(row.get("speedup")) and row.get("dataset") != "synthetic" else ""
    words = dict(same="no difference", unsettled=f"not settled ({row.rounds_paired:.0f} rounds)")
    return words.get(answer, answer)


def compile_cell(row):
    """The first step's time, which compiles: on an empty cache, and the median over the repeats."""
    if pd.isna(row.get("compile_s")):
        return ""
    return f"{fmt(row.get('compile_cold_s'), '{:.1f}') or '-'} / {row.compile_s:.1f}"


def label(row):
    """A variant's name, and what its row can and cannot show."""
    if row.get("runs_diverged"):
        return f"{row.variant} (DIVERGED)"
    if row.get("dataset") == "synthetic":
        return f"{row.variant} (ceiling)"
    if row.variant in plan.MULTI_GPU and row.get("device") == "cuda":
        gpus = row.get("dp_devices") if row.variant == "dp" else row.get("world_size")
        if pd.notna(gpus) and gpus < 2:
            return f"{row.variant} (1 GPU: overhead only)"
    if row.variant == "dp" and row.get("device") == "cpu":
        return "dp (no GPU: a passthrough)"
    return row.variant


def settled_note(summary):
    """How many of the rows compared with a reference got a settled answer, and over how many rounds."""
    asked = summary[summary["speed_answer"].notna()] if "speed_answer" in summary else summary.iloc[:0]
    if asked.empty:
        return None
    settled = asked[asked["speed_answer"] != "unsettled"]
    rounds = asked["rounds_paired"]
    span = f"{rounds.min():.0f}" if rounds.min() == rounds.max() else f"{rounds.min():.0f} to {rounds.max():.0f}"
    return (
        f"Settled: {len(settled)} of {len(asked)} rows (faster, slower or no difference beyond +-{stats.BAND:.0%},"
        f" by 95% intervals over {span} paired rounds)."
    )


def first(frame, column):
    """The column's first value in frame, None where there is none."""
    return frame[column].dropna().iloc[0] if column in frame and frame[column].notna().any() else None


def markdown(summary, headings, stamp, notes=()):
    """The summary as markdown: per workload, a table for training runs and one for the input pipeline alone."""
    lines = []
    for workload, heading in headings.items():
        lines += section(summary[summary["workload"] == workload], f"{heading} ({stamp})")
    for note in [settled_note(summary), *notes, diverged_note(summary), busy_note(summary)]:
        if note:
            lines += ["", f"**{note}**"]
    return "\n".join(lines) + "\n"


def section(summary, title):
    lines = [f"### {title}", ""]
    train, loaders = summary[summary["kind"] == "train"], summary[summary["kind"] == "loader"]
    if not train.empty:
        lines += table(train, train_columns(train))
        lines += ["", blind_note(train)] if blind_note(train) else []
        lines += ["", "Verdicts (from the fields above, by the rules of bench/verdicts.py):", ""]
        lines += [f"- {v}" for v in train["verdict"].dropna()]
    if not loaders.empty:
        lines += ["", "Input pipeline alone (`loader.py --bench`, `loader_dali.py --bench`):", ""]
        lines += table(loaders, LOADER_COLUMNS)
        lines += [""] + [f"- {v}" for v in loaders["verdict"].dropna()]
    return lines + [""]


def train_columns(train):
    """The training table's columns: the memory ones by what was measured (GPU or host), compile time if any."""
    columns = [
        ("variant", label),
        ("samples/s (median)", lambda r: fmt(r.rate_median, "{:,.1f}")),
        ("speed-up", lambda r: fmt(r.get("speedup"), "{:.2f}x")),
        ("95% interval", interval_cell),
        ("answer", answer_cell),
        ("of ceiling", lambda r: fmt(r.get("ceiling_pct"), "{:.0f}%")),
        ("data wait", lambda r: fmt(r.data_wait_frac, "{:.1%}")),
        ("starved", lambda r: fmt(r.starved_frac, "{:.1%}")),
        ("ms per step", lambda r: fmt(verdicts.step_ms(r), "{:.1f}")),
        ("epoch starts", lambda r: fmt(r.epoch_starts_timed, "{:.0f}")),
    ]
    if train["nvml_peak_mib"].notna().any() or train["peak_mem_allocated_mib"].notna().any():
        columns += [
            ("torch allocated MiB", lambda r: torch_cell(r, r.peak_mem_allocated_mib)),
            ("torch reserved MiB", lambda r: torch_cell(r, r.peak_mem_reserved_mib)),
            ("NVML MiB (process tree)", lambda r: fmt(r.nvml_peak_mib)),
            ("NVML vs baseline", lambda r: fmt(r.get("nvml_peak_vs_baseline"), "{:.2f}x")),
        ]
    else:
        columns += [
            ("host memory MiB (PSS)", lambda r: fmt(r.peak_host_mem_mib)),
            ("vs baseline", lambda r: fmt(r.get("peak_host_mem_vs_baseline"), "{:.2f}x")),
        ]
    if "compile_s" in train and train["compile_s"].notna().any():
        columns += [("compile s, cold / median", compile_cell)]
    return columns + [("val acc", lambda r: fmt(r.val_acc, "{:.3f}")), ("runs", runs_cell)]


def blind_note(train):
    """The note under a training table whose torch memory figures leave DALI's batches out, or None."""
    blind = [
        row["variant"]
        for _, row in train.iterrows()
        if torch_blind(row) and pd.notna(row.get("peak_mem_allocated_mib"))
    ]
    if not blind:
        return None
    return (
        f"(not seen) {', '.join(blind)}: DALI hands out its batches in its own GPU memory, which torch's counters do"
        " not see; its torch figures leave them out and are compared with nothing: compare the NVML column."
    )


def torch_cell(row, value):
    """A torch memory figure; a DALI row's marked: it leaves out DALI's own memory (see the note under the table)."""
    return fmt(value) + (" (not seen)" if torch_blind(row) and pd.notna(value) else "")


LOADER_COLUMNS = [
    ("loader", lambda r: r.variant),
    ("images/s (median)", lambda r: fmt(r.rate_median)),
    ("vs loader.py", lambda r: fmt(r.get("speedup"), "{:.2f}x")),
    ("95% interval", interval_cell),
    ("answer", answer_cell),
    ("epoch starts", lambda r: fmt(r.epoch_starts_timed, "{:.0f}")),
    ("runs", runs_cell),
]
