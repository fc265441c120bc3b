"""bench/outputs/declared.py: what a mode declares it shows (a page of blocks, a Figure of panels), and the one writer
of any declaration: markdown.page draws the page, plots.figure the plot."""

import pandas as pd

from bench.outputs import declared, markdown, plots
from bench.outputs.declared import Band, Bars, Bullets, Figure, Line, Lines, Rows, Shows

TABLE = pd.DataFrame({"variant": ["baseline", "amp"], "rate": [100.0, 150.0]})
COLUMNS = (("variant", lambda r: r["variant"]), ("samples/s", lambda r: f"{r['rate']:,.1f}"))


def blocks(table, note=""):
    records = table.to_dict("records")
    return [
        f"A paragraph{note}.",
        Rows(records, COLUMNS),
        Bullets([f"{r['variant']}: {r['rate']:.0f}" for r in records]),
    ]


def figure(table, title, note=""):
    return Figure([Bars(list(table["rate"]), list(table["variant"]), "samples/s", [" a", " b"])], (5, 2), title)


def test_a_page_is_its_title_then_each_block_and_a_blank_line():
    assert markdown.page("T", blocks(TABLE)) == (
        "### T\n\nA paragraph.\n\n| variant | samples/s |\n|---|---|\n| baseline | 100.0 |\n| amp | 150.0 |\n\n"
        "- baseline: 100\n- amp: 150\n"
    )


def test_write_puts_the_page_and_the_plot_a_mode_declares_in_its_folder(tmp_path):
    shows = Shows("mine.md", "mine.png", "the rates", blocks, figure)
    text = declared.write(shows, tmp_path, TABLE, "Mine", note=" and a fact")
    assert (tmp_path / "mine.md").read_text() == text and text.startswith("### Mine\n\nA paragraph and a fact.\n")
    assert (tmp_path / "mine.png").read_bytes().startswith(b"\x89PNG")
    nothing = Shows("other.md", "other.png", "nothing", blocks, lambda table, title: None)
    declared.write(nothing, tmp_path, TABLE, "Other")  # a figure of None: no plot
    assert (tmp_path / "other.md").exists() and not (tmp_path / "other.png").exists()
    unplotted = Shows("page.md", None, "", blocks)
    declared.write(unplotted, tmp_path, TABLE, "Page")
    assert (tmp_path / "page.md").exists() and sorted(p.name for p in tmp_path.glob("*.png")) == ["mine.png"]


def test_a_figure_draws_its_panels_side_by_side(tmp_path):
    """Bars and Lines (a band, error bars, a dashed ideal, a line with no points), the title above or on the panel,
    trimmed or not: each a PNG."""
    band = Band([0, 10, 20], [0.9, 0.8, 0.7], [1.1, 1.0, 0.9], [1.0, 0.9, 0.8], "band", "mean")
    curves = Lines([Line("a", [0, 10], [1.0, 0.85]), Line("none", [], []), Line("b", [0, 20], [1.0, 0.75])], "step",
                   "loss", band=band, legend_beside=True, grid=True)  # fmt: skip
    scaled = Lines([Line("x", [1, 2], [10, 18], [1, 1], [2, 2], colour="C0"), Line("ideal", [1, 2], [10, 20],
                    dashed=True, colour="C0")], "processes", "samples/s", xticks=[1, 2], from_zero=True)  # fmt: skip
    bars = Bars([3, 1], ["p", "q"], "images/s", title="alone", top_first=False, fontsize=7)
    plots.figure(Figure([curves], (6, 3), "curves", title_size=9, dpi=120, trimmed=True), tmp_path / "a.png")
    plots.figure(Figure([scaled, bars], (8, 3), "two", wrap=None, title_above=True), tmp_path / "b.png")
    assert all((tmp_path / n).read_bytes().startswith(b"\x89PNG") for n in ("a.png", "b.png"))
