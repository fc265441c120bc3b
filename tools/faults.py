"""The tests' power, measured: one-line faults written into the code, one at a time, and the tests that name the
faulted file run against each (stopping at the first failure); a fault that every one of them passes survived.

    python tools/faults.py                  # every fault; a table of caught and survived
    python tools/faults.py --only payback   # the faults whose names hold one of these words (comma-separated)
    python tools/faults.py --root DIR       # another checkout (its code and its tests: a before and an after)
    python tools/faults.py --fast-only      # make test-fast's tests alone (minutes, not the slow tests' half hour)

The tests run are those whose file names the faulted module (its import or its file name): the fast ones first,
then, where none failed, the slow ones. The faulted file is put back after each fault, on Ctrl-C too.
"""

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

# (name, file, the line as it is, as the fault makes it): each a change of one line that a user would meet as a wrong
# answer, a lost row or a crash, never as a syntax error
FAULTS = [
    ("statistics: the interval at 50%", "bench/stages/statistics/intervals.py",
     "low, high = scipy_stats().ttest_1samp(logs, 0.0).confidence_interval(confidence)",
     "low, high = scipy_stats().ttest_1samp(logs, 0.0).confidence_interval(0.5)"),
    ("verdicts: faster read from the interval's top", "bench/stages/statistics/rules.py",
     "    if low > 1:\n        return \"faster\"", "    if high > 1:\n        return \"faster\""),
    ("verdicts: stalls at twice the threshold", "bench/stages/statistics/rules.py",
     "STALL = 1.25 ", "STALL = 2.5 "),
    ("answers: a row's data wait read as its compute", "bench/stages/statistics/rules.py",
     "    Derived(\"wait_share\", float, waited),", "    Derived(\"wait_share\", float, compute_ms),"),
    ("warm-up rule: the last step counted", "bench/stages/statistics/rules.py",
     "    steps = list(warmup_ms[:-1])", "    steps = list(warmup_ms)"),
    ("payback: the saving per step as base / speed-up", "bench/stages/statistics/summarize.py",
     "    saved_s = base_step_s * (1 - 1 / speedup)", "    saved_s = base_step_s / speedup"),
    ("resume: finished runs run again", "bench/stages/running/execute.py",
     '    done = {r["run"] for r in records if r.get("status") == "ok"}', "    done = set()"),
    ("executor: earlier parts' time not counted", "bench/stages/running/execute.py",
     "    deadline = started + budget_s - spent_s if budget_s else math.inf",
     "    deadline = started + budget_s if budget_s else math.inf"),
    ("one-line errors: exit code 1", "checks.py", "    raise SystemExit(2)", "    raise SystemExit(1)"),
    ("data check: a file that does not look whole is not read", "checks.py",
     "        if not ok:\n            read(path)", "        if not ok and False:\n            read(path)"),
    ("meter: the window opens a step late", "meter.py",
     "        if step == self.warmup:  # the warm-up is over",
     "        if step == self.warmup + 1:  # the warm-up is over"),
    ("parity: a confidence band, not a prediction band", "bench/modes/parity.py",
     "* sd * math.sqrt(1 + 1 / n)", "* sd * math.sqrt(1 / n)"),
    ("max-batch: the step-down quarters", "bench/modes/max_batch.py",
     "            batch = max(step_of, batch // 2 - (batch // 2) % step_of)",
     "            batch = max(step_of, batch // 4 - (batch // 4) % step_of)"),
    ("loader sweep: the slowest of the faster settings", "bench/modes/tune_loader.py",
     '        best = max(faster, key=lambda c: c["speedup"])',
     '        best = min(faster, key=lambda c: c["speedup"])'),
    ("configuration: a mode's copy keeps the original's fields", "bench/config.py",
     "    return replace(config, **top, **{g: replace(getattr(config, g), **values) for g, values in groups.items()})",
     "    return config"),
    ("configuration: the asked mode's own flags not read", "bench/cli.py",
     "    return dataclasses.replace(checked, own=own(flags, checked)) if own is not None else checked",
     "    return checked"),
    ("edge: learning's rerun band dropped (worse as soon as above 1.00x)", "bench/stages/statistics/rules.py",
     "    if low > 1 + band:\n        return \"worse\"", "    if low > 1:\n        return \"worse\""),
    ("edge: a disturbed baseline's bound ten times as wide", "bench/stages/statistics/intervals.py",
     "DISTURBED = 5.0 ", "DISTURBED = 50.0 "),
    ("edge: the same-band's top doubled", "bench/stages/statistics/rules.py",
     "    if 1 - band <= low and high <= 1 + band:", "    if 1 - band <= low and high <= 1 + 2 * band:"),
    ("ddp: no pause after destroy_process_group", "train_ddp.py",
     "        checks.let_the_group_workers_finish()", "        pass"),
    ("fsdp: no pause after destroy_process_group", "train_fsdp.py",
     "        checks.let_the_group_workers_finish()", "        pass"),
]  # fmt: skip


def fail(message):
    print(f"faults.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def naming(root, module):
    """The test files that name a module: `import checks`, `from bench.stages.statistics import summarize`,
    "train_ddp.py"."""
    stem = Path(module).stem
    pattern = re.compile(rf"\b{stem}\b")
    return sorted(
        str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py") if pattern.search(p.read_text())
    )


def pytest(root, files, marks):
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", marks, *files]
    result = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    failed = [line.split(" ")[1] for line in result.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    return result.returncode, failed


def inject(root, name, file, before, after, passes=("not slow", "slow")):
    """(caught by: the first failing test, or None; seconds). passes: pytest's -m, one after the other."""
    path = root / file
    text = path.read_text()
    if text.count(before) != 1:
        fail(f"{name}: the line is not once in {file}")
    started = time.monotonic()
    files = naming(root, file)
    try:
        path.write_text(text.replace(before, after))
        for marks in passes:
            code, failed = pytest(root, files, marks)
            if code not in (0, 5):  # 5: no test of that kind
                return (failed or [f"pytest exit {code}"])[0], time.monotonic() - started
        return None, time.monotonic() - started
    finally:
        path.write_text(text)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1], help="the checkout to fault")
    p.add_argument("--only", default="", help="comma-separated words: the faults whose names hold one")
    p.add_argument("--fast-only", action="store_true", help="the fast tests alone (make test-fast's), not the slow")
    args = p.parse_args()
    if not (args.root / "tests").is_dir():
        fail(f"--root {args.root}: no tests/ folder there")
    words = [w.strip() for w in args.only.split(",") if w.strip()]
    chosen = [f for f in FAULTS if not words or any(w in f[0] for w in words)]
    if not chosen:
        fail(f"--only {args.only}: no fault's name holds it")
    caught = 0
    print("| fault | file | caught by | seconds |\n| --- | --- | --- | ---: |", flush=True)
    for name, file, before, after in chosen:
        passes = ("not slow",) if args.fast_only else ("not slow", "slow")
        by, seconds = inject(args.root.resolve(), name, file, before, after, passes)
        caught += by is not None
        print(f"| {name} | {file} | {by or '**survived**'} | {seconds:.0f} |", flush=True)
    print(f"\n{caught} of {len(chosen)} faults caught")


if __name__ == "__main__":
    main()
