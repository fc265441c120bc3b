"""Fitting a plan to its budget: the fastest row's window on a GPU (fit_window), what saved GPU runs know of a
workload's rows (Known, known_costs), whole rounds kept and rows left out from the end of the priority order
(fit_budget), and the estimate printed before the first run (print_estimate, sources). What a run should take is
bench/stages/cost.py's; the runs are bench/stages/planning/build.py's.
"""

from dataclasses import dataclass

from bench.stages.cost import COST_S, FIRST_WARM_COMPILE_S, WARMUP_STEADY, WINDOW_MIN_S, WINDOW_S, first_step_s, run_s
from bench.stages.planning.planned import Run
from bench.stages.statistics import rules


def fit_window(budget_s, variants, loaders, names, repeats, gpu, bf16_native, known=None, overhead_s=0.0):
    """The fastest row's window (GPU, steps auto) that lets min(repeats, 3) rounds fit the budget, within
    WINDOW_MIN_S..WINDOW_S. known: {workload: Known} where the rows' costs come from saved runs; overhead_s: what the
    bench spends before its rounds (the data it generates)."""
    if budget_s is None or not gpu:
        return WINDOW_S
    known = known or {}
    fixed = weight = first = calibrations = 0.0
    for name in names:
        if name in known:  # a round after the first: no evaluation, a warm compile; the first's extras apart
            f, w, extra = known[name].round_costs(variants)
            fixed, weight, first = fixed + f, weight + w, first + extra
            continue
        probe = [Run("", v, "train", 2, 1, workload=name) for v in variants]
        probe += [Run("", v, "loader", 2, 1, workload=name) for v in loaders]
        fixed += sum(run_s(r, 0, gpu, bf16_native) for r in probe)
        weight += sum(run_s(r, 1, gpu, bf16_native) - run_s(r, 0, gpu, bf16_native) for r in probe)
        first += sum(COST_S["gpu"]["cold"] - COST_S["gpu"]["warm"] for r in probe if r.compiles)
        calibrations += 1
    for name in known:
        fixed += sum(run_s(Run("", v, "loader", 2, 1, workload=name), 0, gpu, bf16_native) for v in loaders)
    wanted = min(repeats, SETTLING_ROUNDS)
    spare = 0.97 * budget_s - COST_S["gpu"]["calibrate"] * calibrations - first - wanted * fixed - overhead_s
    if weight <= 0:  # loader rows alone: no training window to fit
        return WINDOW_S
    return max(WINDOW_MIN_S, min(WINDOW_S, spare / (wanted * weight)))


SETTLING_ROUNDS = 3  # rounds whose paired interval can settle a GPU's answer: a budget keeps them before more rows


@dataclass
class Known:
    """A GPU workload whose rows' costs come from saved GPU runs (bench/stages/cost.py's saved_costs): the steps
    follow from their step times (no calibration run), the estimates from every part of their runs."""

    saved: dict  # {variant: Saved} of the rows planned that have saved runs
    warmup_steps: int
    eval_images: int

    def fastest_step_s(self):
        return min(s.step_s for s in self.saved.values())

    def round_costs(self, variants):
        """(seconds of a later round besides the fastest row's window, seconds per second of that window, the first
        round's extra seconds: its evaluations and cold compiles) of the rows that have saved runs."""
        fixed = weight = extra = 0.0
        for variant in variants:
            s = self.saved.get(variant)
            if s is None:
                continue
            warm_first = first_step_s(s, Run("", variant, "train", 2, 1))  # a later round's
            fixed += s.start_s + warm_first + s.warm_step_s * max(0, self.warmup_steps - 1)
            weight += s.step_s / self.fastest_step_s()
            extra += (s.first_s - warm_first) + s.eval_s * self.eval_images / 1000
        return fixed, weight, extra


def known_costs(works, gpu_count, variants, saved):
    """{workload: Known} for the GPU workloads whose planned rows have saved runs at their model and batch, and whose
    steps are auto: their steps come from those runs instead of a calibration run. works: {workload: its Work as the
    flags and the machine give it (bench/stages/planning/plan.py work)}."""
    if not gpu_count or not saved:
        return {}
    known = {}
    for name, chosen in works.items():
        rows = {v: saved[(chosen.model, int(chosen.batch_size), v)] for v in variants
                if (chosen.model, int(chosen.batch_size), v) in saved}  # fmt: skip
        if chosen.steps != "auto" or not rows:
            continue
        fastest = min(rows.values(), key=lambda s: s.step_s)
        warmup = min(chosen.warmup_steps, WARMUP_STEADY) if fastest.steady else chosen.warmup_steps
        needed = [s.needed for s in rows.values()]
        if None not in needed:  # the saved runs' own warm-up steps said how many each needed: the most of them
            warmup = min(warmup, max(2, *needed))
        images = chosen.eval_samples if isinstance(chosen.eval_samples, int) else 1000
        known[name] = Known(rows, warmup, images)
    return known


def fit_budget(runs, budget_s, overhead_s, wanted=1):
    """(the runs that fit the budget, the variants left out): whole rounds (every workload's round r before any
    r + 1), as many as fit. Where fewer than wanted rounds fit (min(rounds asked, SETTLING_ROUNDS): an answer needs
    rounds to settle, and a round of every row with no interval settles nothing), the baseline runs beside the rows
    are left out first (the baseline once a round), then rows from the end of the priority order until wanted rounds
    fit, two training rows kept at least (one compared with the baseline); if not even the first round fits, rows are
    left out until it does."""
    if budget_s is None:
        return runs, []
    order = list(dict.fromkeys(r.variant for r in runs if r.kind == "train"))
    trained = len(order)
    order += list(dict.fromkeys(r.variant for r in runs if r.kind == "loader"))
    left_out = []
    kept = whole_rounds(runs, budget_s, overhead_s)
    if len({r.repeat for r in kept}) < wanted:  # the baseline beside every other row goes before a row does
        runs = [r for r in runs if not r.beside]
        kept = whole_rounds(runs, budget_s, overhead_s)
    while len({r.repeat for r in kept}) < wanted and len(order) > 1 and len(order) - 1 >= min(2, trained):
        left_out.insert(0, order.pop())
        kept = whole_rounds([r for r in runs if r.variant not in left_out], budget_s, overhead_s)
    while sum(r.estimate_s for r in kept) + overhead_s > budget_s and len(order) > 1:
        left_out.insert(0, order.pop())
        kept = [r for r in kept if r.variant != left_out[0] and not r.beside]
    return kept, left_out


def whole_rounds(runs, budget_s, overhead_s):
    """The runs of as many whole rounds as fit the budget (the first one always)."""
    kept, spent = [], overhead_s
    by_repeat = {}
    for run in runs:
        by_repeat.setdefault(run.repeat, []).append(run)
    for _, group in sorted(by_repeat.items()):
        cost = sum(r.estimate_s for r in group)
        if spent + cost > budget_s and kept:
            break
        kept, spent = kept + group, spent + cost
    return kept


def sources(known, runs, gpu):
    """Where a GPU plan's estimates come from, row by row: saved runs (which), or assumed."""
    if not gpu or not known:
        return []
    said, assumed = [], []
    for workload, k in known.items():
        planned = {r.variant: r for r in runs if r.workload == workload and r.kind == "train"}
        for variant, s in k.saved.items():
            if variant in planned:
                said.append(f"{workload} {variant}: {plural(s.runs, 'saved run')} of {s.where}")
        assumed += [f"{workload} {v}" for v in planned if v not in k.saved]
        warm = [v for v, r in planned.items() if r.compiles and (v not in k.saved or k.saved[v].later_first_s is None)]
        if warm and len({r.repeat for r in runs}) > 1:
            assumed.append(
                f"a compiled row's first step from a warm cache ({FIRST_WARM_COMPILE_S:.0f} s: no saved run)"
            )
    loaders = dict.fromkeys(r.variant for r in runs if r.kind == "loader")
    assumed += [f"{v} ({COST_S['gpu']['loader']:.0f} s a run)" for v in loaders]
    return [f"from saved runs: {'; '.join(said)}"] + ([f"assumed: {'; '.join(assumed)}"] if assumed else [])


def plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def print_estimate(fit, runs):
    """The plan's estimate, before the first run (and with --dry-run)."""
    where = "GPU: as one round on an H100 measured them" if fit.gpu else "CPU: as measured on a 2-core CPU"
    budget = f"{fit.budget_s / 60:.0f} min" if fit.budget_s else "none"
    rounds = f"{fit.rounds} round(s)" + (f" of the {fit.rounds_asked} asked" if fit.rounds < fit.rounds_asked else "")
    if fit.auto:
        rounds += (
            f", then more for the rows still open (neither faster, slower nor within the margin), while the"
            f" budget allows ({rules.MAX_ROUNDS} rounds at most)"
        )
    longest = max(fit.round_s, default=0) / 60
    inside = sum(r.window_estimate_s for r in runs) / max(1e-9, sum(r.estimate_s for r in runs))
    print(f"estimate: {fit.total_s / 60:.0f} min for {len(runs)} runs in {rounds} (budget {budget}); the longest"
          f" round of a workload about {longest:.1f} min; {inside:.0%} of the runs' time in their windows")  # fmt: skip
    window = f"the fastest row's window {fit.window_s:.1f} s, " if fit.window_s else ""
    cost = COST_S["gpu" if fit.gpu else "cpu"]
    if fit.sources:  # a GPU plan from its saved runs: each row's parts as they measured them
        print(f"  from: {window}each row's start, first step, warm-up, steps and evaluation as its saved GPU runs"
              " measured them (medians); once a round has run, its measured times")  # fmt: skip
    else:
        print(f"  from: {window}{cost['fixed']:.0f} s a run outside its window, a compile {cost['cold']:.0f} s cold"
              f" and {cost['warm']:.0f} s warm ({where}); once a round has run, its measured times")  # fmt: skip
    for line in fit.sources + fit.generated:
        print(f"  {line}")
    if fit.left_out:
        print(f"  left out to fit the budget: {', '.join(fit.left_out)} (--budget none, or a larger one, keeps them)")
