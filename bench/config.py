"""What a bench is asked to do, as one typed record built once from the command line (bench/cli.py) and never changed.

A Config holds the mode asked for and five groups: what to run (Rows), on what work (Work), how its distributed rows
start (Launch), with what budget (Limits) and where its outputs go (Outputs), with the asked mode's own flags (own:
the record its registration builds, bench/modes/__init__.py). Everything below the entry point reads it; a mode that
plans other work varies it (varied: a copy with some fields changed), as --scaling plans its DDP rows alone. Each
field keeps the name of its flag (--batch-size: work.batch_size); a value left None is chosen by the planner for the
machine and the workload (bench/stages/planning/plan.py DEFAULTS).

A bench keeps its configuration with its plan (saved(), in logs/BENCH/plan.json), and --resume finishes it with the
configuration rebuilt from there (resumed()): the resume command may change what RESUMABLE names, and nothing else.
"""

from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from pathlib import Path

from bench import BenchError, catalogue


@dataclass(frozen=True)
class Rows:
    """What to run: the training variants and the loader-only rows (their names), and whether each list is the
    default one (every variant: dp is left out without a GPU; both loaders: none for vit)."""

    variants: tuple = catalogue.DEFAULT
    loaders: tuple = tuple(catalogue.LOADERS)
    default_variants: bool = True
    default_loaders: bool = True


@dataclass(frozen=True)
class Work:
    """On what work every run trains: the data (a generated workload or a folder), the model and the steps."""

    workload: str | None = None
    data: str | None = None
    model: str | None = None
    batch_size: int | None = None
    steps: int | str | None = None  # a number, or auto
    warmup_steps: int | None = None
    eval_samples: int | None = None
    loader_steps: int | None = None
    workers: int | None = None
    seed: int = 0


@dataclass(frozen=True)
class Launch:
    """How the distributed rows start: their processes (per node), and the launcher (local, or slurm on `nodes` of
    the allocation, counted from it)."""

    nproc: int | None = None
    launcher: str = "local"
    nodes: int | None = None


@dataclass(frozen=True)
class Limits:
    """With what budget: the rounds (a number or auto), the minutes of the bench (a number, none, or None: the
    machine's default) and of this part of it (chunk), the seconds before one run is stopped, and the margin a row's
    speed-up is decided against (its rounds stop once it is faster, slower or within it)."""

    repeats: int | str = "auto"
    budget: float | str | None = None
    chunk: float | None = None
    timeout: int | None = None
    margin: float | None = None  # the speed answers' margin (None: bench/stages/statistics/rules.py MARGIN)


@dataclass(frozen=True)
class Outputs:
    """Where the results go (out), where saved baselines are kept, and what each training run also records."""

    out: Path = Path("results")
    baseline_dir: Path = Path(__file__).resolve().parents[1] / "baseline"
    tensorboard: bool = False
    profile: bool = False


@dataclass(frozen=True)
class Config:
    """The mode asked for (its registration's name), the groups above, --dry-run and the GPUs it plans for (--gpus),
    and the mode's own flags (own: its registration's record, None for a mode without flags of its own)."""

    mode: str = "speed"
    rows: Rows = field(default_factory=Rows)
    work: Work = field(default_factory=Work)
    launch: Launch = field(default_factory=Launch)
    limits: Limits = field(default_factory=Limits)
    outputs: Outputs = field(default_factory=Outputs)
    dry_run: bool = False
    gpus: int | None = None
    own: object = None


GROUPS = ("rows", "work", "launch", "limits", "outputs")


def group_of(name):
    """The group a field of the configuration is in (None: the Config's own), by its name."""
    for group in GROUPS:
        if name in {f.name for f in fields(Config.__dataclass_fields__[group].default_factory)}:
            return group
    if name in {f.name for f in fields(Config)}:
        return None
    raise TypeError(f"no field {name!r} in the configuration")


def varied(config, **changes):
    """A copy of config with the fields named changed, wherever they are (varied(config, repeats=1, loaders=())):
    config itself stays as it was."""
    groups, top = {}, {}
    for name, value in changes.items():
        group = group_of(name)
        if group is None:
            top[name] = value
        else:
            groups.setdefault(group, {})[name] = value
    return replace(config, **top, **{g: replace(getattr(config, g), **values) for g, values in groups.items()})


def read(kind):
    """A registration's builder of its own flags' record: kind (a frozen dataclass) from the parsed flags of the
    same names."""

    def build(flags, config):
        return kind(**{f.name: vars(flags)[f.name] for f in fields(kind)})

    return build


def of(flags, mode, **made):
    """The configuration from the command line as parsed (bench/cli.py), for `mode`: each field the value made for it
    from the flags (made: the rows' lists, out as a Path), else its flag's as parsed."""
    values = {**vars(flags), **made}
    groups = {g: Config.__dataclass_fields__[g].default_factory for g in GROUPS}
    built = {g: kind(**{f.name: values[f.name] for f in fields(kind)}) for g, kind in groups.items()}
    return Config(mode=mode, dry_run=values["dry_run"], gpus=values["gpus"], **built)


# what a --resume may change of the bench it finishes: where its results are and which baselines it compares with,
# how long this part may run, and what each run also records (added, never taken away); the rest is the bench as it
# was planned (its rows, work, launch, rounds and timeout, its mode's own flags)
RESUMABLE = ("out", "baseline_dir", "budget", "chunk", "tensorboard", "profile")
ADDED = ("tensorboard", "profile")  # a resume adds them where the bench began without, never takes them away


def saved(asked):
    """The configuration as plan.json keeps it (JSON's types: a tuple a list, a path its text), its mode's own flags
    with the name of their record's kind (rebuilt() finds it again)."""
    keep = jsonable({name: value for name, value in asdict(replace(asked, own=None)).items() if name != "own"})
    if asked.own is not None:
        kind = type(asked.own)
        keep["own"] = dict(kind=f"{asked.mode}.{kind.__qualname__}", fields=jsonable(asdict(asked.own)))
    return keep


def jsonable(value):
    if isinstance(value, dict):
        return {name: jsonable(v) for name, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return str(value) if isinstance(value, Path) else value


# the names a plan.json of an earlier version kept, and the names they go by now (one name per mode, 2026-11-29)
RENAMED = {"run": "speed", "bench": "speed", "bench.modes.maxbatch": "bench.modes.max_batch", "bench.modes.accuracy":
           "bench.modes.to_accuracy", "bench.modes.tuneloader": "bench.modes.tune_loader"}  # fmt: skip


def rebuilt(kept, owners):
    """The Config that saved() kept: every group of its kind, a list a tuple again, a path a Path (a mode or a
    module by the name it goes by now: RENAMED). owners: {a mode's name: the module that defines it} (its executor's,
    imported already), the only modes and records a plan.json may name (own_kind)."""
    own = None
    if kept.get("mode") in RENAMED:
        kept = {**kept, "mode": RENAMED[kept["mode"]]}
    if "mode" in kept and kept["mode"] not in owners:
        raise BenchError(f"plan.json names the mode {str(kept.get('mode'))[:60]!r}, which the bench does not have")
    if kept.get("own"):
        own = built(own_kind(kept["own"]["kind"], owners), kept["own"]["fields"])
    groups = {g: built(Config.__dataclass_fields__[g].default_factory, kept[g]) for g in GROUPS}
    top = {f.name: kept[f.name] for f in fields(Config) if f.name not in (*GROUPS, "own") and f.name in kept}
    return Config(**top, **groups, own=own)


def own_kind(name, owners):
    """The record of a mode's own flags that plan.json names: MODE.KIND, a mode of owners and a record its module
    defines (a plan of 2026-12-05 or before: the module's path, read only where it is one of owners' modules). A
    results folder is shared: its plan.json never chooses the code that runs, so nothing is imported here."""
    where, _, kind_name = str(name).rpartition(".")
    where = RENAMED.get(where, where)
    module = owners.get(where) or next((m for m in owners.values() if m.__name__ == where), None)
    kind = getattr(module, kind_name, None) if module is not None and kind_name.isidentifier() else None
    if not (isinstance(kind, type) and is_dataclass(kind)):
        raise BenchError(f"plan.json names {str(name)[:80]!r} for a mode's flags: not one of the bench's own modes")
    return kind


def built(kind, values):
    """A record of kind from its kept values (a field it no longer has is left out, a new one keeps its default)."""
    known = {f.name: f for f in fields(kind)}

    def back(f, value):
        if f.type is Path or (value is not None and f.type == Path | None):
            return Path(value)
        return tuple(value) if isinstance(value, list) else value

    return kind(**{name: back(known[name], value) for name, value in values.items() if name in known})


def given(asked):
    """{field: value} of what the command line set: the fields whose value is not the default's (a group's field by
    its name, the rows' default_* flags left out: they follow --variants and --loaders)."""
    default, found = Config(), {}
    for group in GROUPS:
        for f in fields(getattr(asked, group)):
            value = getattr(getattr(asked, group), f.name)
            if not f.name.startswith("default_") and value != getattr(getattr(default, group), f.name):
                found[f.name] = value
    for name in ("dry_run", "gpus"):
        if getattr(asked, name) != getattr(default, name):
            found[name] = getattr(asked, name)
    return found


def flag(name):
    return "--" + name.replace("_", "-")


def words(value):
    """A flag's value as the command line gives it: a list comma-separated, a number as short as it is."""
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def resumed(planned, asked, bench_id):
    """(the configuration a --resume finishes bench_id with, what the resume command changed, in words): the planned
    one, with the resume command's RESUMABLE fields (ADDED ones added to the planned). Any other field the resume
    command sets to something other than the planned value is a BenchError, one line: a resume finishes the bench it
    names, a bench of other work is a new bench."""
    planned_values = {name: value for group in GROUPS for name, value in asdict(getattr(planned, group)).items()}
    for name, value in given(asked).items():
        if name in RESUMABLE:
            continue
        was = planned_values.get(name, getattr(planned, name, None))
        if jsonable(value) != jsonable(was):
            then = f"without {flag(name)}" if was in (None, False) else f"{flag(name)} {words(was)}"
            raise BenchError(
                f"{flag(name)} {words(value)}: a --resume finishes bench {bench_id} as it was planned ({then}); it may"
                f" change {', '.join(map(flag, RESUMABLE))} alone: start a new bench for other work"
            )
    asked_values = {name: value for group in GROUPS for name, value in asdict(getattr(asked, group)).items()}
    changes = {name: asked_values[name] for name in RESUMABLE}
    changes.update({name: asked_values[name] or planned_values[name] for name in ADDED})
    told = [
        name for name in ("budget", "chunk", *ADDED) if name in given(asked) and changes[name] != planned_values[name]
    ]
    said = [flag(name) if changes[name] is True else f"{flag(name)} {words(changes[name])}" for name in told]
    return varied(planned, **changes), said
