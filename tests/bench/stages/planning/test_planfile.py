"""bench/stages/planning/planfile.py: plan.json kept and read back; a damaged one named, an older one read."""

import dataclasses
import json
import re
import sys
from dataclasses import asdict

import pytest

from bench import BenchError, catalogue, modes
from bench.stages.planning import build, planfile, planned
from helpers import fast_first, run


@pytest.mark.parametrize("text", fast_first(["{not json", '{"bench_id": "x"}', "[]"]))
def test_a_damaged_plan_is_named_and_resume_stops(text, tmp_path):
    (tmp_path / "logs" / "b1").mkdir(parents=True)
    (tmp_path / "logs" / "b1" / "plan.json").write_text(text)
    result = run("-m", "bench", "--resume", "--out", tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "plan.json is damaged" in result.stderr and "--summarize still reads" in result.stderr


def test_a_run_carries_its_flags_and_an_older_plan_gets_them_from_its_command(tmp_path):
    """A run's command is built last from its script and flags: a mode's change to a flag replaces it (one
    --batch-size, one --steps in a probe of --max-batch), in its place. The modes read a run's global batch and model
    from the run (max_batch's search starts there, scaling's table says it), not back out of its command line; a plan
    saved before runs kept them still resumes, and a workload's work reads back as a typed record (planned.Work)
    whatever fields the plan that saved it had."""
    from dataclasses import asdict

    from bench.modes import max_batch

    chosen = planned.Work(model="resnet18", batch_size=96, steps=10, warmup_steps=2, eval_samples=100)
    info = dict(image_size=32, classes=list("abcdefghij"))
    run = build.training_run("amp", 1, path="data/small", info=info, chosen=chosen, gpu_count=0, nproc=2, workers=0,
                             cores=2, workload="small")  # fmt: skip
    assert (run.batch_size, run.model) == (96, "resnet18")
    probe = max_batch.probe_run(run, 384, 7, "amp-batch384", warmup=2)
    assert probe.cmd.count("--batch-size") == probe.cmd.count("--steps") == 1 and probe.batch_size == 384
    assert probe.cmd[probe.cmd.index("--batch-size") + 1] == "384"
    assert [p for p in probe.cmd if p.startswith("--")] == [p for p in run.cmd if p.startswith("--")]  # in place
    assert probe.cmd[probe.cmd.index("--steps") + 1 : probe.cmd.index("--steps") + 4] == ["7", "--warmup-steps", "2"]
    assert run.cmd[run.cmd.index("--batch-size") + 1] == "96"  # the plan's run is left as it was
    old = {k: v for k, v in asdict(run).items() if k not in ("batch_size", "model", "script", "flags")}
    old["cmd"] = run.cmd  # a plan saved before runs kept their flags apart: its whole command
    path = tmp_path / "plan.json"
    works = dict(small=dict(data="data/small", steps=10, timeout=60, a_field_of_a_newer_bench=1))
    path.write_text(json.dumps(dict(bench_id="b", machine_class="m", works=works, runs=[old])))
    saved, (again,) = planfile.load(path)
    assert (again.batch_size, again.model, again.cmd) == (96, "resnet18", run.cmd)
    assert saved["works"]["small"] == planned.Work(steps=10, timeout=60, data="data/small")  # typed, the rest defaults


def bench_runs(out):
    """Every row's run as a bench plans it, its compile cache in out."""
    chosen = planned.Work(model="resnet18", batch_size=96, steps=10, warmup_steps=2, eval_samples=100)
    info = dict(image_size=32, classes=list("abcdefghij"))
    cache = out / "logs" / "b1"
    runs = [build.training_run(v, 1, path="data/small", info=info, chosen=chosen, gpu_count=0, nproc=2, workers=0,
                               cores=2, workload="small", cache=cache) for v in catalogue.TRAIN]  # fmt: skip
    return runs + [build.loader_run(v, 1, path="data/small", chosen=chosen, gpu_count=0, workers=0, cores=2,
                                    workload="small") for v in catalogue.LOADERS]  # fmt: skip


def test_a_planned_run_of_every_row_is_trusted_and_runs_on_the_resuming_python(tmp_path):
    runs = bench_runs(tmp_path)
    for one in runs:
        one.script[0] = "/elsewhere/.venv/bin/python3.12"
    assert planfile.trusted(runs, tmp_path) is runs and {one.script[0] for one in runs} == {sys.executable}
    assert any(one.env.get("TORCHINDUCTOR_CACHE_DIR") for one in runs)  # a compiled row's cache, inside the folder


@pytest.mark.parametrize(
    "change, said",
    [
        (dict(script=["/bin/sh", "-c", "touch x"]), "starts '/bin/sh', not Python"),
        (dict(script=["python", "evil.py"]), "runs 'evil.py', not one of this checkout's scripts"),
        (dict(script=["python", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "x.py"]),
         "runs 'x.py', not one of this checkout's scripts"),
        (dict(script=["python"]), "runs 'no script'"),
        (dict(script=["python", "-m", "pip", "install", "x"]), "runs '-m', not one of this checkout's scripts"),
        (dict(script=["python", "-c", "import os"]), "not one of this checkout's scripts"),
        (dict(env={"LD_PRELOAD": "/tmp/x.so"}), "sets LD_PRELOAD, not a variable the bench sets"),
        (dict(env={"TORCHINDUCTOR_CACHE_DIR": "/tmp/cache"}), "compile cache in '/tmp/cache', outside the results"),
    ],
)  # fmt: skip
def test_a_saved_run_that_is_not_the_benchs_own_command_is_refused(change, said, tmp_path):
    one = dataclasses.replace(bench_runs(tmp_path)[0], **change)
    with pytest.raises(BenchError, match=re.escape(said)):
        planfile.trusted([one], tmp_path)


def test_resume_of_a_plan_whose_run_is_a_shell_command_ends_in_one_line_and_runs_nothing(tmp_path):
    shell = dataclasses.replace(bench_runs(tmp_path / "out")[0], script=["/bin/sh", "-c", f"touch {tmp_path / 'ran'}"])
    plan = dict(bench_id="b1", machine_class=modes.this_machine()["machine_class"], works={}, runs=[asdict(shell)],
                mode="bench", options={})  # fmt: skip
    (tmp_path / "out" / "logs" / "b1").mkdir(parents=True)
    (tmp_path / "out" / "logs" / "b1" / "plan.json").write_text(json.dumps(plan))
    result = run("-m", "bench", "--resume", "--out", tmp_path / "out")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "starts '/bin/sh', not Python: --resume runs the bench's own commands alone" in result.stderr
    assert not (tmp_path / "ran").exists()


def test_a_plan_saved_is_read_back_as_it_was(tmp_path):
    """save() writes every part a resume reads (bench_id, machine_class, works, runs, mode, options, config) as JSON
    indented by one, a line at its end; load() gives the same plan back, the works typed and the runs equal."""
    runs = bench_runs(tmp_path)[:2]
    works = dict(small=planned.Work(model="resnet18", batch_size=96, steps=10, warmup_steps=2, data="data/small"))
    path = tmp_path / "plan.json"
    planfile.save(path, "b1", "cpu-x", runs, works, mode="max_batch", options=dict(k=1), config=dict(c=2))
    text = path.read_text()
    assert text.startswith('{\n "bench_id": "b1",\n "machine_class": "cpu-x",\n "works": {') and text.endswith("}\n")
    plan, again = planfile.load(path)
    assert set(plan) == {"bench_id", "machine_class", "works", "runs", "mode", "options", "config"}
    assert (plan["bench_id"], plan["machine_class"], plan["mode"], plan["options"], plan["config"]) == (
        "b1",
        "cpu-x",
        "max_batch",
        dict(k=1),
        dict(c=2),
    )
    assert plan["works"] == works and again == runs
    planfile.save(path, "b2", "cpu-x", runs, works)  # the defaults: the speed mode, no options, no configuration
    plan, _ = planfile.load(path)
    assert (plan["mode"], plan["options"], plan["config"]) == ("speed", {}, None)


def test_a_damaged_plan_is_one_error_naming_it_and_what_broke(tmp_path):
    """load(): not JSON, not a plan, a run of fields no Run has: a BenchError naming the file, the error's type and its
    first 80 characters, and what --summarize still does."""
    path = tmp_path / "plan.json"
    path.write_text("[]")
    tail = (
        ": --resume cannot finish that bench; --summarize still reads its finished rows, and a new bench starts afresh"
    )
    with pytest.raises(BenchError) as said:
        planfile.load(path)
    assert str(said.value) == f"{path} is damaged (TypeError: list indices must be integers or slices, not str){tail}"
    long = "a_field_no_run_has_" * 6
    path.write_text(json.dumps(dict(bench_id="b", machine_class="m", works={}, runs=[{long: 1}])))
    with pytest.raises(BenchError) as said:
        planfile.load(path)
    error = f"Run.__init__() got an unexpected keyword argument '{long}'"[:80]
    assert str(said.value) == f"{path} is damaged (TypeError: {error}){tail}"


def test_an_older_runs_flags_come_from_its_command_only_where_the_plan_lacks_them():
    """saved_run: a plan's own batch_size and model are kept whatever the command says; a command without
    --batch-size or --model leaves them as they were."""
    old = dict(name="r", variant="amp", kind="train", repeat=1, processes=1)
    kept = planfile.saved_run(dict(old, batch_size=64, model="mine", cmd=["python", "train.py", "--batch-size", "96",
                                                                           "--model", "resnet18"]))  # fmt: skip
    assert (kept.batch_size, kept.model) == (64, "mine")
    bare = planfile.saved_run(dict(old, cmd=["python", "train.py"]))
    assert (bare.batch_size, bare.model, bare.script) == (0, "", ["python", "train.py"])


def test_a_script_is_found_after_torchruns_own_flags_or_first():
    launcher = planfile.TORCHRUN[:-1]
    assert planfile.script_at([*launcher, "2", "train_ddp.py"]) == len(launcher) + 1
    assert planfile.script_at(launcher) == 0 and planfile.script_at([*launcher, "two", "x.py"]) == 0
    assert planfile.script_at(["train.py", "--steps", "10", "--batch-size", "64"]) == 0  # a number where N would be


@pytest.mark.parametrize(
    "change, said",
    [
        (dict(script=[]), "plan.json's run 'amp-1' starts '', not Python:"),
        (dict(script=["/" + "p" * 80]), f"starts '/{'p' * 59}', not Python"),
        (dict(script=["python", "x" * 80]), f"runs '{'x' * 60}', not one of"),
        (dict(env={"B_VAR": "1", "A_VAR": "2"}), "sets A_VAR, B_VAR, not a variable"),
        (dict(env={"V" * 70: "1"}), f"sets {'V' * 60}, not a variable"),
        (dict(env={"TORCHINDUCTOR_CACHE_DIR": "/" + "c" * 80}), f"compile cache in '/{'c' * 59}', outside"),
        (dict(name="n" * 50, script=["sh"]), f"plan.json's run '{'n' * 40}' starts 'sh'"),
    ],
)  # fmt: skip
def test_a_refused_run_is_named_in_a_line_of_bounded_length(change, said, tmp_path):
    """Each part of the refusal quoted from the file is cut (a name at 40 characters, the rest at 60), so a plan.json
    cannot fill the line; the variables are named in order."""
    one = dataclasses.replace(bench_runs(tmp_path)[0], **{"name": "amp-1", **change})
    with pytest.raises(BenchError) as refused:
        planfile.trusted([one], tmp_path)
    assert said in str(refused.value) and str(refused.value).endswith("--resume runs the bench's own commands alone")
