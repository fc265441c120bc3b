"""plan.json: a bench's plan kept with it (its runs, each workload's work, its mode's state and the configuration it
was asked), so that --resume can finish it as it was planned.
"""

import json
from dataclasses import asdict
from pathlib import Path

from bench import BenchError, write_whole
from bench.stages.planned import Run, Work


def save(path, bench_id, machine_class, runs, works, mode="bench", options=None, config=None):
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
