"""bench/outputs/readme.py: the README's result blocks are what the bench writes from saved runs; the pages and their
links."""

import re
import shutil

import pytest

from bench import BenchError, catalogue, cli, modes
from bench.modes import speed
from bench.outputs import diffs, readme
from bench.stages.records import record
from helpers import ROOT, fast_first, mode_outputs

PAGES = {page: page.read_text() for page in readme.pages()}


TEXT = PAGES[ROOT / "README.md"]


def anchor(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text):
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # a '#' in a code block is no heading
    return {anchor(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


LINK = re.compile(r"\]\(([^)\s]+)\)")


SHOWN = list(dict.fromkeys((page, folder) for page, text in PAGES.items() for folder in readme.folders(text)))


def test_the_readme_is_short_with_contents_and_links_every_page():
    words = len(readme.BLOCK.sub("", TEXT).split()) + sum(
        len(m.group("body").split()) for m in readme.BLOCK.finditer(TEXT)
    )
    assert words <= 2500, f"the README has {words} words: move detail to docs/"
    contents = TEXT.split("## Contents", 1)[1].split("\n## ", 1)[0]
    assert {m for m in re.findall(r"\(#([\w-]+)\)", contents)} <= anchors(TEXT)
    assert len(re.findall(r"\(#([\w-]+)\)", contents)) >= 5
    for page in PAGES:
        if page.parent.name == "docs":
            assert f"(docs/{page.name})" in TEXT, f"docs/{page.name} is not linked from the README"


@pytest.mark.parametrize("page", list(PAGES), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_leads_somewhere(page):
    for target in LINK.findall(PAGES[page]):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.name} links {target}, which does not exist"
        if fragment and file.suffix == ".md":
            assert fragment in anchors(file.read_text()), f"{page.name} links {target}: no such heading"


def test_the_pages_show_saved_benches():
    folders = {folder for _, folder in SHOWN}
    assert "baseline/cpu-2core-amd-epyc-avx2" in folders and all((ROOT / f / "runs.csv").exists() for f in folders)
    assert "baseline/cpu-2core-amd-epyc-avx2" in readme.folders(TEXT)  # the headline, in the README itself


@pytest.mark.parametrize("page,folder", fast_first(SHOWN), ids=[f"{p.name}:{f}" for p, f in SHOWN])
def test_each_result_block_is_what_the_bench_writes_from_its_runs(page, folder, tmp_path):
    """Summarized again here from the shipped runs.csv by the current rules: the page's block must match."""
    for name in ["runs.csv", "machine.json", "rounds.txt", *mode_outputs()]:
        if (ROOT / folder / name).exists():
            shutil.copy(ROOT / folder / name, tmp_path / name)
    runs = record.read_runs(tmp_path / "runs.csv")
    summary = speed.write_outputs(tmp_path, runs["bench_id"].iloc[-1], speed.saved_machine(tmp_path, runs))
    for m in readme.BLOCK.finditer(PAGES[page]):
        if m.group("folder") == folder:
            link = "../" + folder if page.parent.name == "docs" else folder
            expected = readme.block(tmp_path, link, bool(m.group("headline")), m.group("mode"), summary, modes.shown())
            assert m.group("body") == expected, f"{page.name} is stale: python -m bench --readme writes {folder}"
            if m.group("mode"):  # the mode's own table, its machine named, and its plot
                plot = modes.shown()[m.group("mode")].plot
                assert expected.startswith("#### ") and "CPU only" in expected.splitlines()[0]
                header = "| flags |" if m.group("mode") == "tune-loader" else "| variant |"
                assert header in expected and f"({link}/{plot})" in expected
            elif m.group("headline"):
                assert "| answer |" in expected and f"({link}/report.html)" in expected
            else:
                assert "Verdicts" in expected and f"({link}/tradeoff.png)" in expected


def test_the_lines_each_technique_costs_are_counted_from_the_scripts():
    body = readme.LINES.search(TEXT).group("body")
    assert body == readme.lines_block()
    for name in diffs.TECHNIQUES:
        assert f"| {name} | {diffs.cost(name)} |" in body


def test_the_scripts_table_is_the_catalogues():
    """Every technique's script in the README's table, its words and its usage the catalogue's row's: a technique
    added by its script and its row is in the table after --readme."""
    body = readme.SCRIPTS.search(TEXT).group("body")
    assert body == readme.scripts_block()
    for row in catalogue.ROWS:
        if row.base:
            assert f"| `{row.script}` | {row.says} | {catalogue.usage(row)} |" in body and row.says


def test_no_finding_is_typed_outside_the_blocks():
    """A speed-up or a verdict's words outside a block would be a finding no verdict made."""
    for page, text in PAGES.items():
        outside = readme.BLOCK.sub("", text)
        assert not re.search(r"\d\.\d+x (faster|slower)|\d\.\d+x the (speed|host memory)|within noise", outside), page


def test_a_block_naming_a_folder_without_runs_is_one_error(tmp_path, monkeypatch):
    (tmp_path / "README.md").write_text("x\n<!-- results: baseline/nosuch -->\n<!-- /results -->\n")
    monkeypatch.setattr(readme, "ROOT", tmp_path)
    with pytest.raises(BenchError, match="README.md or docs/ show .*baseline/nosuch, which holds no runs.csv"):
        cli.main(["--readme", "--baseline-dir", str(tmp_path / "none")])
    assert (tmp_path / "README.md").read_text().endswith("<!-- /results -->\n")  # left as it was


@pytest.mark.parametrize("mode", list(modes.shown()))
def test_a_mode_block_shows_the_table_the_mode_wrote_and_its_plot(mode, tmp_path, monkeypatch):
    """A page's mode block gets the folder's table (headings a level down) and plot; without the table, one error."""
    table, plot = modes.shown()[mode].page, modes.shown()[mode].plot
    folder = tmp_path / "baseline" / "m"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "baseline" / "cpu-2core-amd-epyc-avx2" / "runs.csv", folder / "runs.csv")
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text(f"before\n<!-- results: baseline/m {mode} -->\nold\n<!-- /results -->\nafter\n")
    (tmp_path / "README.md").write_text("readme\n")
    monkeypatch.setattr(readme, "ROOT", tmp_path)
    with pytest.raises(BenchError, match=f"show the {mode} result of .*baseline/m, which holds no {table}"):
        readme.rewrite(lambda folder: None, tmp_path, modes.shown())
    assert "\nold\n" in page.read_text()  # left as it was
    (folder / table).write_text("### The table, CPU only\n\n| variant | x |\n|---|---|\n| baseline | 1 |\n")
    (folder / plot).write_bytes(b"png")
    summarized = []
    readme.rewrite(summarized.append, tmp_path, modes.shown())
    assert summarized == []  # a mode's table is shown as the mode wrote it: no runs summarized for it
    text = page.read_text()
    assert "#### The table, CPU only\n\n| variant | x |" in text and f"](../baseline/m/{plot})" in text
    assert text.startswith("before\n<!-- results: baseline/m ") and text.endswith("<!-- /results -->\nafter\n")


def test_a_block_of_a_mode_that_shows_no_table_is_one_error(tmp_path):
    """The modes' tables a block may show are the registrations' (shows): a block naming another is refused, naming
    the ones there are."""
    with pytest.raises(
        BenchError, match=r"show a counting result of .*: no mode shows one \(its flags: parity, max-batch, to-accuracy"
    ):
        readme.block(tmp_path, "x", mode="counting", shown=modes.shown())
