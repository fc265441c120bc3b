"""The README's result blocks: written by the bench from saved runs (python -m bench --readme), never typed.

A block is the text between `<!-- results: FOLDER -->` and `<!-- /results -->` in README.md, FOLDER a saved
bench (baseline/<machine class>/, examples/...) that holds its runs.csv. `--readme` summarizes each folder's
runs again by the bench's current rules (its summary.csv, summary.md and plots are rewritten) and puts its
summary.md in the block, headings one level down, with two of its plots. tests/test_readme.py checks that the
README holds what --readme writes from the shipped runs, so a finding in a block is always the verdicts'.
"""

import re
from pathlib import Path

from bench import write_whole
from bench.machine import ROOT

BLOCK = re.compile(r"(<!-- results: (?P<folder>\S+) -->\n)(?P<body>.*?)(<!-- /results -->)", re.S)
PLOTS = [("tradeoff.png", "speed-up against memory"), ("time.png", "where a step's time goes")]


def folders(text):
    """The saved benches the README's blocks show, as written in their markers (relative to the repository)."""
    return [m.group("folder") for m in BLOCK.finditer(text)]


def block(folder, link):
    """The README's text for the saved bench in folder: its summary.md, headings one level down, then its plots,
    linked as link/NAME."""
    text = re.sub(r"^### ", "#### ", Path(folder, "summary.md").read_text(), flags=re.M)
    images = [f"![{what}]({link}/{name})" for name, what in PLOTS if Path(folder, name).exists()]
    return text + ("\n" + "\n".join(images) + "\n" if images else "")


def rewrite(resummarize, readme=ROOT / "README.md"):
    """Summarize every folder the README shows again (resummarize(folder)), then write its blocks; return the
    folders."""
    text = readme.read_text()
    shown = folders(text)
    for folder in shown:
        resummarize(ROOT / folder)
    text = BLOCK.sub(lambda m: m.group(1) + block(ROOT / m.group("folder"), m.group("folder")) + m.group(4), text)
    write_whole(readme, lambda tmp: Path(tmp).write_text(text))
    return shown
