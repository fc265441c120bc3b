"""The one executor: every mode's runs (the bench's, --check's, --max-batch's, --to-accuracy's, --scaling's) go
through execute(), so that what follows holds the same for each of them:

- groups run whole: the mode's groups() (the bench's and --scaling's rounds; a run at a time elsewhere);
- --budget and --chunk: a group that would end past the budget, or past this part's minutes, is not started (the
  first always is), by the runs' planned estimates until a run of the same kind has been measured; a group longer
  than a whole part (a GPU's fp32 ViT round in a 10-minute command) is split between its runs instead;
- --resume: the saved plan (logs/BENCH/plan.json) is run again, less its runs with a finished record
  (logs/BENCH/records.jsonl; the bench's runs.csv); failed runs run again;
- Ctrl-C and SIGTERM: the run in progress is stopped, every finished record is kept, the outputs are written from
  them, exit 130; the signal handlers are installed here and nowhere else;
- a run that hangs is stopped at the mode's time limit (bench/stages/running/launch.py) and recorded as failed;
- the progress lines, and at the end the mode's outputs (its finish()).

A mode (a Mode below) supplies its plan (runs, works), how to do a run (do(): one launch, or a search of several),
how to say a record in a line, and what to write at the end; nothing else."""

import json
import math
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from bench import LOGS, BenchError, config, data, logs_of, write_whole
from bench.observe.machine import code_fingerprint
from bench.stages import cost
from bench.stages.planning import planfile
from bench.stages.running.launch import launch


@dataclass(frozen=True)
class State:
    """What a mode chose as it planned, besides its configuration and its runs, that it needs to go on after --resume
    (plan.json keeps it as `options`): a mode with more subclasses it (ToAccuracy.State: the target, the epochs), and
    reads each field by its name. timeout: a run's time limit, the mode's (None: the machine's default)."""

    timeout: int | None = None

    @classmethod
    def kept(cls, values):
        """The state plan.json kept (a field the record no longer has is left out, a new one keeps its default)."""
        names = {f.name for f in fields(cls)}
        return cls(**{name: value for name, value in (values or {}).items() if name in names})


class Mode:
    """What a mode gives the executor. A subclass sets name and says how to do, say and finish its runs; its State, a
    subclass of State above, says what it keeps for --resume besides the configuration (bench/config.py)."""

    name = "speed"  # as plan.json and the progress lines call it (a mode sets its own)
    what = "runs"  # what the runs are, in the progress lines
    subfolder = None  # the runs' logs and metrics in logs/BENCH/SUBFOLDER, or in logs/BENCH itself
    State = State

    def __init__(self, config, info, bench_id, runs, works, state=None):
        self.config, self.info, self.bench_id, self.runs, self.works = config, info, bench_id, runs, works
        self.state = state if isinstance(state, self.State) else self.State.kept(state)  # plan.json's: a dict
        self.logs = logs_of(config.outputs.out, bench_id)

    # ------------------------------------------------------------------------ what a mode may change
    def groups(self, runs):
        """The runs in the groups that run whole (a budget or a part never ends inside one)."""
        return [[run] for run in runs]

    def timeout(self, run):
        """A run's time limit: the mode's (its state's, kept for --resume), else the machine's default."""
        return cost.timeout_s(self.state.timeout, self.info["gpu_count"])

    def folder(self):
        """Where the runs' logs and metrics go."""
        return self.logs / self.subfolder if self.subfolder else self.logs

    def prepare(self):
        """Before the first run, fresh or resumed: make what the runs need (the generated data, the folder)."""
        make_data(self.works)
        self.folder().mkdir(parents=True, exist_ok=True)

    def do(self, run, job):
        """Run it: its record (a dict with status ok or failed, and wall_s), or None when stopped."""
        return job.launch(run)

    def keep(self, record):
        """Keep a finished run's record, on the disk before the next run starts (the bench: in runs.csv)."""
        append_record(self.logs / "records.jsonl", record)

    def recorded(self):
        """The records of this bench so far (resume reads them): the last of each run counts."""
        return read_records(self.logs / "records.jsonl")

    def say(self, run, record):
        """A finished run, in one line."""
        return "ok" if record["status"] == "ok" else f"FAILED: {record.get('error')}"

    def more(self, runs, records):
        """(the next group of runs, None) while the mode adds rounds; (None, why not) when it has stopped adding."""
        return None, None

    def finish(self, records, unrun, how):
        """Write the outputs from every record of this bench; unrun: the runs not run, with why; the exit code."""
        return 0


def read_records(path):
    """records.jsonl: one JSON object a line; a line cut short by a kill is left out (its run runs again)."""
    records = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    return records


def append_record(path, record):
    """One line, written and flushed to the disk before the next run starts."""
    line = json.dumps(record, default=str) + "\n"
    try:
        with open(path, "a") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise BenchError(f"cannot write {path}: {e.strerror or e}") from None


class Job:
    """What a mode's do() launches with: the executor's stop (Ctrl-C, SIGTERM) and the end of the budget."""

    def __init__(self, mode, stop, deadline):
        self.mode, self.stop, self.deadline = mode, stop, deadline

    def over(self):
        """Whether the budget is spent (a mode whose run launches many, as --max-batch's search, asks between)."""
        return time.monotonic() > self.deadline

    def launch(self, run, **options):
        """One run, as the bench runs each (bench/stages/running/launch.py): its row, or None when stopped."""
        return launch(run, self.mode.folder(), self.mode.timeout(run), self.stop, **options)


def expected_s(group, measured):
    """A group's seconds: each run as long as the last finished run of its kind took, or as planned."""
    return sum(measured.get(kind(run), run.estimate_s) for run in group)


def took(record):
    """The seconds a record's run took (its run_s where the mode's wall_s means something else), or None."""
    value = record.get("run_s", record.get("wall_s"))
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def make_data(works):
    """A generated folder that is missing (a machine whose data/ was not kept between two commands) made again,
    before anything runs: a workload's, or the hard data --to-accuracy and --parity make (work.generated: data.HARD
    at the work's seed); from the same parameters, the same data (data.fingerprint finds it unchanged)."""
    for workload, work in works.items():
        workload = work.data_workload or workload
        if Path(work.data).exists():
            continue
        if workload in data.WORKLOADS:
            data.ensure(workload)
        elif work.generated:
            data.ensure(workload, work.seed, data.HARD)


def kind(run):
    return run.workload, run.variant, run.repeat > 1


def sources(works):
    """What a bench measures besides the machine: the data of each workload and the code, as digests."""
    return dict(data={w: data.fingerprint(chosen.data) for w, chosen in works.items()}, code=code_fingerprint())


def start(mode):
    """A new bench of mode: its plan and sources saved (what --resume needs), then executed."""
    mode.logs.mkdir(parents=True, exist_ok=True)
    save(mode)
    write_whole(mode.logs / "sources.json", lambda tmp: Path(tmp).write_text(json.dumps(sources(mode.works)) + "\n"))


def save(mode):
    planfile.save(mode.logs / "plan.json", mode.bench_id, mode.info["machine_class"], mode.runs, mode.works, mode.name,
              asdict(mode.state), config.saved(mode.config))  # fmt: skip


def changes(logs, works):
    """What changed since the bench in logs started ([] if nothing, or if it kept no record): 'data', 'code'."""
    if not (logs / "sources.json").exists():
        return []
    try:
        then, now = json.loads((logs / "sources.json").read_text()), sources(works)
    except ValueError:
        raise BenchError(
            f"{logs / 'sources.json'} is damaged: the bench cannot tell whether its data or code changed"
        ) from None
    return [what for what in ("data", "code") if then.get(what) != now[what]]


def execute(mode, budget_s=None, chunk_min=None, spent_s=0.0, resumed=False):
    """Run mode's runs that have no finished record, group after group, and write its outputs; exit as it says.
    budget_s: the seconds the whole bench may take, spent_s of them spent before this part started (by its planning,
    or by the parts before a --resume). chunk_min: this part's minutes (--chunk)."""
    stop = threading.Event()  # Ctrl-C and SIGTERM: stop the run in progress, keep the finished ones
    for signum in signal.SIGINT, signal.SIGTERM:
        signal.signal(signum, lambda *_: stop.set())
    mode.prepare()
    records = mode.recorded()
    done = {r["run"] for r in records if r.get("status") == "ok"}
    measured = {(r.get("workload"), r.get("variant"), (r.get("repeat") or 1) > 1): took(r) for r in records
                if took(r) is not None}  # fmt: skip
    if resumed:
        spent_s += sum(took(r) or 0.0 for r in records)
    todo = [run for run in mode.runs if run.name not in done]
    print(f"{mode.name} {mode.bench_id}: {len(todo)} {mode.what} on {mode.info['machine_class']}, logs in"
          f" {mode.folder()}/", flush=True)  # fmt: skip
    started, count, paused, ended, run = time.monotonic(), 0, None, None, None
    deadline = started + budget_s - spent_s if budget_s else math.inf
    job = Job(mode, stop, deadline)
    planned = iter(mode.groups(todo))
    while not stop.is_set():
        group = next(planned, None)
        if group is None:
            group, ended = mode.more(mode.runs, records)
            if group is not None:
                mode.runs += group
                todo += group
                save(mode)
        if group is None:
            break
        ahead, elapsed = expected_s(group, measured), time.monotonic() - started
        split = chunk_min and len(group) > 1 and ahead > 60 * chunk_min  # a round no part holds: split between runs
        if chunk_min and count and not split and elapsed + ahead > 60 * chunk_min:
            paused = f"this part's {chunk_min:g} min would end inside the next round (about {ahead / 60:.1f} min)"
        elif budget_s and count and spent_s + elapsed + ahead > budget_s:
            paused = f"the budget of {budget_s / 60:g} min would be spent inside the next round"
        if paused:
            break
        for run in group:
            if split and count and time.monotonic() - started + expected_s([run], measured) > 60 * chunk_min:
                paused = (f"this part's {chunk_min:g} min would end inside the next run, of a round longer than a"
                          f" part (about {ahead / 60:.1f} min), split between its runs")  # fmt: skip
                break
            count += 1
            record = None if stop.is_set() else mode.do(run, job)
            if record is None:
                break
            record.setdefault("run", run.name)
            record.update(variant=record.get("variant", run.variant), workload=run.workload, repeat=run.repeat)
            mode.keep(record)
            records.append(record)
            if took(record) is not None:
                measured[kind(run)] = took(record)
            print(f"[{count}/{len(todo)}] {run.name}: {mode.say(run, record)}", flush=True)
        if paused:
            break
    why = "stopped (Ctrl-C or SIGTERM)" if stop.is_set() else paused or "not reached"
    seen = {r["run"] for r in records}
    unrun = [(r, why) for r in mode.runs if r.name not in seen]
    if stop.is_set():
        during = f"during {run.name}" if run else "before the first run"
        print(f"interrupted {during}: the finished {mode.what} are kept (python -m bench --resume goes on)")
    elif paused:
        whole = "" if "split between" in paused else ", every round whole"
        print(f"stopped after {count} of {len(todo)} {mode.what}{whole}: {paused}; python -m bench --resume"
              " goes on")  # fmt: skip
    elif ended:
        print(f"no more rounds: {ended}")
    code = mode.finish(last_of_each(records), unrun, dict(stopped=stop.is_set(), paused=paused, ended=ended))
    if stop.is_set():
        raise SystemExit(130)
    if code:
        raise SystemExit(code)


def last_of_each(records):
    """A run tried again (--resume) counts by its last record; in plan order of first appearance."""
    last = {}
    for record in records:
        last.pop(record["run"], None)
        last[record["run"]] = record
    return list(last.values())


def resume(asked, info, modes, which="last", allow_changed=False):
    """Finish a bench of any mode (which: its name, or the last): its saved plan, less the runs with a finished
    record, on the configuration it was planned with (the resume command's, asked, where a resume may change it).
    modes: name -> Mode class; allow_changed: go on where the data or the code changed, the new rows marked."""
    plans = sorted((asked.outputs.out / LOGS).glob("*/plan.json"))
    if which != "last":
        plans = [p for p in plans if p.parent.name == which]
    if not plans:
        raise BenchError(f"no bench {which!r} to resume in {asked.outputs.out}/logs/ (a bench stores its plan there)")
    saved, runs = planfile.load(plans[-1])
    runs = planfile.trusted(runs, asked.outputs.out)
    if saved["machine_class"] != info["machine_class"]:
        raise BenchError(f"bench {saved['bench_id']} ran on {saved['machine_class']}, this is {info['machine_class']}:"
                         " its numbers would not be one bench; start a new one")  # fmt: skip
    name = config.RENAMED.get(saved.get("mode"), saved.get("mode")) or "speed"  # a plan.json from before: its name now
    if name not in modes:
        raise BenchError(f"{plans[-1]} is of a mode this bench does not know ({name!r})")
    owners = {mode: sys.modules[kind.__module__] for mode, kind in modes.items()}  # the modes, imported already
    finished, said = as_planned(saved, asked, owners)  # a resume command that asks for other work: refused first
    make_data(saved["works"])
    changed = changes(plans[-1].parent, saved["works"])  # before anything runs
    if changed and not allow_changed:
        what = " and its ".join(changed)
        raise BenchError(f"bench {saved['bench_id']}: its {what} changed since it started, so its rows would not"
                         " measure one thing: start a new bench, or --resume --allow-changed to go on with the new rows"
                         " marked")  # fmt: skip
    if changed:
        print(f"warning: the {' and the '.join(changed)} changed since bench {saved['bench_id']} started: its new rows"
              " are marked (changed_since_start in runs.csv)", file=sys.stderr)  # fmt: skip
        info = {**info, "changed_since_start": ",".join(changed)}
    state = saved.get("options") or dict(context=saved.get("context"), auto=saved.get("auto", False))
    mode = modes[name](finished, info, saved["bench_id"], runs, saved["works"], state)
    before = len({r["run"] for r in mode.recorded() if r.get("status") == "ok"} & {r.name for r in runs})
    print(f"resuming {name} {saved['bench_id']}: {before} of {len(runs)} {mode.what} finished before, as it was"
          f" planned{'; this command changes ' + ', '.join(said) if said else ''}")  # fmt: skip
    budget = cost.budget_s(finished.limits.budget)  # the plan fitted its own; a new one here
    execute(mode, budget, finished.limits.chunk, resumed=True)


def as_planned(saved, asked, owners):
    """(the configuration a resume finishes the saved bench with, the changes the resume command makes, in words):
    the one it was planned with (plan.json), with what a resume may change (bench/config.py RESUMABLE); a plan saved
    before plans kept their configuration is finished with the resume command's."""
    if not saved.get("config"):
        return asked, []
    try:
        planned = config.rebuilt(saved["config"], owners)
    except (KeyError, TypeError, ValueError, ImportError, AttributeError) as e:
        raise BenchError(f"bench {saved['bench_id']}: its plan.json's configuration is damaged ({type(e).__name__}:"
                         f" {str(e)[:80]}): start a new bench") from None  # fmt: skip
    return config.resumed(planned, asked, saved["bench_id"])
