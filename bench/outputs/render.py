"""A mode's results written as it declares them (bench/outputs/declared.py): its page drawn by markdown.page, its
plot by plots.figure, both in its results folder."""

from pathlib import Path

from bench import write_whole
from bench.outputs import markdown, plots


def write(shows, out, table, title, **facts):
    """The mode's page (markdown.page) and its plot (plots.figure) in the results folder out, from its table and the
    facts its declaration takes; the page's text returned."""
    text = markdown.page(title, shows.blocks(table, **facts))
    write_whole(Path(out) / shows.page, lambda tmp: Path(tmp).write_text(text))
    drawn = shows.figure(table, title, **facts) if shows.figure and shows.plot else None
    if drawn is not None:
        plots.figure(drawn, Path(out) / shows.plot)
    return text
