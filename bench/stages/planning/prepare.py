"""Preparing a plan's work, the named step before planning: each workload's data folder made where missing, read once
by the scripts' own loader (describe: its image size, classes and training images), and a model of the user's own
tried once in a process of its own (check_model), so that bad data or a bad model is one line before any run rather
than a failed row in every run. The one step of planning that writes, imports the scripts or launches a process
(bench/stages/planning/plan.py make_plan calls it, after what is asked and before the calibration and the plan).
"""

import contextlib
import io
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import BenchError, data
from bench.data import data_workload
from bench.observe.machine import ROOT
from bench.stages.planning.build import synthetic_spec


def folder(config, workload, generate=True, gpu=False):
    """The data folder of a workload: the user's, or the generated one (made when missing, unless only planning)."""
    if workload == "custom":
        path = Path(config.work.data).resolve()
        if not path.exists():
            raise BenchError(f"data folder {config.work.data} does not exist")
        return str(path)
    workload = data_workload(workload, gpu)
    return data.ensure(workload) if generate else str(ROOT / "data" / workload)


def describe(path, workload):
    """What loader.py finds in the data folder (checked here once, not in every run): image_size, classes, ...
    A generated workload not made yet is described from its parameters. loader.open_data() runs in this process
    (torch is imported once, where a process of its own would import it again): its one-line error is the bench's."""
    spec = data.HARD if workload == "hard" else data.WORKLOADS.get(workload)
    if not Path(path).exists() and spec is not None:
        size = spec["size"]
        return dict(image_size=size if size <= 64 else 224, classes=data.CLASSES, dataset="generated",
                    train_size=spec["train"] * len(data.CLASSES))  # fmt: skip
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import loader  # torch and torchvision: imported only when a data folder is read

    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            info = loader.open_data(str(path))[2]
    except SystemExit:  # checks.die(): one line on stderr
        lines = said.getvalue().strip().splitlines() or ["no output"]
        raise BenchError(f"the data cannot be used: {lines[-1].split('error: ', 1)[-1]}") from None
    except Exception as e:  # a dataset library's own error, as a run of loader.py would end with it
        raise BenchError(f"the data cannot be used: {type(e).__name__}: {e}") from None
    return json.loads(json.dumps(info._asdict()))  # as the runs' metrics give it: plain JSON


def check_model(model, info):
    """A model of the user's own (FILE.py:FACTORY, module:FACTORY) tried once on the workload's shape, two steps on
    the CPU, before any run: a bad one is one line here rather than a failed row in every run."""
    if ":" not in model:
        return  # a torchvision name: every script checks it in its first second
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["train.py", "--data", synthetic_spec(info), "--model", model, "--batch-size", "2", "--steps", "2"]
        cmd += ["--warmup-steps", "1", "--workers", "0", "--device", "cpu", "--no-progress"]
        probe = subprocess.run([sys.executable, *cmd, "--metrics-out", str(Path(tmp) / "probe.json")],
                               cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines() or ["no output"]
        raise BenchError(f"the model cannot be used: {lines[-1].split('error: ', 1)[-1]}")


def prepare(config, gpu_count, works):
    """{workload: (its Work as the flags and the machine give it, its data folder, what loader.py finds there)} for
    works ({workload: its Work}): the data made where missing (unless --dry-run), read by the scripts' loader, and a
    model of one's own tried (unless --dry-run). A batch larger than the training set is refused here."""
    dry_run = config.dry_run
    found = {}
    for workload, chosen in works.items():
        path = folder(config, workload, generate=not dry_run, gpu=bool(gpu_count))
        info = describe(path, data_workload(workload, bool(gpu_count)))
        if chosen.batch_size > info.get("train_size", math.inf):
            raise BenchError(f"--batch-size {chosen.batch_size} is larger than the training set of {path} "
                             f"({info['train_size']} images)")  # fmt: skip
        if not dry_run:
            check_model(chosen.model, info)
        found[workload] = (chosen, path, info)
    return found
