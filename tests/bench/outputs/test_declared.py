"""bench/outputs/declared.py: what a mode declares it shows (a page of blocks, a Figure of panels), as markdown.page
draws the page and plots.figure the plot."""

from bench.outputs import markdown, plots
from bench.outputs.declared import Band, Bars, Figure, Line, Lines
from helpers import PAGE_TABLE, page_blocks


def test_a_page_is_its_title_then_each_block_and_a_blank_line():
    assert markdown.page("T", page_blocks(PAGE_TABLE)) == (
        "### T\n\nA paragraph.\n\n| variant | samples/s |\n|---|---|\n| baseline | 100.0 |\n| amp | 150.0 |\n\n"
        "- baseline: 100\n- amp: 150\n"
    )


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
