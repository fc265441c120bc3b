"""The bench runner: `python -m bench` (make bench). `ls bench/` shows it by role, each role importing only its own
and those below it (tests/test_layout.py):

    cli.py, __main__.py   the entry: parse the flags, choose the mode, build the configuration, hold the results
                          folder's lock; every error the bench finds in its input is a BenchError, printed once, as
                          one line, by __main__.py
    modes/                a plan, a way to do one run and a way to finish: speed.py (the bench: the speed table),
                          check.py (--check), max_batch.py (--max-batch), to_accuracy.py (--to-accuracy), scaling.py
                          (--scaling), parity.py, tune_loader.py, each with its own flags, and what it shows (its
                          page, its table's columns, its lines, its plot) declared in its module
    outputs/              rendered from the stages' numbers and answers and the modes' declarations: verdicts.py
                          (the bench's words), answer.py, markdown.py (summary.md, any mode's page), plots.py (the
                          bench's, any mode's Figure), declared.py (what a mode declares it shows; render.py writes
                          it), diffs.py (the tutorial diffs), report.py (report.html), readme.py (the README's result
                          blocks)
    stages/               the path of a bench, in order:
                            plan.py       the runs: every variant on the same work, in rounds, within the budget,
                                          in four named steps (make_plan): what is asked, the data and model
                                          checks (prepare.py), the steps (calibrate.py on a GPU), the plan (its
                                          records planned.py's, its runs build.py's, fitted to the budget by
                                          fit.py, kept in plan.json by planfile.py); cost.py what they should take
                            execute.py    the one executor of every mode: rounds whole, --budget, --chunk, --resume,
                                          Ctrl-C and SIGTERM, the progress lines
                            launch.py     one run: its process tree with a time limit, its log and its metrics
                                          (slurm.py: the DDP rows across nodes)
                            record.py     runs.csv, a whole row at a time (baseline.py: the saved results compared)
                            intervals.py  the statistics of paired rounds; rules.py the rules of each row's answers
                            summarize.py  a row per variant, read through both (numbers and answers only);
                                          causes.py why a row is not faster; profiles.py its operators
    observe/              what a run is watched with: machine.py (what this machine is, its class), nvml.py,
                          sample.py (the tree's memory, the machine's load), energy.py
    catalogue.py          every row the bench can run, one line each: what the plan, the diffs, the check, the
                          Makefile and the tests read
    config.py             what a bench is asked to do: one typed record (frozen), built by cli.py from the flags
    schema.py             every field of a run's record, once
    data.py               the generated data (python -m bench.data)

The team's own aids are not the package's: tools/ holds the GPU run in parts (gpurun.py), the base fix carried
into every variant (sync.py), the instrument's check and the FSDP probe. Below: what every part of the bench shares
(the error, a whole write, the logs folder's layout, the runs' metrics).
"""

import ast
import contextlib
import json
import os
import sys
from pathlib import Path

# module -> package: what every run needs (`python -m bench` names the missing ones before anything else)
NEEDED = dict(torch="torch", torchvision="torchvision", numpy="numpy", PIL="pillow", tqdm="tqdm")
NEEDED.update(pandas="pandas", matplotlib="matplotlib", psutil="psutil", scipy="scipy")
NEEDED.update(jinja2="jinja2", pygments="pygments", filelock="filelock")  # report.html, the results lock


def oldest_torch():
    """The oldest torch the scripts take (checks.OLDEST_TORCH, as (major, minor)): the bench refuses an older one
    first. Read from checks.py's source, the one place it is written: importing checks imports torch, which the
    runner never does."""
    tree = ast.parse((Path(__file__).resolve().parents[1] / "checks.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["OLDEST_TORCH"]:
            return ast.literal_eval(node.value)
    raise AssertionError("checks.py has no OLDEST_TORCH")


class BenchError(Exception):
    """Bad input, or a state the bench cannot go on from: `python -m bench` prints it once, as one line."""


def write_whole(path, write):
    """Write the file at path whole or not at all: write(temporary path), then a rename. A write that fails
    (a full disk, say) removes the temporary file and is a BenchError naming path."""
    tmp = f"{path}.tmp"
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise BenchError(f"cannot write {path}: {e.strerror or e}") from None


LOGS = "logs"  # a results folder's logs: LOGS/BENCH/ holds a bench's plan, every run's log and metrics, rounds.txt


def logs_of(out, bench_id):
    """The folder of a bench's logs in a results folder: OUT/logs/BENCH (the one place this layout is spelled)."""
    return Path(out) / LOGS / str(bench_id)


DAMAGED = set()  # the run metrics files said to be damaged (once each, though the curves and profiles both read)


def run_metrics(out, bench_id, runs):
    """(row, metrics) of the bench's ok training runs, in the order they ran, whose metrics (logs/BENCH/RUN.json)
    read as a JSON object. A file that is missing is passed over (a saved baseline keeps no logs); one that is there
    and does not read is named once, on stderr: its curve and its profile are left out."""
    logs = logs_of(out, bench_id)
    for row in runs[(runs["kind"] == "train") & (runs["status"] == "ok")].itertuples():
        path = logs / f"{row.run}.json"
        try:
            metrics = json.loads(path.read_text())
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as e:
            metrics = e
        if isinstance(metrics, dict):
            yield row, metrics
        elif path not in DAMAGED:
            DAMAGED.add(path)
            why = metrics if isinstance(metrics, Exception) else f"it holds a {type(metrics).__name__}, not an object"
            print(f"warning: {path} does not read ({why}): run {row.run}'s curve and profile are left out",
                  file=sys.stderr)  # fmt: skip


def kept_for_bench(path, bench_id, key, found):
    """What the runs' metrics gave (found), written to path under key with the bench's id; without any (a saved
    baseline keeps the file, not the logs), what path holds for this bench. None if neither: a file of another bench
    is removed."""
    if found:
        text = json.dumps({"bench_id": str(bench_id), key: found}) + "\n"
        write_whole(path, lambda tmp: Path(tmp).write_text(text))
        return found
    try:
        saved = json.loads(Path(path).read_text())
        if saved["bench_id"] == str(bench_id):
            return saved[key]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    Path(path).unlink(missing_ok=True)
    return None


def check_folder(path, flag):
    """Make the folder at path if missing and check that files can be written in it, before any work."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise BenchError(f"{flag} {path} is a file, not a folder")
    probe = os.path.join(path, f".write-test-{os.getpid()}")
    try:
        os.makedirs(path, exist_ok=True)
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as e:
        raise BenchError(f"{flag} {path} cannot be written: {e.strerror or e}") from None
