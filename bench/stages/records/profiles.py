"""Where the time went: the operators each technique changed, from the profiles of a bench with --profile.

A run with --profile records a few training steps after its timed window with torch.profiler (meter.py): its trace
beside its log, and in its metrics (profile_ops) every operator's self time per step on the CPU, and each GPU kernel's
on the GPU. The bench profiles round 1; here each technique's operators are set against its workload's baseline's,
and the ones whose time changed most are kept: faster, slower, new (not in the baseline's step at all), gone
(`shown`). The report shows them in each technique's section, beside its diff and its numbers
(bench/outputs/report.py); the causes read the operators' time by name (bench/stages/statistics/causes.py).
"""

from pathlib import Path

from bench import kept_for_bench, run_metrics

FILE = "profiles.json"
SHOWN = 6  # operators shown per technique and workload


def gather(out, bench_id, runs):
    """{workload: {variant: dict(ops, steps, trace, note[, collective_ms, exposed_ms])}} of the bench's profiled ok
    training runs (round 1), read from their metrics and written to out/profiles.json; without logs (a saved
    baseline), what out/profiles.json holds for the bench; {} if there is none."""
    found = {}
    for row, metrics in run_metrics(out, bench_id, runs):
        if metrics.get("profile_ops"):
            kept = dict(
                ops=metrics["profile_ops"], steps=metrics.get("profile_steps"), note=metrics.get("profile_note")
            )
            for field in ("profile_collective_ms", "profile_exposed_ms"):  # where a collective ran
                if metrics.get(field) is not None:
                    kept[field.removeprefix("profile_")] = metrics[field]
            kept["trace"] = Path(metrics["profile_trace"]).name if metrics.get("profile_trace") else None
            found.setdefault(str(row.workload), {}).setdefault(row.variant, kept)
    return kept_for_bench(Path(out) / FILE, bench_id, "workloads", found) or {}


def changes(profiled, workload, variant, reference="baseline", shown=SHOWN):
    """The operators whose self time per step changed most from the reference's to the variant's, in one workload:
    [dict(name, on, before_ms, after_ms, change)], change being faster, slower, new or gone; [] where either was
    not profiled (or for the reference itself)."""
    rows = profiled.get(workload, {})
    if variant == reference or variant not in rows or reference not in rows:
        return []
    before = {(op["on"], op["name"]): op["ms_per_step"] for op in rows[reference]["ops"]}
    after = {(op["on"], op["name"]): op["ms_per_step"] for op in rows[variant]["ops"]}
    found = []
    for key in before.keys() | after.keys():
        was, now = before.get(key, 0.0), after.get(key, 0.0)
        if abs(now - was) < 1e-3:  # under a microsecond a step: no change to show
            continue
        change = "new" if not was else "gone" if not now else "faster" if now < was else "slower"
        found.append(dict(name=key[1], on=key[0], before_ms=was, after_ms=now, change=change))
    return sorted(found, key=lambda c: -abs(c["after_ms"] - c["before_ms"]))[:shown]


def shown(profiled):
    """What the report shows of each profiled technique: {workload: {variant: dict(changes, trace)}}, changes its
    operators that changed most against the baseline's (changes()), trace its trace file's name."""
    return {
        workload: {v: dict(changes=changes(profiled, workload, v), trace=kept.get("trace")) for v, kept in rows.items()}
        for workload, rows in profiled.items()
    }


def step_ms(profiled, workload, variant):
    """The self time of a profiled step's operators, summed per device: {on: ms}."""
    total = {}
    for op in profiled.get(workload, {}).get(variant, {}).get("ops", []):
        total[op["on"]] = total.get(op["on"], 0.0) + op["ms_per_step"]
    return total
