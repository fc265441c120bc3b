"""What a mode shows, as it declares it in its own module: the records of a declaration, nothing drawn here.

A mode (bench/modes/) says what its results look like and nothing of how they are drawn: its page, a list of blocks
top to bottom under its title (a paragraph, Bullets, a table of Rows with its columns: a header and a cell a record
each), and its plot, a Figure of panels (Bars, Lines). bench/outputs/ renders any declaration and names no mode:
markdown.py the page (page), plots.py the figure (figure), report.py the page again in report.html (pages), readme.py
the README's blocks (its registration's shows: the page, the plot and what it shows); render.py's write() puts a mode's
page and plot in its results folder.
"""

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Rows:
    """A table on a page: its records (dicts, in order) and its columns, (header, cell(record) -> str) each."""

    records: list
    columns: tuple


@dataclass(frozen=True)
class Bullets:
    """A list on a page: a line each (a row's verdict line, say)."""

    lines: list


@dataclass(frozen=True)
class Bars:
    """A panel of horizontal bars, one a value, the first at the top (top_first) or at the bottom: its tick label and
    the words beside its bar (texts, or none) each; margin: the room right of the longest bar, as a share of it."""

    values: list
    labels: list
    xlabel: str
    texts: list | None = None
    title: str | None = None
    colour: str = "tab:blue"
    top_first: bool = True
    fontsize: float = 8
    margin: float | None = None


@dataclass(frozen=True)
class Line:
    """A line of a Lines panel: its points (x, y), their range (low, high: an error bar each, or none), dashed (an
    ideal, say), its colour (C0...: matplotlib's cycle) where it must match another's."""

    label: str
    x: list
    y: list
    low: list | None = None
    high: list | None = None
    dashed: bool = False
    colour: str | None = None


@dataclass(frozen=True)
class Band:
    """A shaded range under a Lines panel's lines, and its middle line (black)."""

    x: list
    low: list
    high: list
    middle: list
    label: str
    middle_label: str


@dataclass(frozen=True)
class Lines:
    """A panel of lines: xticks (None: matplotlib's), from_zero: the y axis starts at 0, legend_beside: the legend
    right of the panel (else inside it), grid: a faint one."""

    lines: list
    xlabel: str
    ylabel: str
    band: Band | None = None
    xticks: list | None = None
    from_zero: bool = False
    legend_beside: bool = False
    grid: bool = False


@dataclass(frozen=True)
class Figure:
    """A mode's plot: its panels side by side, its size in inches, its title (wrapped at `wrap` characters, None:
    not), its resolution; title_above: the title over the whole figure (suptitle) rather than over its one panel;
    trimmed: the PNG cut to what is drawn (bbox_inches="tight")."""

    panels: list
    size: tuple
    title: str
    wrap: int | None = 110
    title_size: float = 8
    title_above: bool = False
    dpi: int = 110
    trimmed: bool = False


@dataclass(frozen=True)
class Shows:
    """What a mode shows of its results (its registration's `shows`).

    page, plot: its files in --out (a README or docs block shows them: bench/outputs/readme.py); plot None for none
    what: what its plot shows, in words (the README's)
    blocks: blocks(table, **facts): its page under its title, top to bottom (str: a paragraph, Bullets, Rows)
    figure: figure(table, title, **facts): its plot (a Figure), None where there is nothing to draw
    """

    page: str
    plot: str | None
    what: str
    blocks: Callable
    figure: Callable | None = None


def nothing(row):
    """'': a row the declaration has nothing to say of."""
    return ""


@dataclass(frozen=True)
class Joins:
    """What a mode's table adds to a bench's summary in the same results folder (its registration's `joins`), declared
    in the mode's module; bench/modes/speed.py passes every registered mode's down, and bench/outputs/ renders them.

    numbers: numbers(summary, out): the summary with its columns, from its table in out (the summary as it is where
        out holds none): bench/modes/speed.py summary_of
    column: (header, cell(row) -> str): a column of the training table, shown where some row's cell is not ''
        (markdown.py train_columns); None for none
    said: said(row): what a row's verdict line adds (verdicts.py reasons)
    aside: aside(row): said right after the row's speed-up in the answer first (answer.py item)
    apart: ((label, holds(row) -> bool), ...): groups of the answer first ahead of what pays: a faster row one holds
        is listed there, with said's words, and not as paying (answer.py items)
    on_data: on_data(row): told to a row whose likeliest cause is its data (verdicts.py why_words)
    mark: mark(row): written beside a row's memory bars (plots.py plot_memory); marked: the memory plot's axis adds
        it where some row has a mark
    fields: the columns numbers adds that are no field of bench/schema.py (kept in memory, not in summary.csv):
        every row holds them (None where its table has none), read by attribute as the schema's (schema.SummaryRow)
    points: ((topic, command), ...): what the bench's words send a reader to this mode for, and how to ask it:
        "learning" (whether a technique learns alike over seeds), "loader" (the loader's settings for this machine);
        said whether or not its table is in the folder (pointed)
    """

    numbers: Callable
    column: tuple | None = None
    said: Callable = nothing
    aside: Callable = nothing
    apart: tuple = ()
    on_data: Callable = nothing
    mark: Callable = nothing
    marked: str = ""
    fields: tuple = ()
    points: tuple = ()


def pointed(joined, topic):
    """The command the first of joined (the modes' Joins) gives for topic ('' where none answers it)."""
    return next((command for joins in joined for name, command in joins.points if name == topic), "")
