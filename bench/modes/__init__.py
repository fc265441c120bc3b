"""The modes: a plan, a way to do one run and a way to finish, each on the stages and outputs below it. speed.py is
the bench itself (the speed table, the default mode); saved.py the modes on a results folder's saved runs
(--resume, --summarize, --save-baseline, --readme); check.py --check; max_batch.py --max-batch; to_accuracy.py
--to-accuracy; parity.py --parity; scaling.py --scaling; tune_loader.py --tune-loader.

A mode is one registration: a Registration below (the bench's own are listed in BUILT_IN; another is register'ed).
cli.py derives every list from registered(): the flags and their checks, the one mode the flags ask for, the files
checked before any work, which modes hold --out's lock, and the modes --resume finishes. Adding a mode is its module
and its registration in BUILT_IN (docs/bench.md, "How the bench runs", shows the steps).
"""

import importlib
import secrets
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from bench import BenchError
from bench.outputs.declared import Joins, Shows

# the bench's own modes, as MODULE.REGISTRATION, in their order: the order of their flags in --help (after the flags
# every mode shares, cli.py's) and of "--A and --B are two modes" when two are asked for
# (and of what their tables add to a bench's summary: --parity's column and words before --max-batch's)
BUILT_IN = ("saved.RESUME", "saved.SUMMARIZE", "check.MODE", "saved.README", "parity.MODE", "max_batch.MODE",
            "to_accuracy.MODE", "scaling.MODE", "tune_loader.MODE", "speed.MODE", "saved.SAVE_BASELINE")  # fmt: skip


@dataclass(frozen=True)
class Registration:
    """One mode, as cli.py runs it.

    name: its name (config.mode; its flag is --NAME with - for _, as the two-modes error spells it)
    run: run(config): the mode, its --dry-run included, on the configuration (bench/config.py); an exit code other
        than 0 is raised (SystemExit), as the executor does with its mode's finish()
    asked: asked(flags): whether the command line (argparse's flags, as parsed) asks for it; None for the default
        mode (the bench), run when none is asked
    add_flags, check_flags: add its flags to the parser; check_flags(flags, config): check them, as parsed, against
        the configuration of the flags every mode shares (every mode's checks run, whichever mode is asked: a flag of
        one mode given with another is refused there)
    own: own(flags, config): the record of its own flags (a frozen dataclass; config.own when it is asked), None
        for a mode with no flags of its own; bench/config.py read(KIND) reads them by name
    outputs: the files it writes in --out (before any work, none of them may be a folder; --save-baseline keeps them);
        runs.csv among them: a damaged one is named before any work
    writes_out: it writes in --out: the folder is made and checked, and every mode's outputs, before any work
    locked: it reads or writes --out, so it holds --out's lock while it runs
    executes: the executor's mode (bench/stages/running/execute.py Mode) it runs, which --resume finishes by its name
    only: the flags (argparse dests) that go with it alone, or with it and the other modes that list them: given
        with any other mode, cli.py refuses them in one line ("--seeds goes with --parity"), the rule said here once
    shows: what it shows of its results (a Shows: bench/outputs/declared.py), declared in its module: its page and its
        plot (their files in --out, what the plot shows, the blocks of the page and the figure), which bench/outputs/
        renders (bench/outputs/render.py write), a README or docs/ block shows (`<!-- results: FOLDER max-batch -->`:
        bench/outputs/readme.py), and report.html holds where the folder has them; None for none
    joins: what this mode's table in the same results folder adds to a bench's summary (a Joins:
        bench/outputs/declared.py): its numbers (its columns; the summary as it is where the folder holds none), and
        its column, words, answer groups and marks on a plot, which bench/outputs/ renders: the bench's summary takes
        every registered mode's, in the registry's order (bench/modes/speed.py summary_of, joined()), and names none
        itself
    """

    name: str
    run: Callable
    asked: Callable | None = None
    add_flags: Callable | None = None
    check_flags: Callable | None = None
    own: Callable | None = None
    outputs: tuple = ()
    writes_out: bool = True
    locked: bool = True
    executes: type | None = None
    only: tuple = ()
    joins: Joins | None = None
    shows: Shows | None = None

    def __post_init__(self):
        """One name per mode: its registration's, which its executor, plan.json and the progress lines use too, its
        page and plot begin with, and its runs' logs folder spells as its flag does (a mistake here stops every
        parse)."""
        shown = [self.shows.page, self.shows.plot] if self.shows is not None else []
        if any(name and not name.startswith(self.name) for name in shown):
            raise ValueError(f"mode {self.name!r}: what it shows ({', '.join(filter(None, shown))}) goes by its name")
        if self.executes is None:
            return
        if self.executes.name != self.name:
            raise ValueError(f"mode {self.name!r}: its executor is named {self.executes.name!r}")
        if self.executes.subfolder not in (None, self.name.replace("_", "-")):
            raise ValueError(f"mode {self.name!r}: its runs' folder {self.executes.subfolder!r} is not its flag's name")


OWN = {}  # name -> Registration: BUILT_IN's, read the first time registered() is called
OTHERS = {}  # name -> Registration: every mode register'ed, after the bench's own


def register(mode):
    """Add a mode (a Registration) after the bench's own; its name must be new."""
    if mode.name in registered():
        raise ValueError(f"a mode named {mode.name!r} is registered already")
    OTHERS[mode.name] = mode
    return mode


def registered():
    """Every mode, name -> Registration: the bench's own (BUILT_IN, in their order), then the others."""
    if not OWN:
        for entry in BUILT_IN:
            module, name = entry.split(".")
            mode = getattr(importlib.import_module(f"bench.modes.{module}"), name)
            OWN[mode.name] = mode
    return {**OWN, **OTHERS}


def shown():
    """{a mode's flag without its dashes: its Shows} of every mode that shows its results."""
    return {name.replace("_", "-"): mode.shows for name, mode in registered().items() if mode.shows}


def joined():
    """What every registered mode's table adds to a bench's summary (their Joins), in the registry's order."""
    return tuple(mode.joins for mode in registered().values() if mode.joins is not None)


def flag_of(name):
    """How a mode is asked for, in words: --NAME (- for _), "a bench" for the default."""
    return "a bench" if registered()[name].asked is None else f"--{name.replace('_', '-')}"


def goes_with(given, asked, known):
    """The one line refusing a flag given with a mode that does not take it, or None: given, the dests of the flags
    the command line gave (not at their default), asked, the mode it asks for, known, every flag's dest; the rule is
    the registrations' only (a dest there that is no flag's: ValueError, a mistake in the registration)."""
    takes = {}
    for name, mode in registered().items():
        for dest in mode.only:
            if dest not in known:
                raise ValueError(f"mode {name!r}: only names {dest!r}, which is no flag's dest")
            takes.setdefault(dest, []).append(name)
    for dest in given:
        if dest in takes and asked not in takes[dest]:
            modes = sorted(takes[dest], key=lambda name: registered()[name].asked is not None)  # a bench first
            other = f", not {flag_of(asked)}" if registered()[asked].asked is not None else ""
            return f"--{dest.replace('_', '-')} goes with {' or '.join(map(flag_of, modes))}{other}"
    return None


def table_in(out, name, needed, what):
    """A mode's table in the results folder (name: parity.csv, max_batch.csv), None without one or where it does not
    read (said once, on stderr: the summary goes on without it; what: what it would have added, in words)."""
    from bench.stages.records import record

    path = Path(out) / name
    if not path.exists():
        return None
    try:
        return record.load_csv(path, needed=needed)
    except BenchError as e:
        print(f"warning: {e}: the summary goes on without {what}", file=sys.stderr)
        return None


def new_id():
    """A bench's name: when it started (UTC), and 4 hex digits that tell two started in the same second apart."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


def this_machine():
    """This machine, as a bench records it (bench/observe/machine.py), with its class."""
    from bench.observe.machine import machine_class, machine_info

    info = machine_info()
    info["machine_class"] = machine_class(info)
    return info


def planned_for(config):
    """This machine, with the GPUs --gpus plans for (a dry run for another machine) where it is given."""
    info = this_machine()
    return info if config.gpus is None else {**info, "gpu_count": config.gpus}


def planned_bench(config):
    """(this machine as planned for, planned_for; the logs folder of a new bench in --out)."""
    from bench import logs_of

    return planned_for(config), logs_of(config.outputs.out, new_id())
