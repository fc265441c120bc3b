"""bench/'s layout: folders by role, each role importing only its own and those below it, no import circle (at module
level, where a circle breaks a fresh import and hides which module is the lower one), and the team's tools outside."""

import ast
import json

from helpers import ROOT

# the roles, lowest first: what a bench is made of (the catalogue, the schema, the data, the package's error), what
# it observes (the machine, NVML, the samplers), the stages a bench goes through, the outputs rendered from their
# numbers, the modes that put stages and outputs together, and the entry (the flags, the one-line errors)
ROLES = ["bench", "bench.observe", "bench.stages", "bench.outputs", "bench.modes", "entry"]
ENTRY = {"bench.cli", "bench.__main__"}
MODULES = {
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
    for p in (ROOT / "bench").rglob("*.py")
}


def role(module):
    """A module's place in ROLES: its folder's (a folder's __init__ its own), the entry's, or the top's."""
    if module in ENTRY:
        return ROLES.index("entry")
    return ROLES.index(module if module in ROLES else module.rsplit(".", 1)[0] if module.count(".") > 1 else "bench")


def module_imports(path, top_level_only=True):
    """The bench modules (dotted) a module imports: at its top level, or anywhere in it."""
    found = set()
    nodes = ast.parse(path.read_text()).body if top_level_only else ast.walk(ast.parse(path.read_text()))
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "bench":
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.add(name if name in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "bench"}
    return {m for m in found if m in MODULES and m != "bench"}


def test_bench_is_laid_out_by_role():
    """`ls bench/` shows the roles: a folder each, and at the top only the entry and what a bench is made of."""
    top = sorted(p.name for p in (ROOT / "bench").iterdir() if p.name != "__pycache__")
    roles = ["modes", "observe", "outputs", "stages"]
    assert top == sorted(["__init__.py", "__main__.py", "cli.py", "catalogue.py", "data.py", "schema.py", *roles])
    assert {m for m in MODULES if role(m) == 0} == {"bench", "bench.catalogue", "bench.schema", "bench.data"}
    for folder in ("observe", "stages", "outputs", "modes"):
        assert ast.get_docstring(ast.parse((ROOT / "bench" / folder / "__init__.py").read_text())), folder


def test_no_module_imports_one_above_its_role():
    upward = sorted(
        f"{module} imports {other}"
        for module, path in MODULES.items()
        for other in module_imports(path, top_level_only=False)
        if role(other) > role(module)
    )
    assert upward == []


def test_no_import_circle_in_bench():
    graph = {name: module_imports(path) for name, path in MODULES.items()}

    def reaches(start, goal, seen):
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph[start])

    circles = sorted(name for name in graph if reaches(name, name, {name}))
    assert circles == [], f"modules in an import circle: {circles}"


def test_the_teams_tools_are_outside_the_package():
    assert not any("tools" in module_imports(path, top_level_only=False) for path in MODULES.values())
    assert {p.name for p in (ROOT / "tools").glob("*.py")} >= {"firstgpu.py", "sync.py"}
    assert not [m for m in MODULES if m.rsplit(".", 1)[-1] in ("firstgpu", "sync", "instrument", "fsdp_probe")]


def test_no_function_of_the_bench_the_meter_or_the_checks_is_over_80_lines():
    files = [*MODULES.values(), ROOT / "meter.py", ROOT / "checks.py"]
    long = [
        f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > 80
    ]
    assert long == []


def test_the_budget_becomes_seconds_in_one_place():
    from bench.stages import cost

    assert cost.budget_s("none", True) is None and cost.budget_s(None) is None  # no budget; a plan's own, fitted
    assert cost.budget_s(None, True) == 60 * cost.BUDGET_MIN["gpu"] and cost.budget_s(None, False) == 60 * 25
    assert cost.budget_s(2.5, False) == 150 and cost.budget_s(2.5) == 150
    sources = "".join(path.read_text() for path in MODULES.values())
    assert sources.count("60 * (args.budget") == 0 and sources.count("60 * args.budget") == 0


def test_a_runs_time_limit_is_chosen_in_one_place():
    """--timeout, else the mode's default on this kind of machine: bench/stages/cost.py's timeout_s, for every mode."""
    from bench.stages import cost

    assert cost.timeout_s(None, 1) == 900 and cost.timeout_s(None, 0) == 600 and cost.timeout_s(77, 1, "check") == 77
    assert cost.timeout_s(None, 0, "accuracy") == 6 * 3600 and cost.timeout_s(None, 2, "check") == 600
    sources = {m: p.read_text() for m, p in MODULES.items() if m != "bench.stages.cost"}
    assert [m for m, text in sources.items() if "args.timeout or" in text or "TIMEOUT_S" in text] == []


def test_the_logs_layout_is_spelled_once():
    from bench import logs_of

    assert logs_of("results", "B") == ROOT.joinpath("results", "logs", "B").relative_to(ROOT)
    sources = "".join(path.read_text() for path in MODULES.values())
    assert sources.count('"logs"') == 1  # bench/__init__.py's LOGS


def test_a_run_carries_its_flags_and_an_older_plan_gets_them_from_its_command(tmp_path):
    """A run's command is built last from its script and flags: a mode's change to a flag replaces it (one
    --batch-size, one --steps in a probe of --max-batch), in its place. The modes read a run's global batch and model
    from the run (maxbatch's search starts there, scaling's table says it), not back out of its command line; a plan
    saved before runs kept them still resumes, and a workload's work reads back as a typed record (plan.Work)
    whatever fields the plan that saved it had."""
    from dataclasses import asdict

    from bench.modes import maxbatch
    from bench.stages import plan

    chosen = plan.Work(model="resnet18", batch_size=96, steps=10, warmup_steps=2, eval_samples=100)
    info = dict(image_size=32, classes=list("abcdefghij"))
    run = plan.training_run("amp", 1, "data/small", info, chosen, 0, 2, 0, 2, "small")
    assert (run.batch_size, run.model) == (96, "resnet18")
    probe = maxbatch.probe_run(run, 384, 7, "amp-batch384", warmup=2)
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
    saved, (again,) = plan.load(path)
    assert (again.batch_size, again.model, again.cmd) == (96, "resnet18", run.cmd)
    assert saved["works"]["small"] == plan.Work(steps=10, timeout=60, data="data/small")  # typed, the rest defaults
