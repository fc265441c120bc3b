"""report.html: one file that opens offline in any browser (styles inline, plots embedded), holding the machine, the
summary tables, the verdicts, the plots, the pages of the other modes that ran in its folder (each mode's page and
plot as its module declares them), and each technique's diff against its base with its `# new #` lines highlighted,
beside what that technique measured here. Written wherever a bench's summary is (bench/modes/speed.py write_outputs),
from the same summary as summary.md; rendered with Jinja2 (templates escape every value) and
Pygments (Python highlighting), the diff from difflib (bench/outputs/diffs.py).
"""

import base64
import functools
import re
from pathlib import Path

import jinja2
import markupsafe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from bench import write_whole
from bench.observe.machine import ROOT
from bench.observe.machine import where as machine_where
from bench.outputs import diffs, headline, markdown
from bench.outputs.verdicts import present
from bench.schema import rows_of

TEMPLATE = Path(__file__).with_name("report.html.j2")
PLOTS = [
    ("throughput.png", "samples/s per variant, with the spread of the rounds"),
    ("tradeoff.png", "speed-up against memory, with 95% intervals"),
    ("time.png", "where a step's time goes"),
    ("memory.png", "peak memory per variant"),
    ("curves.png", "training loss and validation accuracy: does each technique still learn?"),
]
MACHINE = [  # (label, machine field)
    ("CPU", "cpu_model"),
    ("cores", "cpu_cores"),
    ("CPU features", "cpu_isa"),
    ("native bf16 on the CPU", "cpu_bf16_native"),
    ("memory GB", "ram_gb"),
    ("GPUs", "gpu_count"),
    ("GPU", "gpu_name"),
    ("compute capability", "gpu_capability"),
    ("native bf16 on the GPU", "gpu_bf16_native"),
    ("TF32", "gpu_tf32"),
    ("driver", "driver_version"),
    ("Python", "python_version"),
    ("platform", "platform"),
    ("machine class", "machine_class"),
]
ANSWER_CLASS = {"faster": "faster", "slower": "slower"}
# the main table's columns a phone's screen leaves out (in the full table below it): speed-up, answer and memory stay
PHONE_HIDDEN = ["samples/s (median)", "95% interval", "of ceiling", "host memory MiB (PSS)", "NVML MiB (process tree)"]


def machine_items(machine, runs=None):
    """(label, value) pairs of what is known of the machine, then the versions the runs record."""
    words = {True: "yes", False: "no"}
    items = [
        (name, words.get(machine.get(key), machine.get(key))) for name, key in MACHINE if present(machine.get(key))
    ]
    if runs is not None and not runs.empty:
        last = runs.iloc[-1]
        for name, key in ("torch", "torch_version"), ("torchvision", "torchvision_version"), ("CUDA", "cuda_version"):
            if present(last.get(key)):
                items.append((name, last.get(key)))
    return items


def highlighted(name):
    """A file's lines as highlighted HTML, one string per line: Pygments lexes the whole file (so a docstring reads
    as one) and closes its spans at each line's end; the mark is set apart."""
    return highlighted_text((ROOT / name).read_text())


@functools.lru_cache(maxsize=64)
def highlighted_text(text):
    """highlighted() of a file's text, once a process for each text: the reports one process writes (every saved
    folder's, for the README) show the same diffs (a tenth of a second each)."""
    html = highlight(text, PythonLexer(stripnl=False, ensurenl=True), HtmlFormatter(nowrap=True))
    lines = html.split("\n")[: len(text.splitlines())]
    return tuple(
        markupsafe.Markup(line.replace(diffs.MARK, f'<span class="mark">{diffs.MARK}</span>')) for line in lines
    )


def diff_lines(name):
    """The technique's diff (bench/outputs/diffs.py) as HTML lines: each line highlighted as it reads in its own
    file."""
    base, script = (highlighted(file) for file in diffs.TECHNIQUES[name])
    prefix = {"hunk": "", "same": " ", "removed": "-", "added": "+"}
    out = []
    for kind, line, marked, i, j in diffs.diff(name, numbered=True):
        html = markupsafe.escape(line) if kind == "hunk" else (script[j] if kind == "added" else base[i])
        out.append(dict(kind=kind, marked=marked, html=markupsafe.escape(prefix[kind]) + html))
    return out


def technique_rows(summary, name, profiled):
    """What a technique measured: one row per bench row of it (each workload; amp also on synthetic data), with the
    operators whose time changed most against the baseline where the bench profiled both (--profile)."""
    rows = []
    for r in rows_of(summary):
        if diffs.technique(r.variant) != name:
            continue
        memory = r.memory_vs_baseline
        rows.append(
            dict(
                row=f"{markdown.label(r)} on {r.workload}",
                speedup=markdown.fmt(r.speedup, "{:.2f}x"),
                interval=markdown.interval_cell(r),
                answer=markdown.answer_cell(r),
                answer_class=ANSWER_CLASS.get(r.speed_answer, ""),
                memory=markdown.fmt(memory, "{:.2f}x"),
                energy=markdown.fmt(r.energy_per_1k_samples_j_vs_baseline, "{:.2f}x"),
                verdict=r.verdict if present(r.verdict) else "",
                ops=[
                    dict(op, before=f"{op['before_ms']:,.2f}", after=f"{op['after_ms']:,.2f}")
                    for op in profiled.get(r.workload, {}).get(r.variant, {}).get("changes", [])
                ],  # fmt: skip
                trace=profiled.get(r.workload, {}).get(r.variant, {}).get("trace"),
            )
        )
    return rows


def techniques(summary, profiled):
    found = []
    for name, (base, script) in diffs.TECHNIQUES.items():
        rows = technique_rows(summary, name, profiled)
        if rows:
            found.append(
                dict(name=name, base=base, script=script, cost=diffs.cost(name), rows=rows, diff=diff_lines(name))
            )
    return found


def sections(summary, headings, joined=()):
    out = []
    for workload, heading in headings.items():
        part = summary[summary["workload"] == workload]
        train, loaders = part[part["kind"] == "train"], part[part["kind"] == "loader"]
        section = dict(heading=heading, train=None, loaders=None, train_verdicts=[], loader_verdicts=[], answer=[])
        if not train.empty:
            headers, rows = markdown.cells(train, markdown.train_columns(train, joined))
            section.update(train=dict(headers=headers, rows=rows), train_verdicts=list(train["verdict"].dropna()))
            headers, rows = markdown.cells(train, markdown.main_columns(train, joined))
            section.update(main=dict(headers=headers, rows=rows), answer=headline.items(train, joined))
            section["answer_title"] = headline.title(train)
            section["train_note"] = " ".join(filter(None, [markdown.blind_note(train), markdown.energy_note(train)]))
        if not loaders.empty:
            headers, rows = markdown.cells(loaders, markdown.LOADER_COLUMNS)
            section.update(loaders=dict(headers=headers, rows=rows), loader_verdicts=list(loaders["verdict"].dropna()))
        out.append(section)
    return out


def cell_class(header, cell):
    return ANSWER_CLASS.get(cell, "") if header == "answer" else ""


def plots(folder):
    return [
        dict(name=name, what=what, data=base64.b64encode((folder / name).read_bytes()).decode("ascii"))
        for name, what in PLOTS
        if (folder / name).exists()
    ]


def inline(text):
    """A line of a page as HTML: escaped, its `code` and **bold** marked up."""
    html = str(markupsafe.escape(text))
    html = re.sub(r"`([^`]+)`", r"<code>\1</code>", html)
    return markupsafe.Markup(re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", html))


def blocks_of(text):
    """A mode's page (the markdown markdown.page writes) as the blocks report.html draws: its heading, paragraphs,
    lists and tables ({kind, ...} each)."""
    found = []
    for chunk in re.split(r"\n\s*\n", text.strip()):
        lines = chunk.splitlines()
        if lines[0].startswith("#"):
            found.append(dict(kind="heading", text=inline(lines[0].lstrip("#").strip())))
        elif all(line.startswith("|") for line in lines):
            rows = [[inline(cell.strip()) for cell in line.strip()[1:-1].split("|")] for line in lines]
            found.append(dict(kind="table", headers=rows[0], rows=rows[2:]))
        elif all(line.startswith("- ") for line in lines):
            found.append(dict(kind="list", lines=[inline(line[2:]) for line in lines]))
        else:
            found.append(dict(kind="paragraph", text=inline(" ".join(lines))))
    return found


def pages(folder, shown):
    """What the modes that ran in folder show there (shown: {a mode's flag: its Shows, bench/outputs/declared.py}):
    each one's page as blocks and its plot, for the modes whose page is in the folder."""
    found = []
    for name, shows in (shown or {}).items():
        if not (folder / shows.page).exists():
            continue
        plot = folder / shows.plot if shows.plot else None
        data = base64.b64encode(plot.read_bytes()).decode("ascii") if plot and plot.exists() else None
        found.append(dict(name=name, blocks=blocks_of((folder / shows.page).read_text()), what=shows.what, data=data))
    return found


def render(summary, runs, machine, headings, stamp, notes, folder, profiled=None, shown=None, joined=()):
    """The report's HTML for a summary whose plots are in folder; profiled: what it shows of each profiled technique
    (bench/stages/records/profiles.py shown()); shown: what each mode shows ({its flag: its Shows}), where its page is
    in folder too; joined: what the modes' tables add to the summary (their Joins)."""
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template = environment.from_string(TEMPLATE.read_text())
    where = next(iter(headings.values()), "") if len(headings) == 1 else machine_where(machine)
    commits = runs["git_commit"].dropna() if "git_commit" in runs else []
    return template.render(
        where=where,
        bench_id=stamp[1],
        when=stamp[0],
        machine=machine_items(machine, runs),
        sections=sections(summary, headings, joined),
        cell_class=cell_class,
        phone_hidden=PHONE_HIDDEN,
        notes=[note for note in notes if note],
        plots=plots(folder),
        pages=pages(folder, shown),
        techniques=techniques(summary, profiled or {}),
        commit=str(commits.iloc[-1])[:12] if len(commits) else "",
        pygments_css=markupsafe.Markup(HtmlFormatter().get_style_defs("pre.diff")),
    )


def write(folder, summary, runs, machine, headings, stamp, notes, profiled=None, shown=None, joined=()):
    """folder/report.html; returns its path."""
    html = render(summary, runs, machine, headings, stamp, notes, folder, profiled, shown, joined)
    path = folder / "report.html"
    write_whole(path, lambda tmp: Path(tmp).write_text(html))
    return path
