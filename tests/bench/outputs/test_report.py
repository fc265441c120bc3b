"""bench/outputs/report.py: the report holds the tables, the plots and every technique with its diff."""

import re

import markupsafe

from bench import catalogue
from bench.outputs import diffs, markdown
from bench.outputs import report as report_module
from bench.stages.records import profiles, record
from helpers import ROOT


def test_the_report_holds_the_tables_plots_and_every_measured_technique_with_its_diff(report):
    folder, summary = report
    html = (folder / "report.html").read_text()
    assert "AMD EPYC" in html and "avx2" in html  # the machine and its features
    for variant in summary["variant"]:
        assert f"<td>{markdown.label(summary[summary['variant'] == variant].iloc[0])}</td>" in html
    for verdict in summary["verdict"].dropna():  # every verdict, escaped as HTML text
        assert str(markupsafe.escape(verdict)) in html
    assert html.count('src="data:image/png;base64,') == 4  # the plots, embedded
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing fetched: it opens offline
    measured = {diffs.technique(v) for v in summary["variant"]} - {None}
    # this bench ran every technique of a CNN but the GPU's own decode (nvjpeg: no CPU row; dp ran here, before the
    # CPU bench left its passthrough out)
    assert measured == set(diffs.TECHNIQUES) - catalogue.TRANSFORMER_ONLY - {"nvjpeg"}
    for name in measured:
        section = html.split(f'id="technique-{name}"')[1].split("</section>")[0]
        assert f"{diffs.cost(name)} lines added or changed" in section
        marked = [line for kind, line, mark in diffs.diff(name) if mark]
        assert marked and section.count('class="line added marked"') == len(marked)
        assert section.count('<span class="mark"># new #</span>') == sum(diffs.MARK in line for line in marked)


def test_the_diff_is_the_scripts_own(tmp_path):
    """diffs.diff is make diff's content: applying its removed and added lines to the base gives the script."""
    for name, (base, script) in diffs.TECHNIQUES.items():
        lines = diffs.diff(name, context=10**6)  # one hunk holding the whole files
        assert [line for kind, line, _ in lines if kind in ("same", "added")] == (
            ROOT / script
        ).read_text().splitlines()
        assert [line for kind, line, _ in lines if kind in ("same", "removed")] == (
            ROOT / base
        ).read_text().splitlines()
    (tmp_path / "train.py").write_text('"""Base."""\nx = 1\n')
    (tmp_path / "train_amp.py").write_text('"""Base, and amp."""\nx = 1\n# new # two lines\ny = 2\n\nz = 3  # new #\n')
    assert diffs.cost("amp", root=tmp_path) == 3  # the block's comment and line, and the marked line; not the blank
    added = [(line, mark) for kind, line, mark in diffs.diff("amp", root=tmp_path) if kind == "added"]
    assert added == [('"""Base, and amp."""', False), ("# new # two lines", True), ("y = 2", True), ("", False)] + [
        ("z = 3  # new #", True)
    ]


def test_each_technique_shows_the_operators_it_changed_as_the_profiles_stage_found_them(report, tmp_path):
    """The report draws what bench/stages/records/profiles.py hands it (shown: each technique's largest changes against
    the baseline's, its trace's name), without working a change out itself."""
    folder, summary = report
    ops = lambda **ms: [dict(name=n, on="cpu", ms_per_step=v, calls_per_step=1) for n, v in ms.items()]  # noqa: E731
    workload = summary.loc[summary["variant"] == "amp", "workload"].iloc[0]
    profiled = {workload: {"baseline": dict(ops=ops(conv=100.0, copy=5.0), trace="b.json.gz"),
                           "amp": dict(ops=ops(conv=60.0, to_bf16=20.0), trace="amp.json.gz")}}  # fmt: skip
    runs = record.read_runs(folder / "runs.csv")
    path = report_module.write(tmp_path, summary, runs, {}, {workload: "w"}, ("now", "b"), [], profiles.shown(profiled))
    section = path.read_text().split('id="technique-amp"')[1].split("</section>")[0]
    for name, before, after in (("conv", "100.00", "60.00"), ("to_bf16", "0.00", "20.00"), ("copy", "5.00", "0.00")):
        assert name in section and before in section and after in section
    assert "amp.json.gz" in section and "b.json.gz" not in section


def test_the_report_holds_the_page_and_plot_of_every_mode_that_ran_in_its_folder(tmp_path):
    """The saved AVX2 baseline's --max-batch, --scaling and --to-accuracy pages, beside its bench: report.html holds
    each page (its heading, paragraphs, table and lines) and its plot, as the modes declare them (modes.shown())."""
    import json
    import shutil

    from bench.modes import shown, speed
    from helpers import SAVED

    for name in ("runs.csv", "max_batch.md", "max_batch.png", "scaling.md", "scaling.png", "to_accuracy.md"):
        shutil.copy(SAVED / name, tmp_path / name)
    runs = record.read_runs(tmp_path / "runs.csv")
    speed.write_outputs(tmp_path, runs["bench_id"].iloc[-1], json.loads((SAVED / "machine.json").read_text()))
    html = (tmp_path / "report.html").read_text()
    for mode, plotted in ("max-batch", True), ("scaling", True), ("to-accuracy", False):
        section = html.split(f'id="mode-{mode}"')[1].split("</section>")[0]
        page = (tmp_path / shown()[mode].page).read_text()
        heading = page.splitlines()[0].removeprefix("### ")
        assert f"<h3>{markupsafe.escape(heading)}</h3>" in section
        for line in page.splitlines():
            if line.startswith("- "):
                assert f"<li>{markupsafe.escape(line[2:])}</li>" in section
        rows = [line for line in page.splitlines() if line.startswith("| ")]
        assert section.count("<tr>") == len(rows) and "<th>variant</th>" in section
        assert section.count('src="data:image/png;base64,') == plotted
    assert html.count('class="mode"') == 3 + 3  # three sections, three tables (to_accuracy_curves.png not copied)


def test_a_pages_markdown_reads_as_its_blocks():
    """blocks_of: the markdown markdown.page writes back as heading, paragraph (code and bold marked up, the rest
    escaped), table and list."""
    text = "### A <title>\n\n**The answer**: use `--workers 2`.\n\n| a | b |\n|---|---|\n| 1 |  |\n\n- one\n- two\n"
    blocks = report_module.blocks_of(text)
    assert [b["kind"] for b in blocks] == ["heading", "paragraph", "table", "list"]
    assert blocks[0]["text"] == "A &lt;title&gt;"
    assert blocks[1]["text"] == "<strong>The answer</strong>: use <code>--workers 2</code>."
    assert blocks[2]["headers"] == ["a", "b"] and blocks[2]["rows"] == [["1", ""]]
    assert blocks[3]["lines"] == ["one", "two"]
