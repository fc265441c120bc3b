"""What a bench is asked to do, as one typed record built once from the command line (bench/cli.py) and never changed.

A Config holds the mode asked for and five groups: what to run (Rows), on what work (Work), how its distributed rows
start (Launch), with what budget (Limits) and where its outputs go (Outputs), with the asked mode's own flags (own:
the record its registration builds, bench/modes/__init__.py). Everything below the entry point reads it; a mode that
plans other work varies it (varied: a copy with some fields changed), as --scaling plans its DDP rows alone. Each
field keeps the name of its flag (--batch-size: work.batch_size); a value left None is chosen by the planner for the
machine and the workload (bench/stages/plan.py DEFAULTS).
"""

from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from bench import catalogue


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
    machine's default) and of this part of it (chunk), and the seconds before one run is stopped."""

    repeats: int | str = "auto"
    budget: float | str | None = None
    chunk: float | None = None
    timeout: int | None = None


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

    mode: str = "run"
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
