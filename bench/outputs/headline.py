"""The headline, which the bench's outputs title "The answer first": what to adopt on this machine for this model,
from the settled verdicts alone.

Every row a bench compares with the baseline lands in one group, by its speed answer and its memory answer
(bench/stages/statistics/rules.py's answers; nothing here reads a point estimate as a finding):

- a joined mode's groups first (a Joins' apart: bench/outputs/declared.py): faster, where a mode's table in the same
  results folder says the speed-up is not worth having, or not the run it claims to speed up;
- pays: faster; or no difference in speed for less memory;
- trades: slower, for less memory (worth it where memory, not speed, is the limit: a larger batch or model);
- costs: slower, or within the margin in speed for more memory;
- within the margin: its speed-up's 90% interval lies inside the declared margin (+-10% by default: --margin) and its
  memory did not move: not worth adopting for speed here;
- open: its interval reaches past the margin and holds 1 too; how many rounds at this noise would decide it is said;
- does not apply here: the technique's own record says it changed nothing (tf32 without TF32 or native bf16);
- not compiled: a compiled row whose timed steps ran no compiled code (its speed is eager code's);
- no verdict: every run failed, or its loss diverged.

Then the limits (each ceiling, and how near the baseline comes) and the rows that are data-bound (their data wait
WAIT_BOUND of the window or more: the loader sets their pace, and the mode that points to the loader's settings finds
them: declared.pointed).

The best measured is the fastest row that pays. Ceilings are limits, never options: they say how fast the model
trains with no loading at all. Two things are flagged, with their likely reason where the runs measured it: a real row
whose interval against its ceiling lies wholly above 100% (a row cannot outrun training without loading unless the
two differ in more than loading), and a combination (all, all:no-...) slower than one of its parts, by their
intervals.
"""

import math

import pandas as pd

from bench import catalogue
from bench.catalogue import SELF
from bench.outputs import declared, diffs, verdicts
from bench.outputs.verdicts import plural
from bench.schema import SummaryRow, num, rows_of
from bench.stages.statistics.causes import NAMES
from bench.stages.statistics.rules import WAIT_BOUND

ROUNDS_AT_MOST = (
    50  # a row that needs more rounds than this to settle has an effect, if any, below this machine's noise
)


def group(row, joined=()):
    """A joined mode's group (the label of an apart of joined that holds this faster row), pays, trades, costs, same,
    unsettled, n/a, eager or failed: what the row's answers say to do."""
    row = SummaryRow.of(row)
    if not row.runs_ok or row.runs_diverged:
        return "failed"
    if row.rate_basis == "unknown":
        return "unknown"
    if verdicts.not_applied(row):
        return "n/a"
    if verdicts.ran_eager(row):
        return "eager"
    speed, memory = row.speed_answer, row.memory_answer
    if speed == "faster":
        apart = [label for joins in joined for label, holds in joins.apart if holds(row)]
        if apart:
            return apart[0]  # a mode's table in the folder says the speed-up is not the one to have
        return "pays"
    if speed == "slower":  # a device that only emulates what the technique needs offers no trade: it costs
        return "trades" if memory == "less" and not why_it_costs(row) else "costs"
    if speed == "same":
        return {"less": "pays", "more": "costs"}.get(memory, "same")
    return "unsettled"


def compared(train):
    """The rows a bench compares with the baseline: not the reference, not a ceiling, not the baseline against itself
    (catalogue.SELF: the rule's check, said apart)."""
    if "speed_answer" not in train:
        return train.iloc[:0]
    return train[(train["dataset"] != "synthetic") & train["speed_answer"].notna() & (train["variant"] != SELF)]


def cost(variant):
    """' 17 lines' of the technique's diff, '' where it is not one of the diffs."""
    name = diffs.technique(variant)
    return f", {plural(diffs.cost(name), 'line')}" if name in diffs.TECHNIQUES else ""


def memory_words(row):
    row = SummaryRow.of(row)
    m = num(row.memory_vs_baseline)
    if math.isnan(m):
        return ""
    answer = row.memory_answer
    said = {"more": "more", "less": "less", "same": "unchanged"}.get(answer, "not settled")
    return f", {m:.2f}x the memory ({said})"


def item(row, why="", joined=()):
    """'amp 0.19x, 0.94x the memory (less), 17 lines: bf16 is emulated on this device'; a compiled row that pays:
    'compile 1.31x, ..., 6 lines, its compile paid back after 900 steps from a cold cache and 40 from a warm one';
    what the joined modes say right after the speed-up (a Joins' aside)."""
    row = SummaryRow.of(row)
    paid = verdicts.payback_steps(row) if row.payback_answer == "pays back" else ""
    paid = f", its compile paid back after {paid}" if paid else ""
    aside = "".join(joins.aside(row) for joins in joined)
    return f"{row.variant} {row.speedup:.2f}x{aside}{memory_words(row)}{cost(row.variant)}{paid}{why}"


def why_it_costs(row):
    """The measured reason a row is slower, where its fields say one."""
    row = SummaryRow.of(row)
    if row.bf16_emulated is True:
        return ": bf16 is emulated on this device"
    if num(row.world_size) > 1 and row.device == "cpu":
        return f": {row.world_size:.0f} processes share the same cores"
    if row.variant in catalogue.MULTI_GPU and row.device == "cuda" and num(row.world_size) < 2:
        return ": one GPU, so only its overhead shows"
    return ""


def unsettled_item(row):
    """'compile 1.06x +-20%: about 27 rounds at this noise would settle it (--repeats 27)' (a row with an interval)."""
    row = SummaryRow.of(row)
    needed = num(row.rounds_to_settle)  # bench/stages/statistics/rules.py
    if needed > ROUNDS_AT_MOST:
        more = "its effect, if any, is below this machine's noise: longer runs (--steps) or a quieter machine"
        more += " would narrow it"
    else:
        more = f"about {needed:.0f} rounds at this noise would decide it (--repeats {needed:.0f})"
    return f"{row.variant} {row.speedup:.2f}x +-{num(row.speedup_precision_pct):.0f}%: {more}"


def above_ceiling(train):
    """(row, words) for each real row whose interval against its ceiling lies wholly above 100%."""
    flagged = []
    for row in rows_of(train[train["dataset"] != "synthetic"]):
        if row.ceiling_standing == "above":
            ceiling = train[train["variant"] == row.ceiling]
            flagged.append((row, above_why(row, ceiling.iloc[0] if not ceiling.empty else None)))
    return flagged


def above_why(row, ceiling):
    """Why a row may outrun its ceiling, from what was measured."""
    row = SummaryRow.of(row)
    said = (
        f"{row.variant} runs above its ceiling ({num(row.ceiling_low_pct):.0f}% to"
        f" {num(row.ceiling_high_pct):.0f}% of {row.ceiling}, by the paired rounds): the ceiling is not a"
        " limit here, as a row cannot outrun training with no loading unless the two differ in more than loading"
    )
    if ceiling is not None and row.device == "cpu":
        mine, its = num(row.cpu_model_cores), num(ceiling.cpu_model_cores)
        if not (math.isnan(mine) or math.isnan(its)):
            return (
                f"{said}; on this CPU the model's process used {mine:.2f} cores against the ceiling's {its:.2f}"
                f" (its loader: {num(row.cpu_loader_cores):.2f}): how the cores were shared differs"
            )
        return f"{said}; on a CPU the likely reason is how the cores were shared (not measured in these runs)"
    return f"{said}; the likely reason is noise between processes or a difference in set-up (not measured)"


def parts_of(variant):
    """The techniques a combination row holds (all: ddp, amp, channels_last, compile), () for any other row."""
    if variant == "all":
        return tuple(catalogue.PARTS.values())
    switches = catalogue.combination(variant) if variant.startswith("all:") else None
    return tuple(part for switch, part in catalogue.PARTS.items() if switch not in switches) if switches else ()


def slower_than_parts(train):
    """(combination row, words) where a combination's interval lies wholly below one of its parts'."""
    flagged, rows = [], {row.variant: row for row in rows_of(compared(train))}
    for variant, row in rows.items():
        parts = [rows[p] for p in parts_of(variant) if p in rows]
        beaten = [p for p in parts if num(row.speedup_high) < num(p.speedup_low)]
        if not beaten:
            continue
        best = max(beaten, key=lambda p: p.speedup)
        slow = [p for p in parts if p.speed_answer == "slower"]
        reason = (
            f": it holds {', '.join(f'{p.variant} ({p.speedup:.2f}x on its own{why_it_costs(p)})' for p in slow)}"
            if slow
            else ": none of its parts is slower on its own, so they interact (not measured apart)"
        )
        flagged.append(
            (
                row,
                f"{variant} ({row.speedup:.2f}x) is slower than its part {best.variant} ({best.speedup:.2f}x){reason}",
            )
        )
    return flagged


def items(train, joined=()):
    """The answer for one workload's training rows: [(label, words)], empty without compared rows; joined: the modes'
    Joins (their groups first, their asides)."""
    rows = compared(train)
    if rows.empty:
        return []
    groups = {}
    for row in rows_of(rows):
        groups.setdefault(group(row, joined), []).append(row)
    pays = sorted(groups.get("pays", []), key=lambda r: -r.speedup)
    said = []
    for joins in joined:
        for label, _ in joins.apart:
            if groups.get(label):
                said.append((label, "; ".join(item(r, f": {joins.said(r)}", joined) for r in groups[label])))
    said.append(("Pays", "; ".join(item(r, joined=joined) for r in pays) if pays else "nothing measured pays here"))
    if groups.get("trades"):
        trades = "; ".join(item(r, joined=joined) for r in groups["trades"])
        said.append(("Trades speed for memory", f"{trades} (worth it only where memory, not speed, is the limit)"))
    if groups.get("costs"):
        said.append(("Costs", "; ".join(item(r, why_it_costs(r), joined) for r in groups["costs"])))
    if groups.get("same"):
        margin = verdicts.margin_words(groups["same"][0])
        same = "; ".join(item(r, joined=joined) for r in groups["same"])
        said.append((f"Within the margin ({margin})", f"{same} (not worth adopting for speed here)"))
    if groups.get("unsettled"):
        once = [r for r in groups["unsettled"] if pd.isna(num(r.rounds_to_settle))]  # one round: no interval
        items = [unsettled_item(r) for r in groups["unsettled"] if pd.notna(num(r.rounds_to_settle))]
        if once:
            items.append(f"{', '.join(f'{r.variant} {r.speedup:.2f}x' for r in once)}: one paired round, no interval"
                         f" yet{unsteady_words(once)}; run more rounds (--repeats)")  # fmt: skip
        said.append(("Open", "; ".join(items)))
    if groups.get("n/a"):
        said.append(
            ("Does not apply here", "; ".join(f"{r.variant}: {verdicts.not_applied(r)}" for r in groups["n/a"]))
        )
    if groups.get("eager"):
        said.append(("Not compiled", "; ".join(f"{r.variant}: {verdicts.ran_eager(r)}, so its {r.speedup:.2f}x is"
                                               " eager code's" for r in groups["eager"])))  # fmt: skip
    if groups.get("unknown"):
        said.append(("Not measured steadily", "; ".join(unknown_item(r) for r in groups["unknown"])))
    if groups.get("failed"):
        said.append(
            ("No verdict", f"{', '.join(r.variant for r in groups['failed'])} (failed or diverged: see its row)")
        )
    if pays:
        best = pays[0]
        said.append(
            (
                "Best measured",
                f"{best.variant}, {best.speedup:.2f}x ({num(best.speedup_low):.2f}x to"
                f" {num(best.speedup_high):.2f}x){memory_words(best)}",
            )
        )
    said += self_items(train) + why_items(train) + limit_items(train) + data_bound_items(train, joined)
    said += epoch_items(train)
    flagged = above_ceiling(train) + slower_than_parts(train) + learns_otherwise(train, joined)
    return said + [("Flag", words) for _, words in flagged]


def self_items(train):
    """The baseline against itself (catalogue.SELF), where it ran: whether the rule held (within the margin or open),
    or failed (faster or slower), as its verdict says."""
    rows = train[(train["variant"] == SELF) & train["speed_answer"].notna()] if "speed_answer" in train else []
    if len(rows) == 0:
        return []
    row = rows.iloc[0]
    answer = verdicts.SPEED_WORDS.get(row.speed_answer, row.speed_answer)
    if row.self_check == "fails":
        return [("The rule FAILS here", f"the baseline against itself came out {answer} ({row.speedup:.2f}x): the"
                 " intervals are narrower than this machine's noise; read every answer above with care")]  # fmt: skip
    return [("The rule holds", f"the baseline against itself is {answer} ({row.speedup:.2f}x), never faster or"
             " slower")]  # fmt: skip


def learns_otherwise(train, joined=()):
    """(row, words) for each row whose final loss differs from the baseline's beyond what reruns show (its
    learning_answer: bench/stages/statistics/rules.py learning), and the mode that compares learning over seeds (joined:
    the modes' Joins, declared.pointed)."""
    command = declared.pointed(joined, "learning")
    then = f"; {command} compares learning over seeds" if command else ""
    return [
        (row, f"{row.variant} ends at {num(row.loss_ratio):.2f}x the baseline's training loss"
              f" ({num(row.loss_ratio_low):.2f}x to {num(row.loss_ratio_high):.2f}x over its rounds, each"
              f" at its seed): it learns {row.learning_answer}{then}")
        for row in rows_of(compared(train)) if row.learning_answer in ("worse", "better")
    ]  # fmt: skip


def title(train):
    model = train["model"].dropna().iloc[0] if train["model"].notna().any() else "this model"
    margin = f" (margin {verdicts.margin_words(train.iloc[0])})" if not train.empty else ""
    return f"What to adopt for {model} here{margin}, from the decided answers alone"


def lines(train, joined=()):
    """The headline as markdown lines (joined: the modes' Joins)."""
    said = items(train, joined)
    if not said:
        return []
    return [f"**{title(train)}:**", "", *[f"- **{label}**: {words}." for label, words in said], ""]


def why_items(train):
    """Each row that is not faster (or not as near its ceiling as it could be), with its likeliest cause in a few
    words (bench/stages/statistics/causes.py; its evidence is in its verdict), the rows whose cause was not shown
    together."""
    if "cause" not in train:
        return []
    asked = train[train["cause"].notna()]
    named = [f"{row.variant}: {NAMES[row.cause]}" for row in rows_of(asked) if row.cause in NAMES]
    unshown = [row.variant for row in rows_of(asked) if row.cause not in NAMES]
    if unshown:
        named.append(f"{', '.join(unshown)}: not shown by what was measured (each verdict says what would show it)")
    return [("Why not faster", "; ".join(named))] if named else []


def data_bound_items(train, joined=()):
    """The real rows that wait for their data WAIT_BOUND of their window or more: data-bound, with their distance
    from the ceiling, and where to find the loader's settings (joined: the modes' Joins, declared.pointed)."""
    rows = train[(train["dataset"] != "synthetic") & (train["runs_ok"] > 0)]
    bound = [row for row in rows_of(rows) if num(row.wait_share) >= WAIT_BOUND]
    if not bound:
        return []
    words = []
    for row in bound:
        pct = num(row.ceiling_pct)
        ceiling = f", at {pct:.0f}% of its ceiling" if pd.notna(pct) else ""
        words.append(f"{row.variant} waits for data {num(row.wait_share):.0%} of its window{ceiling}")
    command = declared.pointed(joined, "loader")
    then = f"; {command} finds the loader's settings for this machine (docs/bench.md)" if command else ""
    return [("Data-bound", "; ".join(words) + f": the loader, not the technique, sets the pace{then}")]


def unsteady_words(rows):
    """' (compile: its other 2 runs not measured steadily)' where rows have runs left out (runs_unsteady), or ''."""
    said = [f"{r.variant}: its other {plural(num(r.runs_unsteady), 'run')}" for r in rows
            if num(r.runs_unsteady) > 0]  # fmt: skip
    return f" ({'; '.join(said)} not measured steadily)" if said else ""


def unknown_item(row):
    """'all: its windows' epoch starts (41x ImageNet-1k's rate) are not separated in its records and its steps stalled:
    at least 1.45x (its window's rate)'."""
    row = SummaryRow.of(row)
    floor = num(row.speedup_floor)
    floor = f": at least {floor:.2f}x (its window's rate)" if pd.notna(floor) else ""
    return (
        f"{row.variant}: its windows' epoch starts ({num(row.epoch_starts_over):.0f}x"
        f" {row.stands_for}'s rate) are not separated in its records and its steps stalled{floor}"
    )


def epoch_items(train):
    """Where the rows were not read at their windows (bench/stages/statistics/summarize.py rate_of): how, and why."""
    rows = train[(train["dataset"] != "synthetic") & (train["runs_ok"] > 0)]
    read = [row for row in rows_of(rows) if isinstance(row.rate_basis, str) and row.rate_basis != "window"]
    if not read:
        return []
    over = max(num(row.epoch_starts_over) for row in read)
    bases = {}
    for row in read:
        known = num(row.runs_ok) - num(row.runs_unsteady)
        some = f" (in {plural(known, 'run')})" if num(row.runs_unsteady) and row.rate_basis != "unknown" else ""
        bases.setdefault(row.rate_basis, []).append(row.variant + some)
    how = "; ".join(f"{basis}: {', '.join(variants)}" for basis, variants in bases.items())
    return [
        (
            "Epoch starts",
            f"up to {over:.0f}x {read[0].stands_for}'s rate in the windows: rows read at their steady steps"
            f" ({how}), data waits between the starts",
        )
    ]


def limit_items(train):
    """The ceilings as limits: how fast the model trains with no loading, and how near the baseline comes."""
    said = []
    base = train[train["variant"] == "baseline"]
    for ceiling in rows_of(train[train["dataset"] == "synthetic"]):
        what = LIMITS.get(ceiling.variant, "in full precision")
        words = f"{ceiling.variant}: {ceiling.rate_median:,.1f} samples/s {what} with no loading at all"
        if ceiling.variant == "synthetic" and not base.empty and pd.notna(SummaryRow.of(base.iloc[0]).ceiling_pct):
            words += verdicts.ceiling_words(base.iloc[0]).replace("; it", "; the baseline", 1)
        if ceiling.variant == "all-synthetic":  # how near the recipe's rows come to their own limit
            near = [f"{row.variant} {num(row.ceiling_pct):.0f}%" for row in rows_of(train)
                    if row.ceiling == "all-synthetic" and pd.notna(num(row.ceiling_pct))]  # fmt: skip
            words += f"; the recipe's rows reach {', '.join(near)} of it" if near else ""
        said.append(("Limit", words))
    return said


LIMITS = {"amp-synthetic": "in mixed precision", "all-synthetic": "as the whole recipe (mixed precision,"
          " channels_last, compiled)"}  # fmt: skip
