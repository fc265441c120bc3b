"""bench/modes/__init__.py: a mode is one registration. A made-up mode, added through the registry alone, gets its flag
in --help, its checks, its outputs checked before any work, the lock, the two-modes error, --save-baseline's care,
and runs to its outputs; the bench's own modes are registered in their order, and the default is the bench."""

import dataclasses
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from bench import BenchError, cli, modes
from bench.config import read
from bench.modes import Registration, speed
from bench.outputs import render
from bench.outputs.declared import Bars, Bullets, Figure, Joins, Rows, Shows
from bench.stages.records import record


def count_flags(p):
    p.add_argument("--count-images", action="store_true", help="count the images of --data, per class")
    p.add_argument("--count-glob", default="*.*", help="with --count-images: the images' names to count")


def check_count(flags, config):
    if config.mode == "count_images" and config.work.data is None:
        raise BenchError("--count-images counts the images of --data: name a folder")


@dataclass(frozen=True)
class CountFlags:
    """The made-up mode's own flag, read by its name (config.own)."""

    count_glob: str


def count_line(record):
    """The made-up mode's verdict line: a row of its table in words."""
    return f"class {record['class']}: {record['images']} images"


def count_blocks(table):
    """Its page under its title: a paragraph, its table, a line a row."""
    records = table.to_dict("records")
    columns = (("class", lambda r: str(r["class"])), ("images", lambda r: f"{r['images']:,}"))
    return [f"{table['images'].sum()} images in {len(table)} classes.", Rows(records, columns),
            Bullets([count_line(r) for r in records])]  # fmt: skip


def count_figure(table, title):
    """Its plot: a bar a class."""
    return Figure([Bars(list(table["images"]), [str(c) for c in table["class"]], "images")], (6, 3), title)


COUNT_SHOWS = Shows("count_images.md", "count_images.png", "images per class", count_blocks, count_figure)
COUNT_S = 0.001  # its time estimate: a millisecond an image (made up)


def count_images(config):
    """The made-up mode's work: the images of --data per class, its time estimate said first, then its table, page and
    plot (declared above, rendered by bench/outputs/); while it runs, --out is locked."""
    out = config.outputs.out
    with pytest.raises(BenchError, match="another bench is using"):
        cli.lock(out)
    images = sorted(Path(config.work.data).glob(f"*/*/{config.own.count_glob}"))
    print(f"count images: {len(images)} images, about {len(images) * COUNT_S:.2f} s")
    counts = {}
    for image in images:
        counts[image.parent.name] = counts.get(image.parent.name, 0) + 1
    table = pd.DataFrame({"class": list(counts), "images": list(counts.values())})
    table.to_csv(out / "count_images.csv", index=False)
    render.write(COUNT_SHOWS, out, table, f"Images per class: {config.work.data}")


def count_numbers(summary, out):
    """What the made-up mode's table adds to a bench's summary in the same folder: the images it counted."""
    if not (Path(out) / "count_images.csv").exists():
        return summary
    counted = sum(int(line.split(",")[1]) for line in (Path(out) / "count_images.csv").read_text().splitlines()[1:])
    return summary.assign(images_counted=counted)


def counted(row):
    """'1,234 images' where the row has the count, else ''."""
    return f"{row.images_counted:,.0f} images" if pd.notna(row.images_counted) else ""


COUNT_JOINS = Joins(
    count_numbers,
    column=("images (--count-images)", counted),  # a column of the bench's training table
    said=lambda row: counted(row) and f"--count-images counted {counted(row)}",  # words in its verdict
    aside=lambda row: counted(row) and f" (of {counted(row)})",  # beside its speed-up in the answer first
    apart=(
        ("Faster, but counted", lambda row: row.variant == "amp" and bool(counted(row))),
    ),  # a group ahead of what pays
    on_data=lambda row: counted(row) and f"The count says {counted(row)}",  # to a row that waits for its data
    mark=counted,  # beside its memory bars
    marked="images: --count-images",  # and on that plot's axis
    fields=("images_counted",),  # the column count_numbers adds, read by attribute as the schema's (every row has it)
)


COUNT = Registration(
    "count_images",
    count_images,
    asked=lambda flags: flags.count_images,
    add_flags=count_flags,
    check_flags=check_count,
    own=read(CountFlags),
    outputs=("count_images.csv", "count_images.md", "count_images.png"),
    only=("count_glob",),  # --count-glob with another mode is refused by the rule made once from this
    joins=COUNT_JOINS,  # what its table adds to a bench's summary in the same folder: numbers, words, marks
    shows=COUNT_SHOWS,  # its page and plot: written by bench/outputs/, in a README block and in report.html
)


@pytest.fixture
def counting(monkeypatch):
    """The made-up mode registered for one test: register() and nothing else."""
    monkeypatch.setattr(modes, "OTHERS", {})
    return modes.register(COUNT)


def test_a_mode_added_through_the_registry_alone_runs_to_its_outputs(counting, tiny_data, tmp_path, capsys):
    """Its module and its registration alone: its estimate, its table, its page (a paragraph, the table, a verdict
    line a row) and its plot, rendered from its declaration; --save-baseline keeps them."""
    out = tmp_path / "out"
    assert cli.main(["--count-images", "--data", str(tiny_data), "--out", str(out)]) in (0, None)
    images = sorted(Path(tiny_data).glob("*/*/*.*"))
    classes = sorted({p.parent.name for p in images})
    assert f"count images: {len(images)} images, about {len(images) * COUNT_S:.2f} s" in capsys.readouterr().out
    page = (out / "count_images.md").read_text()
    assert page.startswith(f"### Images per class: {tiny_data}\n\n{len(images)} images in {len(classes)} classes.\n")
    assert "\n| class | images |\n|---|---|\n" in page
    for name in classes:
        mine = sum(p.parent.name == name for p in images)
        assert f"| {name} | {mine:,} |" in page and f"- class {name}: {mine} images" in page
    assert (out / "count_images.png").read_bytes().startswith(b"\x89PNG")
    assert len((out / "count_images.csv").read_text().splitlines()) == 1 + len(classes)
    assert not list(out.glob("logs")) and not (out / "runs.csv").exists()  # the bench itself did not run
    saved = tmp_path / "saved"  # --save-baseline keeps a mode's outputs: the registered mode's too
    cli.main(["--save-baseline", "mine", "--out", str(out), "--baseline-dir", str(saved)])
    assert (saved / "mine" / "count_images.md").read_text() == page and (saved / "mine" / "count_images.png").exists()
    assert f"saved {out}/count_images.* as {saved / 'mine'}" in capsys.readouterr().out


def test_a_registered_modes_table_joins_the_benchs_summary_and_a_page_and_the_report_show_it(
    counting, tiny_data, tmp_path
):
    """By its registration alone: a bench's summary in the folder the mode wrote takes its column (joins), a page's
    block `<!-- results: FOLDER count-images -->` shows its page and plot (shows) when --readme writes the blocks, and
    the report of a bench summarized there holds its page and its plot."""
    from bench.outputs import readme
    from helpers import SAVED, STEADY, runs_of

    out = tmp_path / "baseline" / "m"
    cli.main(["--count-images", "--data", str(tiny_data), "--out", str(out)])
    images = len(sorted(Path(tiny_data).glob("*/*/*.*")))
    runs = runs_of({"baseline": STEADY})
    assert set(speed.summary_of(runs, out)["images_counted"]) == {images}
    assert speed.summary_of(runs, tmp_path)["images_counted"].isna().all()  # every row has the field, None here
    assert speed.summary_of(runs)["images_counted"].isna().all()
    assert modes.joined()[-1] is COUNT_JOINS
    assert modes.shown()["count-images"] is COUNT_SHOWS
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text("<!-- results: baseline/m count-images -->\nold\n<!-- /results -->\n")
    (tmp_path / "README.md").write_text("readme\n")
    readme.rewrite(lambda folder: None, tmp_path, modes.shown())
    table = re.sub(r"^### ", "#### ", (out / "count_images.md").read_text(), flags=re.M)  # headings one level down
    plot = "![images per class](../baseline/m/count_images.png)"
    assert page.read_text() == f"<!-- results: baseline/m count-images -->\n{table}\n{plot}\n<!-- /results -->\n"
    shutil.copy(SAVED / "runs.csv", out / "runs.csv")  # a bench summarized in the same folder: its report
    bench_runs = record.read_runs(out / "runs.csv")
    speed.write_outputs(out, bench_runs["bench_id"].iloc[-1], json.loads((SAVED / "machine.json").read_text()))
    html = (out / "report.html").read_text()
    section = html.split('id="mode-count-images"')[1].split("</section>")[0]
    assert f"<p>{images} images in " in section and "<th>class</th><th>images</th>" in section
    assert "<li>class " in section and section.count('src="data:image/png;base64,') == 1
    assert '<a href="#modes">' in html


def test_what_a_registered_modes_table_adds_the_benchs_outputs_say_by_its_declaration_alone(
    counting, tiny_data, tmp_path, monkeypatch
):
    """Its Joins alone (bench/outputs/ names no mode): its column in the training table, its words in a row's verdict
    and beside its speed-up in the answer first, its group ahead of what pays, what a row waiting for its data is
    told, its mark beside a row's memory bars and its note on that plot's axis; a folder without its table: none."""
    from bench.outputs import headline, markdown, plots
    from helpers import STEADY, runs_of, scaled

    out = tmp_path / "out"
    cli.main(["--count-images", "--data", str(tiny_data), "--out", str(out)])
    words = f"{len(sorted(Path(tiny_data).glob('*/*/*.*'))):,} images"
    runs = runs_of({"baseline": STEADY, "amp": scaled(1.5), "dp": scaled(1.0, data_wait_frac=0.4)})
    summary = speed.summary_of(runs, out)
    train = summary[summary["kind"] == "train"]
    text = markdown.markdown(summary, {"small": "small"}, "now", joined=modes.joined())
    assert "| images (--count-images) |" in text and f"| {words} |" in text
    verdicts = summary.set_index("variant")["verdict"]
    assert f"--count-images counted {words}" in verdicts["amp"] and f"The count says {words}." in verdicts["dp"]
    said = dict(headline.items(train, modes.joined()))
    assert list(said)[0] == "Faster, but counted" and said["Faster, but counted"].startswith(f"amp 1.50x (of {words})")
    assert f": --count-images counted {words}" in said["Faster, but counted"] and "amp" not in said.get("Pays", "")
    drawn = []
    monkeypatch.setattr(plots, "save", lambda fig, path: drawn.append(fig))
    plots.plot_memory(summary, tmp_path / "memory.png", {"small": "small"}, modes.joined())
    (axis,) = drawn[0].axes
    assert [t.get_text() for t in axis.texts] == [f" {words}"] * 3 and axis.get_xlabel().endswith(
        "; images: --count-images"
    )
    alone = speed.summary_of(runs, tmp_path)  # no table of it here: nothing of it anywhere
    assert "images (--count-images)" not in markdown.markdown(alone, {"small": "small"}, "now", joined=modes.joined())
    assert "--count-images" not in " ".join(alone["verdict"].dropna()) and "Faster, but counted" not in dict(
        headline.items(alone[alone["kind"] == "train"], modes.joined())
    )


def test_a_registered_modes_flags_are_the_benchs(counting, tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0 and "--count-images" in capsys.readouterr().out
    with pytest.raises(BenchError, match="^--count-images counts the images of --data: name a folder$"):
        cli.parse_args(["--count-images"])
    with pytest.raises(BenchError, match="^--check and --count-images are two modes: give one$"):
        cli.parse_args(["--check", "--count-images", "--data", str(tmp_path)])
    asked = cli.parse_args(["--count-images", "--data", str(tmp_path), "--count-glob", "*.png"])
    assert asked.mode == "count_images" and asked.own == CountFlags("*.png")  # its own flags, typed, in config.own
    with pytest.raises(BenchError, match="^--count-glob goes with --count-images$"):
        cli.parse_args(["--count-glob", "*.png"])
    with pytest.raises(BenchError, match="^--count-glob goes with --count-images, not --parity$"):
        cli.parse_args(["--parity", "--count-glob", "*.png"])
    (tmp_path / "out" / "count_images.md").mkdir(
        parents=True
    )  # its output a folder: refused before any work, in any mode
    with pytest.raises(BenchError, match="count_images.md is a folder: the bench writes a file of that name"):
        cli.main(["--summarize", "--out", str(tmp_path / "out")])


def test_a_name_is_registered_once(counting):
    with pytest.raises(ValueError, match="'count_images' is registered already"):
        modes.register(COUNT)
    with pytest.raises(ValueError, match="'check' is registered already"):
        modes.register(Registration("check", print))


def test_a_mode_has_one_name_its_executor_its_files_and_its_runs_folder_go_by():
    """The registration's name is the executor's (plan.json's, the progress lines'), its page and plot begin with it,
    and its runs' folder is its flag's spelling of it: another is a mistake in the registration, caught where it is
    made."""
    for mode in modes.registered().values():
        if mode.executes is not None:
            assert mode.executes.name == mode.name and mode.executes.subfolder in (None, mode.name.replace("_", "-"))
    with pytest.raises(ValueError, match="mode 'bench': its executor is named 'speed'"):
        Registration("bench", print, executes=speed.Speed)
    with pytest.raises(ValueError, match=r"mode 'tally': what it shows \(count_images.md, count_images.png\) goes by"):
        Registration("tally", print, shows=COUNT_SHOWS)
    for mode in modes.registered().values():  # the bench's own: their pages and plots begin with their names
        assert mode.shows is None or mode.shows.page.startswith(mode.name)

    class Folder(speed.Speed):
        name, subfolder = "max_batch", "maxbatch"

    with pytest.raises(ValueError, match="mode 'max_batch': its runs' folder 'maxbatch' is not its flag's name"):
        Registration("max_batch", print, executes=Folder)


def test_a_flag_goes_with_the_modes_that_declare_it_and_a_wrong_declaration_is_caught(monkeypatch):
    """The one rule, from every registration's only: a bench's --profile goes with --resume too, not --parity; a
    declared name that is no flag's (a typo would refuse nothing) stops every parse."""
    assert cli.parse_args(["--resume", "--profile"]).outputs.profile
    with pytest.raises(BenchError, match="^--profile goes with a bench or --resume, not --parity$"):
        cli.parse_args(["--parity", "--profile"])
    with pytest.raises(BenchError, match="^--seeds goes with --parity$"):
        cli.parse_args(["--seeds", "3"])
    monkeypatch.setattr(modes, "OTHERS", {})
    modes.register(dataclasses.replace(COUNT, only=("count_globs",)))
    with pytest.raises(ValueError, match="mode 'count_images': only names 'count_globs', which is no flag's dest"):
        cli.parse_args([])


def test_the_benchs_own_modes_in_their_order_and_the_default_is_the_bench():
    own = list(modes.registered())
    assert own == ["resume", "summarize", "check", "readme", "parity", "max_batch", "to_accuracy", "scaling",
                   "tune_loader", "speed", "save_baseline"]  # fmt: skip
    assert [m.name for m in modes.registered().values() if m.asked is None] == ["speed"]
    assert modes.registered()["speed"] is speed.MODE and cli.parse_args([]).mode == "speed"
    assert not modes.registered()["readme"].locked  # it writes README.md and the saved folders, not --out
    executed = {m.executes.name for m in modes.registered().values() if m.executes is not None}
    assert executed == {"speed", "check", "max_batch", "to_accuracy", "parity", "scaling", "tune_loader"}


def test_the_outputs_name_no_mode():
    """bench/outputs/ renders what the modes declare (their Shows, their Joins) and names none of them: no mode's flag,
    module or registered name (where it is no plain word) in its code or its docstrings, so a mode's words can only
    come from its own module."""
    names = {f"--{name.replace('_', '-')}" for name in modes.registered() if name != "speed"}
    names |= {f"modes.{name}" for name in modes.registered()} | {n for n in modes.registered() if "_" in n}
    names |= {"parity", "largest"}  # two modes' words that once lived here
    for path in sorted((Path(modes.__file__).parent.parent / "outputs").glob("*.py")):
        text = path.read_text()
        assert not [n for n in names if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)], path.name


MODE_WALKTHROUGH = ("docs/bench.md", "Adding a mode")


@pytest.mark.slow
def test_the_walkthrough_of_a_mode_that_launches_runs_and_joins_the_summary(tmp_path, tiny_data):
    """docs/bench.md "Adding a mode", followed in a copy of the suite: its module written as bench/modes/first_step.py,
    its line added to BUILT_IN, its test as tests/bench/modes/test_first_step.py, nothing else; then its commands on the
    tiny data and model: the dry run lists a run a variant, the mode launches them through the executor to its table,
    page and plot, a bench in the same folder takes its column, --resume knows it by name, and its test passes."""
    from helpers import PY, ROOT, TINY_MODEL, run_in, walkthrough

    copy = tmp_path / "suite"
    left_out = shutil.ignore_patterns(".*", "baseline", "data", "results", "docs", "__pycache__", "*.png")
    shutil.copytree(ROOT, copy, ignore=left_out)
    (copy / "bench" / "modes" / "first_step.py").write_text(walkthrough(*MODE_WALKTHROUGH, "module") + "\n")
    registry = (copy / "bench" / "modes" / "__init__.py").read_text()
    end = ")  # fmt: skip\n"
    at = registry.index(end, registry.index("BUILT_IN = ("))
    line = walkthrough(*MODE_WALKTHROUGH, "registry").rstrip(",")
    (copy / "bench" / "modes" / "__init__.py").write_text(registry[:at] + ", " + line + registry[at:])
    (copy / "tests" / "bench" / "modes" / "test_first_step.py").write_text(
        walkthrough(*MODE_WALKTHROUGH, "test") + "\n"
    )

    def run(*cmd):
        return run_in(copy, *cmd)

    tiny = ["--model", TINY_MODEL, "--steps", "4", "--warmup-steps", "1", "--batch-size", "16"]
    said = [run(PY, *cmd.replace("DIR", str(tiny_data)).split()[1:], *tiny)
            for cmd in walkthrough(*MODE_WALKTHROUGH, "commands").splitlines()]  # fmt: skip
    assert re.search(r"^  baseline: .*train\.py", said[0], re.M) and re.search(
        r"^  amp: .*train_amp\.py", said[0], re.M
    )
    assert re.search(r"^\[1/2\] baseline-1: first step \d+\.\d\d s$", said[1], re.M)
    out = copy / "results" / "first"
    table = pd.read_csv(out / "first_step.csv")
    assert list(table["variant"]) == ["baseline", "amp"] and (table["steps"] > 0).all()
    page = (out / "first_step.md").read_text()
    assert page.startswith("### The first step, in steady steps\n") and "| baseline | " in page
    assert (out / "first_step.png").read_bytes().startswith(b"\x89PNG")
    summary = (out / "summary.md").read_text()
    assert "| first step (--first-step) |" in summary and re.search(r"\| \d+\.\d steps \|", summary)
    assert "--first-step" in run(PY, "-m", "bench", "--help")
    first = sorted(path.name for path in (out / "logs").iterdir())[0]  # the mode's bench, then the speed bench's
    resumed = run(PY, "-m", "bench", "--resume", first, "--out", str(out))
    assert f"resuming first_step {first}: 2 of 2 variants finished before" in resumed
    assert "1 passed" in run(PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/bench/modes/test_first_step.py")
