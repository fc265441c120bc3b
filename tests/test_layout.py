"""The repository's layout: bench/ by role, each role importing only its own and those below it, no import circle,
the team's tools outside the package, short functions, one place for each rule, no pickle, and tests/ laid out as the
code is."""

import ast
import os
from pathlib import Path

from helpers import MODULES, ROOT

# the roles, lowest first: what a bench is made of (the catalogue, the schema, the data, the package's error), what
# it observes (the machine, NVML, the samplers), the stages a bench goes through, the outputs rendered from their
# numbers, the modes that put stages and outputs together, and the entry (the flags, the one-line errors)
ROLES = ["bench", "bench.observe", "bench.stages", "bench.outputs", "bench.modes", "entry"]


ENTRY = {"bench.cli", "bench.__main__"}


def role(module):
    """A module's place in ROLES: its folder's (a folder's __init__ its own), the entry's, or the top's."""
    if module in ENTRY:
        return ROLES.index("entry")
    return ROLES.index(
        module if module in ROLES else ".".join(module.split(".")[:2]) if module.count(".") > 1 else "bench"
    )


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


def python_files():
    """The repository's own: not data/ and results/, nor a hidden folder (.venv, .torch-2.11: torch's code, .git)."""
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in ("data", "results") and not d.startswith(".")]
        yield from (os.path.join(folder, f) for f in files if f.endswith(".py"))


def unsafe_calls(source):
    """Calls that can run code from a file: pickle loads, read_pickle, allow_pickle, torch.load without weights_only."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
        if name in ("pickle.load", "pickle.loads", "pd.read_pickle", "pandas.read_pickle"):
            found.append(name)
        elif keywords.get("allow_pickle") == "True":
            found.append(f"{name}(allow_pickle=True)")
        elif name == "torch.load" and keywords.get("weights_only") != "True":
            found.append("torch.load without weights_only=True")
    return found


def test_bench_is_laid_out_by_role():
    """`ls bench/` shows the roles: a folder each, and at the top only the entry and what a bench is made of."""
    top = sorted(p.name for p in (ROOT / "bench").iterdir() if p.name != "__pycache__")
    roles = ["modes", "observe", "outputs", "stages"]
    made_of = ["catalogue.py", "config.py", "data.py", "schema.py"]
    assert top == sorted(["__init__.py", "__main__.py", "cli.py", *made_of, *roles])
    assert {m for m in MODULES if role(m) == 0} == {"bench", "bench.catalogue", "bench.config", "bench.schema",
                                                    "bench.data"}  # fmt: skip
    for folder in ("observe", "stages", "outputs", "modes"):
        assert ast.get_docstring(ast.parse((ROOT / "bench" / folder / "__init__.py").read_text())), folder


# bench/stages/'s folders, lowest first: each imports its own, cost.py and epochs.py (beside them: what every stage
# reads) and the folders before it here, never one after it
STAGES = ["records", "statistics", "planning", "running"]


def stage_floor(module):
    """A stages module's place in STAGES (bench.stages.planning.plan: planning's); -1 for cost.py and epochs.py."""
    parts = module.split(".")
    return STAGES.index(parts[2]) if len(parts) > 3 else -1


def test_the_stages_are_folders_in_the_pipelines_order_and_import_down_only():
    """`ls bench/stages` shows the pipeline: planning, running, records, statistics, and the two files every stage
    reads; running uses planning's records and the statistics' rules, planning the statistics' rules, never back."""
    top = sorted(p.name for p in (ROOT / "bench" / "stages").iterdir() if p.name != "__pycache__")
    assert top == sorted(["__init__.py", "cost.py", "epochs.py", *STAGES])
    for folder in STAGES:
        assert ast.get_docstring(ast.parse((ROOT / "bench" / "stages" / folder / "__init__.py").read_text())), folder
    stages = {m: p for m, p in MODULES.items() if m.startswith("bench.stages.")}
    assert len(stages) >= 20 and stage_floor("bench.stages.running.execute") > stage_floor("bench.stages.planning.plan")
    upward = sorted(
        f"{module} imports {other}"
        for module, path in stages.items()
        for other in module_imports(path, top_level_only=False)
        if other.startswith("bench.stages.") and stage_floor(other) > stage_floor(module)
    )
    assert upward == []


def test_no_module_imports_one_above_its_role():
    upward = sorted(
        f"{module} imports {other}"
        for module, path in MODULES.items()
        for other in module_imports(path, top_level_only=False)
        if role(other) > role(module)
    )
    assert upward == []


def stage_names(path):
    """The names a module takes from bench/stages/: 'summarize' for `from bench.stages.statistics import summarize`,
    'WAIT_BOUND' for `from bench.stages.statistics.summarize import WAIT_BOUND`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bench.stages"):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("bench.stages")]
    return found


def test_the_outputs_read_the_statistics_answers_and_never_work_them_out():
    """One way down: the stages hand each row's numbers, answers and causes to bench/outputs/ as the summary's fields
    (rules.derived, causes.with_causes); the words take at most the stages' constants (their thresholds, the
    causes' names), and no renderer imports a stage at all: a renderer that called a statistic row by row would have
    to import it."""
    outputs = {m: p for m, p in MODULES.items() if m.startswith("bench.outputs.")}
    assert {"bench.outputs.verdicts", "bench.outputs.markdown", "bench.outputs.plots"} <= set(outputs)
    taken = {m: stage_names(p) for m, p in outputs.items()}
    assert not [f"{m}: {n}" for m, names in taken.items() for n in names if not n.isupper()]
    assert not [
        m for m, names in taken.items() if names and m not in ("bench.outputs.verdicts", "bench.outputs.headline")
    ]
    assert stage_names(MODULES["bench.modes.speed"]) and "summarize" in stage_names(MODULES["bench.modes.speed"])


def test_every_modes_tables_are_drawn_by_the_outputs():
    """A mode hands its table to bench/outputs/ as Rows (markdown.py draws its .md, report.py its HTML): no module of
    bench/modes/ writes a markdown table's rule itself."""
    modes = {m: p.read_text() for m, p in MODULES.items() if m.startswith("bench.modes.")}
    assert len(modes) >= 8 and '"---|"' in MODULES["bench.outputs.markdown"].read_text()
    assert not [m for m, source in modes.items() if "|---|" in source or "| --- |" in source]


def test_every_mode_declares_what_it_shows_and_the_outputs_draw_it():
    """STYLE 25: a mode's page (its blocks: paragraphs, its table's columns, its verdict lines) and its plot (a Figure)
    are declared in its own module; bench/outputs/ renders any declaration (markdown.page, plots.figure, report.html)
    and holds no function for one mode's page or plot, and no module of bench/modes/ draws."""
    from bench import modes

    showing = {name: mode for name, mode in modes.registered().items() if mode.shows}
    assert {"max_batch", "parity", "scaling", "to_accuracy", "tune_loader"} <= set(showing)
    for name, mode in showing.items():
        mine = mode.run.__module__
        assert mode.shows.blocks.__module__ == mine, name
        assert mode.shows.figure is None or mode.shows.figure.__module__ == mine, name
    drawn = {m: p for m, p in MODULES.items() if m in ("bench.outputs.markdown", "bench.outputs.plots")}
    defined = {
        n.name for p in drawn.values() for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.FunctionDef)
    }
    for name in showing:
        assert not {name, f"plot_{name}", name.removeprefix("to_"), f"plot_{name.removeprefix('to_')}"} & defined, name
    for module, path in MODULES.items():
        if module.startswith("bench.modes"):
            imported = [
                a.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Import) for a in n.names
            ]
            imported += [n.module or "" for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom)]
            assert not [i for i in imported if i.startswith("matplotlib")], module


def test_no_import_circle_in_bench():
    graph = {name: module_imports(path) for name, path in MODULES.items()}

    def reaches(start, goal, seen):
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph[start])

    circles = sorted(name for name in graph if reaches(name, name, {name}))
    assert circles == [], f"modules in an import circle: {circles}"


def test_the_teams_tools_are_outside_the_package():
    assert not any("tools" in module_imports(path, top_level_only=False) for path in MODULES.values())
    assert {p.name for p in (ROOT / "tools").glob("*.py")} >= {"gpurun.py", "sync.py"}
    assert not [
        m for m in MODULES if m.rsplit(".", 1)[-1] in ("gpurun", "sync", "instrument", "fsdp_probe", "stable_start")
    ]


def test_no_function_of_the_bench_the_meter_or_the_checks_is_over_80_lines():
    files = [*MODULES.values(), ROOT / "meter.py", ROOT / "checks.py"]
    long = [
        f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > 80
    ]
    assert long == []


def test_no_code_reads_files_with_pickle():
    files = list(python_files())
    assert len(files) >= 10
    problems = {f: unsafe_calls(open(f).read()) for f in files}
    assert not {f: p for f, p in problems.items() if p}


def test_the_scan_finds_what_it_looks_for():
    assert unsafe_calls("import pickle\npickle.load(open('x', 'rb'))") == ["pickle.load"]
    assert unsafe_calls("torch.load('x.pt')") == ["torch.load without weights_only=True"]
    assert unsafe_calls("torch.load('x.pt', weights_only=True)") == []
    assert unsafe_calls("np.load('x.npy', allow_pickle=True)") == ["np.load(allow_pickle=True)"]


# test files that are not one module's: this one (the layout), the variants as a family (each variant's own tests are
# in its file), the Makefile's targets, the tests' own fork server; and tests/e2e/, whole benches, torchrun jobs, the
# browser and Slurm
NOT_ONE_MODULES = {"test_layout.py", "test_variants.py", "test_makefile.py", "test_forkserver.py"}
TESTS = ROOT / "tests"


def modules_with_logic():
    """{module's path: its test file's path}, for every module that defines a function or a class: the scripts at
    the top, bench/ (a package's __init__.py as tests/bench/test_bench.py) and tools/; not bench/__main__.py (one
    call of cli.main, run by every test of the entry)."""
    files = [*ROOT.glob("*.py"), *(ROOT / "bench").rglob("*.py"), *(ROOT / "tools").glob("*.py")]
    found = {}
    for path in files:
        tree = ast.parse(path.read_text())
        logic = any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for n in ast.walk(tree))
        if not logic or path.name == "__main__.py":
            continue
        folder = path.parent.relative_to(ROOT)
        name = f"test_{path.parent.name}.py" if path.name == "__init__.py" else f"test_{path.stem}.py"
        found[path.relative_to(ROOT)] = TESTS / folder / name
    return found


def test_every_module_with_logic_has_its_test_file_where_the_module_is():
    missing = sorted(str(test.relative_to(ROOT)) for test in modules_with_logic().values() if not test.is_file())
    assert missing == []
    plan = TESTS / "bench" / "stages" / "planning" / "test_plan.py"
    assert modules_with_logic()[Path("bench/stages/planning/plan.py")] == plan
    assert modules_with_logic()[Path("bench/__init__.py")] == TESTS / "bench" / "test_bench.py"


def test_every_test_file_is_a_modules_or_end_to_end():
    """A test file is where its module is, or in tests/e2e/ (whole benches, torchrun, the browser, Slurm), or one of
    the few that no module owns: nothing named by a story a reader would have to guess."""
    mirrors = set(modules_with_logic().values())
    strays = sorted(
        str(path.relative_to(ROOT))
        for path in TESTS.rglob("test_*.py")
        if path not in mirrors
        and path.parent != TESTS / "e2e"
        and path.relative_to(TESTS).as_posix() not in NOT_ONE_MODULES
    )
    assert strays == []
    assert (TESTS / "e2e").is_dir() and len(list((TESTS / "e2e").glob("test_*.py"))) >= 4


def module_scoped_fixtures(root):
    """(file, fixture) for each fixture declared with scope="module" under root."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                for decorator in node.decorator_list:
                    scope = [k.value for k in getattr(decorator, "keywords", []) if k.arg == "scope"]
                    if scope and isinstance(scope[0], ast.Constant) and scope[0].value == "module":
                        found.append((path.name, node.name))
    return found


def test_no_fixture_is_built_once_per_module(tmp_path):
    """make test hands the tests out longest first (tests/suite.py order), so one worker's tests of a module are not
    one after another, and pytest tears a module's fixture down whenever the next test is another module's: a shared
    run would be trained again (a tiny bench was, 50 s). A fixture shared by several tests is the session's."""
    assert module_scoped_fixtures(TESTS) == []
    (tmp_path / "conftest.py").write_text('@pytest.fixture(scope="module")\ndef shared():\n    return 1\n')
    assert module_scoped_fixtures(tmp_path) == [("conftest.py", "shared")]
