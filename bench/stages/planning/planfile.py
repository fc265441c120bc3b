"""plan.json: a bench's plan kept with it (its runs, each workload's work, its mode's state and the configuration it
was asked), so that --resume can finish it as it was planned.
"""

import json
import sys
from dataclasses import asdict
from pathlib import Path

from bench import BenchError, catalogue, write_whole
from bench.stages.planning.planned import Run, Work

SCRIPTS = frozenset(row.script for row in catalogue.ROWS)  # the scripts a plan's run may start: this checkout's own
TORCHRUN = catalogue.TORCHRUN  # -m torch.distributed.run --standalone --nproc-per-node {nproc}: N, a number
ENV = frozenset({"OMP_NUM_THREADS", "TORCHINDUCTOR_CACHE_DIR"})  # the variables a plan's run may set


def save(path, bench_id, machine_class, runs, works, mode="speed", options=None, config=None):
    """plan.json: what --resume needs to finish a bench of any mode as it was planned: its runs, the work of each
    workload, the mode's options (the bench's: with --repeats auto, the context to add rounds from) and the
    configuration it was asked (bench/config.py saved(): --resume rebuilds it)."""
    works = {name: asdict(work) for name, work in works.items()}
    plan = dict(bench_id=bench_id, machine_class=machine_class, works=works, runs=[asdict(run) for run in runs])
    plan.update(mode=mode, options=options or {}, config=config)
    write_whole(path, lambda tmp: Path(tmp).write_text(json.dumps(plan, indent=1) + "\n"))


def saved_run(fields):
    """A Run from a saved plan; one saved before runs kept their flags (its whole command a script) or their batch and
    model gets them from its command."""
    if "cmd" in fields:
        fields = {("script" if name == "cmd" else name): value for name, value in fields.items()}
    run = Run(**fields)
    if "batch_size" not in fields and "--batch-size" in run.cmd:
        run.batch_size = int(run.cmd[run.cmd.index("--batch-size") + 1])
    if "model" not in fields and "--model" in run.cmd:
        run.model = run.cmd[run.cmd.index("--model") + 1]
    return run


def load(path):
    """The plan saved by save(); a damaged one is a BenchError naming it (the bench's rows are in runs.csv: --summarize
    still reads them)."""
    try:
        plan = json.loads(Path(path).read_text())
        plan["works"] = {name: Work.saved(fields) for name, fields in plan["works"].items()}
        return plan, [saved_run(run) for run in plan["runs"]]
    except (ValueError, KeyError, TypeError) as e:  # not JSON, or not a plan: nothing --resume can trust
        raise BenchError(
            f"{path} is damaged ({type(e).__name__}: {str(e)[:80]}): --resume cannot finish that bench; --summarize"
            " still reads its finished rows, and a new bench starts afresh"
        ) from None


def script_at(command):
    """Where a run's script is in its command after Python: after torchrun's own flags (-m torch.distributed.run
    --standalone --nproc-per-node N), else first."""
    launcher = TORCHRUN[:-1]
    if command[: len(launcher)] == launcher and len(command) > len(launcher) and command[len(launcher)].isdigit():
        return len(launcher) + 1
    return 0


def trusted(runs, out):
    """The saved runs as this checkout runs them, or a BenchError naming the first that is not one of its own: a
    Python (the one resuming runs it), torchrun's own flags, a script of the catalogue, then that script's flags; the
    environment OMP_NUM_THREADS and a compile cache inside the results folder (out). A plan.json is a data file in a
    folder people share: it never chooses the program, the script or a variable that loads code."""
    for run in runs:
        program, *rest = run.script or [""]
        at = script_at(rest)
        cache = run.env.get("TORCHINDUCTOR_CACHE_DIR")
        why = None
        if not Path(program).name.startswith("python"):
            why = f"starts {program[:60]!r}, not Python"
        elif at >= len(rest) or rest[at] not in SCRIPTS:
            why = f"runs {(rest[at] if at < len(rest) else 'no script')[:60]!r}, not one of this checkout's scripts"
        elif set(run.env) - ENV:
            why = f"sets {', '.join(sorted(set(run.env) - ENV))[:60]}, not a variable the bench sets"
        elif cache is not None and not Path(cache).resolve().is_relative_to(Path(out).resolve()):
            why = f"keeps its compile cache in {cache[:60]!r}, outside the results folder"
        if why:
            raise BenchError(f"plan.json's run {run.name[:40]!r} {why}: --resume runs the bench's own commands alone")
        run.script = [sys.executable, *rest]
    return runs
