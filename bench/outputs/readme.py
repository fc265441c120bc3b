"""The documentation's generated blocks: results written by the bench from saved runs (its README mode:
bench/modes/saved.py), never typed, and each technique's cost in lines, counted from the scripts.

A result block is the text between `<!-- results: FOLDER -->` (or `<!-- results: FOLDER headline -->`) and
`<!-- /results -->` in README.md or a page of docs/, FOLDER a saved bench (baseline/<machine class>/,
examples/...) that holds its runs.csv. rewrite() summarizes each folder's runs again by the bench's current rules
(its summary.csv, summary.md, plots and report.html are rewritten) and puts in the block either its summary.md,
headings one level down, with two of its plots, or (headline) the table's main columns, the settled count and links
to the rest. `<!-- results: FOLDER MODE -->` (MODE a mode's flag without its dashes) shows the table that mode wrote
there, kept when the folder was saved, with its plot: the page and plot its registration says it shows (shown: {MODE:
its Shows, bench/outputs/declared.py}, from bench/modes/__init__.py shown()). The block
between `<!-- lines -->` and `<!-- /lines -->` is bench/outputs/diffs.py's count of each technique's lines, and the
rows between `<!-- scripts -->` and `<!-- /scripts -->` each technique's script, from the catalogue.
tests/bench/outputs/test_readme.py checks that every page holds what rewrite() writes, so a finding in a block is
always the verdicts'.
"""

import os
import re
from pathlib import Path

from bench import BenchError, catalogue, write_whole
from bench.observe.machine import ROOT
from bench.outputs import diffs, headline, markdown, verdicts

BLOCK = re.compile(
    r"(<!-- results: (?P<folder>\S+?)(?P<headline> headline)?"
    r"(?: (?P<mode>[a-z][a-z-]*))? -->\n)"
    r"(?P<body>.*?)(<!-- /results -->)",
    re.S,
)
LINES = re.compile(r"(<!-- lines -->\n)(?P<body>.*?)(<!-- /lines -->)", re.S)
SCRIPTS = re.compile(r"(<!-- scripts -->\n)(?P<body>.*?)(<!-- /scripts -->)", re.S)
PLOTS = [("tradeoff.png", "speed-up against memory"), ("time.png", "where a step's time goes")]


def pages(root=ROOT):
    """The files that may hold blocks: the README and the pages of docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def folders(text, modes=True):
    """The saved benches a page's blocks show, as written in their markers (relative to the repository); without
    modes, only those whose runs a block summarizes."""
    return [m.group("folder") for m in BLOCK.finditer(text) if modes or not m.group("mode")]


def block(folder, link, headline=False, mode=None, summary=None, shown=None, joined=()):
    """The text of a block for the saved bench in folder, its files linked as link/NAME; a headline's from the summary
    the folder was summarized to (summary: bench/modes/speed.py's write_outputs, each row's answers with it, and what
    the modes' tables add: joined, their Joins); a mode's from the files it shows (shown: {mode: its Shows})."""
    if mode:
        return mode_block(folder, link, mode, shown or {})
    if headline:
        return headline_block(summary, folder, link, joined)
    text = re.sub(r"^### ", "#### ", Path(folder, "summary.md").read_text(), flags=re.M)
    images = [f"![{what}]({link}/{name})" for name, what in PLOTS if Path(folder, name).exists()]
    return text + ("\n" + "\n".join(images) + "\n" if images else "")


def mode_block(folder, link, mode, shown):
    """The page a mode wrote in folder, headings one level down, and its plot."""
    if mode not in shown:
        raise BenchError(f"README.md or docs/ show a {mode} result of {folder}: no mode shows one (its flags: "
                         f"{', '.join(shown)})")  # fmt: skip
    table, plot, what = shown[mode].page, shown[mode].plot, shown[mode].what
    if not Path(folder, table).exists():
        raise BenchError(f"README.md or docs/ show the {mode} result of {folder}, which holds no {table}")
    text = re.sub(r"^### ", "#### ", Path(folder, table).read_text(), flags=re.M)
    return text + (f"\n![{what}]({link}/{plot})\n" if plot and Path(folder, plot).exists() else "")


def headline_block(summary, folder, link, joined=()):
    """Per workload its heading and the table's main columns; the settled count; links to the whole."""
    heading = Path(folder, "summary.md").read_text().splitlines()[0].removeprefix("### ")
    lines = []
    for workload in summary["workload"].unique():
        train = summary[(summary["workload"] == workload) & (summary["kind"] == "train")]
        columns = markdown.main_columns(train, joined)
        lines += [f"**{heading}**" if len(lines) == 0 else f"**{workload}**", "", *headline.lines(train, joined)]
        lines += [*markdown.table(train, columns), ""]
    note = verdicts.settled_note(summary)
    lines += [f"**{note}**", ""] if note else []
    lines += [
        f"Every column, the verdict of each row and the plots: [summary.md]({link}/summary.md); all of it with each"
        f" technique's code beside its numbers: [report.html]({link}/report.html) (download it and open it in a"
        " browser)."
    ]
    return "\n".join(lines) + "\n"


def lines_block():
    """A table of each technique's cost in lines (bench/outputs/diffs.py)."""
    rows = ["| technique | lines | read it |", "|---|---|---|"]
    for name, (base, script) in diffs.TECHNIQUES.items():
        rows.append(f"| {name} | {diffs.cost(name)} | `make diff V={name}` ({script} against {base}) |")
    return "\n".join(rows) + "\n"


# the scripts table's first rows: the base and the modules every script imports, which are no technique
BASE_SCRIPTS = [
    ("train.py", "the base, read as a story: data, a torchvision model, SGD, the loop, evaluation",
     "`python train.py --data DIR`"),
    ("meter.py", "all the measuring (the timed window, curves, memory, `--profile`, the record), in 4 lines of the"
     " loop", "imported by `train*.py`"),
    ("checks.py", "what is neither the story nor the technique: one-line errors for bad input, your own model's"
     " factory, the machine's checks (the CPU's flags: `cpu.py`)", "imported by `train*.py` and `loader*.py`"),
    ("loader.py", "its data: `open_data()` finds the images, `build_loaders()` batches them in a `DataLoader`",
     "imported by `train*.py`; `python loader.py --data DIR --bench`"),
]  # fmt: skip


def scripts_block():
    """The README's table of the scripts: the base's, then each technique's from the catalogue (bench/catalogue.py:
    what it adds and how to run it), in the tutorials' reading order: a technique is its script and its row."""
    rows = ["| file | what it is | how to run it |", "| --- | --- | --- |"]
    rows += [f"| `{script}` | {says} | {usage} |" for script, says, usage in BASE_SCRIPTS]
    techniques = sorted((row for row in catalogue.ROWS if row.base), key=lambda row: row.lesson)
    rows += [f"| `{row.script}` | {row.says} | {catalogue.usage(row)} |" for row in techniques]
    return "\n".join(rows) + "\n"


def render(text, page, root=ROOT, summaries=None, shown=None, joined=()):
    """page's text with every block written again (the folders already summarized: summaries, by folder; the modes'
    tables: shown, and what they add to a summary: joined, as block() takes them)."""

    def result(m):
        link = os.path.relpath(root / m.group("folder"), page.parent)
        summary = (summaries or {}).get(m.group("folder"))
        headline, mode = bool(m.group("headline")), m.group("mode")
        body = block(root / m.group("folder"), link, headline, mode, summary, shown, joined)
        return m.group(1) + body + m.group(6)

    text = BLOCK.sub(result, text)
    text = SCRIPTS.sub(lambda m: m.group(1) + scripts_block() + m.group(3), text)
    return LINES.sub(lambda m: m.group(1) + lines_block() + m.group(3), text)


def rewrite(resummarize, root=None, shown=None, joined=()):
    """Summarize every folder the pages show again (resummarize(folder) returns its summary), then write their blocks
    from those summaries (and the modes' tables: shown, and what they add to a summary: joined, as block() takes
    them); return the folders."""
    root = root or ROOT
    texts = {page: page.read_text() for page in pages(root)}
    summarized = list(dict.fromkeys(folder for text in texts.values() for folder in folders(text, modes=False)))
    summaries = {folder: resummarize(root / folder) for folder in summarized}
    for page, text in texts.items():
        new = render(text, page, root, summaries, shown, joined)
        if new != text:
            write_whole(page, lambda tmp, new=new: Path(tmp).write_text(new))
    return summarized
