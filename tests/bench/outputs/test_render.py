"""bench/outputs/render.py: write() puts the page and the plot a mode declares in its results folder (the page as
markdown.page draws it, the plot where its figure is not None)."""

from bench.outputs import render
from bench.outputs.declared import Bars, Figure, Shows
from helpers import PAGE_TABLE, page_blocks


def figure(table, title, note=""):
    return Figure([Bars(list(table["rate"]), list(table["variant"]), "samples/s", [" a", " b"])], (5, 2), title)


def test_write_puts_the_page_and_the_plot_a_mode_declares_in_its_folder(tmp_path):
    shows = Shows("mine.md", "mine.png", "the rates", page_blocks, figure)
    text = render.write(shows, tmp_path, PAGE_TABLE, "Mine", note=" and a fact")
    assert (tmp_path / "mine.md").read_text() == text and text.startswith("### Mine\n\nA paragraph and a fact.\n")
    assert (tmp_path / "mine.png").read_bytes().startswith(b"\x89PNG")
    nothing = Shows("other.md", "other.png", "nothing", page_blocks, lambda table, title: None)
    render.write(nothing, tmp_path, PAGE_TABLE, "Other")  # a figure of None: no plot
    assert (tmp_path / "other.md").exists() and not (tmp_path / "other.png").exists()
    unplotted = Shows("page.md", None, "", page_blocks)
    render.write(unplotted, tmp_path, PAGE_TABLE, "Page")
    assert (tmp_path / "page.md").exists() and sorted(p.name for p in tmp_path.glob("*.png")) == ["mine.png"]
