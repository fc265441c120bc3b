"""bench/'s layout: no module imports one that imports it back (at module level, where a circle breaks a fresh
import and hides which module is the lower one)."""

import ast
import json

from helpers import ROOT


def module_imports(path):
    """The bench modules a module imports at its top level."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module == "bench":
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bench."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("bench.")}
    return found


def test_no_import_circle_in_bench():
    modules = {p.stem: p for p in (ROOT / "bench").glob("*.py") if p.stem != "__init__"}
    graph = {name: module_imports(path) & set(modules) for name, path in modules.items()}

    def reaches(start, goal, seen):
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph[start])

    circles = sorted(name for name in graph if reaches(name, name, {name}))
    assert circles == [], f"modules in an import circle: {circles}"


def test_no_function_of_the_bench_the_meter_or_the_checks_is_over_80_lines():
    files = [*(ROOT / "bench").glob("*.py"), ROOT / "meter.py", ROOT / "checks.py"]
    long = [
        f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > 80
    ]
    assert long == []


def test_the_budget_becomes_seconds_in_one_place():
    from bench import cost

    assert cost.budget_s("none", True) is None and cost.budget_s(None) is None  # no budget; a plan's own, fitted
    assert cost.budget_s(None, True) == 60 * cost.BUDGET_MIN["gpu"] and cost.budget_s(None, False) == 60 * 25
    assert cost.budget_s(2.5, False) == 150 and cost.budget_s(2.5) == 150
    sources = "".join(path.read_text() for path in (ROOT / "bench").glob("*.py"))
    assert sources.count("60 * (args.budget") == 0 and sources.count("60 * args.budget") == 0


def test_the_logs_layout_is_spelled_once():
    from bench import logs_of

    assert logs_of("results", "B") == ROOT.joinpath("results", "logs", "B").relative_to(ROOT)
    sources = "".join(path.read_text() for path in (ROOT / "bench").glob("*.py"))
    assert sources.count('"logs"') == 1  # bench/__init__.py's LOGS


def test_a_run_carries_its_batch_and_model_and_an_older_plan_gets_them_from_its_command(tmp_path):
    """The modes read a run's global batch and model from the run (maxbatch's search starts there, scaling's table
    says it), not back out of its command line; a plan saved before runs kept them still resumes."""
    from dataclasses import asdict

    from bench import plan

    chosen = dict(model="resnet18", batch_size=96, steps=10, warmup_steps=2, eval_samples=100)
    info = dict(image_size=32, classes=list("abcdefghij"))
    run = plan.training_run("amp", 1, "data/small", info, chosen, 0, 2, 0, 2, "small")
    assert (run.batch_size, run.model) == (96, "resnet18")
    old = {k: v for k, v in asdict(run).items() if k not in ("batch_size", "model")}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(dict(bench_id="b", machine_class="m", works={}, runs=[old])))
    _, (again,) = plan.load(path)
    assert (again.batch_size, again.model) == (96, "resnet18")
