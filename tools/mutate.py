"""make mutate: mutation testing of the rules an answer depends on, each module against its own mirrored tests.

mutmut (pinned in the Makefile, installed by the target on first use) changes each comparison, constant and operator
of a module in turn and runs the tests that reach the changed function; a mutant no test notices survives. The
modules are the statistics of paired rounds (bench/stages/statistics/intervals.py), the rules of the rows' answers and
the planner's stop rule (bench/stages/statistics/rules.py: needs_rounds, GIVE_UP), the epoch-start count
(bench/stages/epochs.py) and the resume rule (bench/stages/planning/planfile.py: which runs a plan.json may name). Each
is mutated in a copy of the tracked tree (results/mutate/MODULE), so the checkout is never touched; the share killed per
module and every survivor are printed, and written to results/mutate/scores.csv and survivors.txt. docs/tests.md says
what survives.

    python tools/mutate.py                      every module
    python tools/mutate.py --module epochs      one (its file's stem)
"""

import argparse
import csv
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# mutmut's own command, not `python -m mutmut`: its module sets multiprocessing's start method as it is imported, and
# a mutant's trampoline imports it again under its package's name, which -m's __main__ is not (a second set: an error)
MUTMUT = str(Path(sys.executable).parent / "mutmut")

# module -> its mirrored tests (tests/ mirrors bench/): the tests mutmut may run against its mutants
MODULES = {
    "bench/stages/statistics/intervals.py": ["tests/bench/stages/statistics/test_intervals.py"],
    "bench/stages/statistics/rules.py": ["tests/bench/stages/statistics/test_rules.py"],
    "bench/stages/epochs.py": ["tests/bench/stages/test_epochs.py"],
    "bench/stages/planning/planfile.py": ["tests/bench/stages/planning/test_planfile.py"],
}
GOAL = 0.90  # the share of mutants killed that each module should reach
# what mutmut reports a mutant as, and whether the tests noticed it
KILLED = {"killed": True, "timeout": True, "segfault": True, "survived": False, "no tests": False, "suspicious": False,
          "not checked": False, "skipped": False}  # fmt: skip


def tree(out, stem):
    """A copy of the tracked files (the checkout's, as they are now) under out/STEM, made afresh."""
    where = out / stem
    shutil.rmtree(where, ignore_errors=True)
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        if (ROOT / name).is_file():
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, where / name)
    return where


def config(module, tests, where):
    """setup.cfg's [mutmut] section in the copy: the bench package copied with the module alone mutated, the rest of
    the tree copied beside it as it is, the fast tests of the module's mirror selected."""
    also = sorted(p.name for p in where.iterdir() if p.name not in ("bench", "tests", "mutants", "setup.cfg"))
    lines = ["[mutmut]", "source_paths=bench", f"only_mutate={module}", "also_copy=", *[f"    {n}" for n in also]]
    lines += ["pytest_add_cli_args_test_selection=", *[f"    {test}" for test in tests], "    -m", "    not slow"]
    lines += ["pytest_add_cli_args=", "    -p", "    no:cacheprovider"]
    (where / "setup.cfg").write_text("\n".join(lines) + "\n")


def statuses(text):
    """[(mutant, status)] from `mutmut results --all true`'s lines ('    NAME: STATUS'), other lines left out."""
    found = []
    for line in text.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name and status in KILLED:
            found.append((name, status))
    return found


def results(where):
    """[(mutant, status)] of the last mutmut run in where."""
    shown = subprocess.run([MUTMUT, "results", "--all", "true"], cwd=where, text=True, capture_output=True)
    return statuses(shown.stdout)


def mutate(module, tests, out):
    """Run mutmut on one module in a fresh copy; return (killed, mutants, survivors, seconds)."""
    where = tree(out, Path(module).stem)
    config(module, tests, where)
    start = time.monotonic()
    run = subprocess.run([MUTMUT, "run"], cwd=where, text=True, capture_output=True)
    seconds = time.monotonic() - start
    (where / "mutmut.log").write_text(run.stdout + run.stderr)
    found = results(where)
    if run.returncode != 0 or not found:
        tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-5:])
        raise SystemExit(f"make mutate: mutmut did not run on {module} (see {where}/mutmut.log):\n{tail}")
    survivors = [(name, status) for name, status in found if not KILLED[status]]
    return len(found) - len(survivors), len(found), survivors, seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", action="append", help="a module's stem (intervals, summarize, ...); all without")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "mutate")
    args = parser.parse_args(argv)
    stems = {Path(m).stem: m for m in MODULES}
    asked = args.module or list(stems)
    unknown = [name for name in asked if name not in stems]
    if unknown:
        print(f"make mutate: no module {', '.join(unknown)} (known: {', '.join(stems)})", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    scores, said = [], []
    began = time.monotonic()
    for stem in asked:
        module = stems[stem]
        killed, total, survivors, seconds = mutate(module, MODULES[module], args.out)
        share = killed / total
        scores.append(dict(module=module, killed=killed, mutants=total, share=f"{share:.3f}", seconds=f"{seconds:.0f}"))
        mark = "" if share >= GOAL else f"  (below {GOAL:.0%})"
        print(f"{module}: {killed} of {total} mutants killed, {share:.1%}, {seconds:.0f} s{mark}", flush=True)
        for name, status in survivors:
            print(f"  {status}: {name}")
            said.append(f"{module} {status}: {name}")
    with open(args.out / "scores.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(scores[0]))
        writer.writeheader()
        writer.writerows(scores)
    (args.out / "survivors.txt").write_text("".join(line + "\n" for line in said))
    print(f"make mutate: {time.monotonic() - began:.0f} s; {args.out}/scores.csv, {args.out}/survivors.txt "
          "(`mutmut show NAME` in results/mutate/MODULE shows a survivor's change)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
