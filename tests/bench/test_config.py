"""bench/config.py: the command line becomes one typed record, built once and never changed; a mode varies a copy;
the parsed flags go no further than the entry point."""

import ast
import dataclasses
import json
import sys
from pathlib import Path

import pytest

from bench import BenchError, catalogue, cli, config, modes
from bench.config import Config, Launch, Limits, Outputs, Rows, Work, varied
from bench.modes import max_batch, scaling
from helpers import ROOT, run


def test_each_flag_is_a_typed_field_of_its_group(tmp_path):
    asked = cli.parse_args(["--variants", "baseline,amp", "--loaders", "none", "--steps", "12", "--warmup-steps", "0",
                            "--repeats", "3", "--budget", "none", "--seed", "7", "--out", str(tmp_path), "--dry-run",
                            "--gpus", "2", "--nproc", "2", "--profile"])  # fmt: skip
    assert asked == Config(
        mode="speed",
        rows=Rows(variants=("baseline", "amp"), loaders=(), default_variants=False, default_loaders=False),
        work=Work(steps=12, warmup_steps=0, seed=7),
        launch=Launch(nproc=2),
        limits=Limits(repeats=3, budget="none"),
        outputs=Outputs(out=tmp_path, baseline_dir=Path(ROOT) / "baseline", profile=True),
        dry_run=True,
        gpus=2,
    )
    defaults = cli.parse_args([])
    assert defaults == Config() and defaults.rows.variants == catalogue.DEFAULT  # no flag: the fields' defaults
    assert defaults.outputs.out == Path("results") and defaults.limits.repeats == "auto"


def test_the_configuration_is_never_changed_and_a_mode_varies_a_copy():
    asked = cli.parse_args(["--variants", "ddp", "--workload", "small"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        asked.work.steps = 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        asked.mode = "check"
    one = varied(asked, repeats=1, loaders=(), nproc=4, budget="none", dry_run=True)
    assert (one.limits.repeats, one.rows.loaders, one.launch.nproc, one.limits.budget, one.dry_run) == (
        1, (), 4, "none", True)  # fmt: skip
    assert one.rows.variants == ("ddp",) and one.work == asked.work  # the rest as it was
    assert asked == cli.parse_args(["--variants", "ddp", "--workload", "small"])  # the original untouched
    with pytest.raises(TypeError, match="no field 'repeat'"):
        varied(asked, repeat=1)


def test_the_asked_modes_own_flags_are_its_record(tmp_path):
    asked = cli.parse_args(["--max-batch", "--memory-limit", "4500"])
    assert asked.mode == "max_batch" and asked.own == max_batch.Flags(memory_limit=4500)
    asked = cli.parse_args(["--scaling", "4,1,2", "--variants", "baseline,ddp,fsdp", "--scaling-mode", "strong"])
    assert asked.own == scaling.Flags(counts=(1, 2, 4), variants=("ddp", "fsdp"), scaling_mode="strong")
    assert cli.parse_args(["--scaling", "2"]).own.variants == ("ddp", "all")  # every variant: ddp and all, weak
    assert cli.parse_args(["--resume", "b1", "--allow-changed"]).own.resume == "b1"
    assert cli.parse_args(["--check", "--paths", "dali,,fsdp"]).own.paths == ("dali", "fsdp")
    assert cli.parse_args([]).own is None  # the bench's own flags are the launcher's, shared with --scaling


def owners():
    """The modes a plan.json may name, as --resume passes them: each mode's executor's module."""
    return {m.executes.name: sys.modules[m.executes.__module__] for m in modes.registered().values() if m.executes}


def test_a_plan_kept_under_a_modes_earlier_name_is_rebuilt_under_its_name_now(tmp_path):
    """plan.json of a bench planned before one name per mode (2026-11-29): the bench was "run", --max-batch's flags
    bench.modes.maxbatch's; rebuilt, they are the bench and max_batch's."""
    kept = config.saved(cli.parse_args(["--max-batch", "--memory-limit", "4500", "--out", str(tmp_path)]))
    kept["own"]["kind"] = "bench.modes.maxbatch.Flags"  # the module's path, as plans kept it then
    assert config.rebuilt(kept, owners()).own == max_batch.Flags(memory_limit=4500)
    bench = config.saved(cli.parse_args(["--out", str(tmp_path)]))
    assert config.rebuilt({**bench, "mode": "run"}, owners()).mode == "speed"
    assert config.rebuilt({**bench, "mode": "bench"}, owners()).mode == "speed"  # its name before 2026-12-05


def test_a_plan_names_a_modes_flags_by_the_registry_and_every_modes_own_comes_back():
    for argv in (["--max-batch", "--memory-limit", "4500"], ["--scaling", "2", "--variants", "ddp"],
                 ["--check", "--paths", "dali"], ["--parity", "--seeds", "3"], ["--to-accuracy", "0.5"]):  # fmt: skip
        asked = cli.parse_args(argv)
        kept = config.saved(asked)
        assert kept["own"]["kind"] == f"{asked.mode}.{type(asked.own).__qualname__}"  # a name, not a module's path
        assert config.rebuilt(kept, owners()) == asked


@pytest.mark.parametrize("kind", ["this.s", "os.system", "max_batch.nothing", "max_batch.Flags.__init__", "parity",
                                  "bench.stages.planning.fit.Run", "sideeffect.Flags"])  # fmt: skip
def test_a_plan_naming_code_that_is_not_a_modes_is_refused_and_nothing_imported(kind, tmp_path):
    kept = config.saved(cli.parse_args(["--max-batch"]))
    with pytest.raises(BenchError, match="not one of the bench's own modes"):
        config.rebuilt({**kept, "own": {**kept["own"], "kind": kind}}, owners())
    assert "this" not in sys.modules and "sideeffect" not in sys.modules
    with pytest.raises(BenchError, match="the mode 'os', which the bench does not have"):
        config.rebuilt({**kept, "mode": "os"}, owners())


def test_resume_of_a_plan_naming_a_module_with_a_side_effect_ends_in_one_line_and_never_runs_it(tmp_path):
    """A shared results folder's plan.json names a module on the path that writes a file when imported."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "sideeffect.py").write_text(
        f"import pathlib\npathlib.Path({str(tmp_path / 'ran')!r}).write_text('ran')\nFlags = None\n"
    )
    kept = config.saved(cli.parse_args(["--max-batch", "--out", str(tmp_path / "out")]))
    kept["own"]["kind"] = "sideeffect.Flags"
    plan = dict(bench_id="b1", machine_class=modes.this_machine()["machine_class"], works={}, runs=[],
                mode="max_batch", options={}, config=kept)  # fmt: skip
    (tmp_path / "out" / "logs" / "b1").mkdir(parents=True)
    (tmp_path / "out" / "logs" / "b1" / "plan.json").write_text(json.dumps(plan))
    result = run("-m", "bench", "--resume", "--out", tmp_path / "out", env={"PYTHONPATH": f"{ROOT}:{code}"})
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "'sideeffect.Flags' for a mode's flags: not one of the bench's own modes" in result.stderr
    assert not (tmp_path / "ran").exists()


def test_a_mode_runs_on_the_configuration_the_entry_point_built(monkeypatch, tmp_path):
    """cli.main hands the mode the record parse_args built, nothing else."""
    given = []
    run = modes.registered()["speed"]
    monkeypatch.setitem(modes.OWN, "speed", dataclasses.replace(run, run=given.append))
    argv = ["--variants", "baseline", "--loaders", "none", "--out", str(tmp_path), "--repeats", "2"]
    cli.main(argv)
    assert given == [cli.parse_args(argv)] and isinstance(given[0], Config)


def fields_read(source, name):
    """The attributes read of the variable `name` in a module's source."""
    nodes = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Attribute)]
    return {node.attr for node in nodes if isinstance(node.value, ast.Name) and node.value.id == name}


def test_no_parsed_flags_past_the_entry_point():
    """argparse is imported by the entry point (cli.py) and by the data generator's own (python -m bench.data)
    alone; nothing in the bench reads a namespace with getattr(args or copies one; the registrations' checks read
    the flags as parsed (flags.X) and nothing else does."""
    for path in sorted((Path(ROOT) / "bench").rglob("*.py")):
        source, name = path.read_text(), path.relative_to(ROOT).as_posix()
        assert "getattr(args" not in source and "vars(config)" not in source and "Namespace(" not in source, name
        if name not in ("bench/cli.py", "bench/data.py"):
            assert "import argparse" not in source and not fields_read(source, "args"), name
    assert fields_read((Path(ROOT) / "bench/stages/planning/plan.py").read_text(), "config") >= {
        "rows",
        "work",
        "limits",
    }


def test_every_field_has_one_group_and_keeps_its_flags_name():
    names = [f.name for g in config.GROUPS for f in dataclasses.fields(getattr(Config(), g))]
    assert len(names) == len(set(names))  # varied finds each by its name alone
    assert {config.group_of(n) for n in ("variants", "batch_size", "nodes", "chunk", "out")} == set(config.GROUPS)
    assert config.group_of("dry_run") is None
