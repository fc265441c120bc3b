"""bench/outputs/diffs.py: every variant differs from its base only by lines marked `# new #`, the checker of that rule,
the diffs a report shows."""

import difflib
import subprocess

import pytest

from bench.outputs import diffs
from helpers import ROOT

VARIANTS = [(script, base) for base, script in diffs.TECHNIQUES.values()]  # each technique's, from the catalogue


MARK = diffs.MARK


# the rule itself, in one place: bench/outputs/diffs.py (the report's diffs and line counts)
marked_lines = diffs.marked


def split_docstring(text):
    """(docstring lines, the lines after it) of a module's source."""
    lines = text.splitlines()
    start = diffs.body_start(lines)
    return lines[:start], lines[start:]


def unmarked(line):
    return line.rstrip().removesuffix(MARK).rstrip()


def violations(base_text, variant_text):
    """Every breach of the rule, as 'line N: problem: text' (N counted in the variant file)."""
    base_doc, base = split_docstring(base_text)
    variant_doc, variant = split_docstring(variant_text)
    offset = len(variant_doc)
    problems = []
    if MARK in base_text:
        problems.append(f"the base itself contains {MARK!r}")
    if base_doc and base_doc == variant_doc:
        problems.append("line 1: the docstring must say what the variant adds, but it is the base's")
    marked = marked_lines(variant)
    matcher = difflib.SequenceMatcher(None, base, variant, autojunk=False)
    for tag, b0, b1, v0, v1 in matcher.get_opcodes():
        if tag == "equal":
            continue
        added = range(v0, v1)
        if tag == "delete":
            for i in range(b0, b1):
                problems.append(f"line {offset + v0 + 1}: base line removed with no marked replacement: {base[i]!r}")
            continue
        if not any(variant[i].strip() and i in marked for i in added):
            for i in added:
                problems.append(f"line {offset + i + 1}: added or changed without {MARK!r}: {variant[i]!r}")
            continue
        removed = {"".join(base[i].split()) for i in range(b0, b1)}
        for i in added:
            line = variant[i]
            if line.strip() and i not in marked:
                problems.append(f"line {offset + i + 1}: added or changed without {MARK!r}: {line!r}")
            elif line.strip() and "".join(unmarked(line).split()) in removed:
                problems.append(f"line {offset + i + 1}: only reformats a base line: {line!r}")
    return problems


# the checker itself, on small made-up files: it must catch each kind of breach
BASE = '''"""Base."""

import os


def main():
    x = 1
    y = compute(x, 2)
    print(y)
'''


def variant_of(body):
    return '"""Variant: adds a thing."""\n' + body


@pytest.mark.parametrize("variant,base", VARIANTS, ids=[v for v, _ in VARIANTS])
def test_variant_differs_only_by_marked_lines(variant, base):
    base_text, variant_text = (ROOT / base).read_text(), (ROOT / variant).read_text()
    problems = violations(base_text, variant_text)
    assert not problems, f"{variant} against {base}:\n" + "\n".join(problems)
    assert marked_lines(split_docstring(variant_text)[1]), f"{variant} adds nothing marked: where is its technique?"


def test_variant_list_is_complete():
    """Every variant on disk is checked; the list cannot silently shrink to nothing."""
    assert VARIANTS
    on_disk = {p.name for p in ROOT.glob("train_*.py")} | {p.name for p in ROOT.glob("loader_*.py")}
    assert on_disk == {v for v, _ in VARIANTS}


@pytest.mark.parametrize(
    "body",
    [
        # a marked line, and a marked block ended by a blank line
        "\nimport os\n\n\ndef main():\n    x = 1\n    x = x + 1  # new #\n    y = compute(x, 2)\n    print(y)\n",
        "\nimport os\n# new # extra\nimport sys\n\n\ndef main():\n    x = 1\n    y = compute(x, 2)\n    print(y)\n",
        # a base line replaced by a marked block at the same place
        "\nimport os\n\n\ndef main():\n    x = 1\n    # new # different\n    y = other(x)\n    print(y)\n",
    ],
)
def test_checker_accepts_marked_changes(body):
    assert violations(BASE, variant_of(body)) == []


@pytest.mark.parametrize(
    "body,problem",
    [
        (
            "\nimport os\n\n\ndef main():\n    x = 1\n    x = x + 1\n    y = compute(x, 2)\n    print(y)\n",
            "'    x = x + 1'",
        ),
        ("\nimport os\n\n\ndef main():\n    x = 1\n    print(y)\n", "removed with no marked replacement"),
        ("\nimport os\n\n\ndef main():\n    x = 1\n    y = compute(x,2)  # new #\n    print(y)\n", "only reformats"),
        ("\nimport os\n\n\ndef main():\n    x = 1\n    y = compute(x, 2)\n    print(y)  # show\n", "# show'"),
        # a block ends at the blank line: the line after it is not covered
        ("\nimport os\n# new # extra\nimport sys\n\nimport re\n\n\ndef main():\n    x = 1\n", "'import re'"),
    ],
)
def test_checker_catches_breaches(body, problem):
    problems = violations(BASE, variant_of(body))
    assert any(problem in p for p in problems), problems


def test_checker_wants_a_new_docstring():
    assert any("docstring" in p for p in violations(BASE, BASE))


def test_the_dali_diff_is_the_pipeline():
    """Plumbing (finding a bad file, DALI's versions) lives in checks.py: the diff a reader reads stays short."""
    _, lines = split_docstring((ROOT / "loader_dali.py").read_text())
    assert 40 <= len(marked_lines(lines)) <= 90, len(marked_lines(lines))


def test_the_ddp_diff_shows_its_sampler_and_its_share_of_the_batch():
    """make diff V=ddp shows the whole technique: the DistributedSampler that fills the base's empty sampler, its
    set_epoch, and each process's share of the batch, each line marked."""
    result = subprocess.run(["make", "-s", "diff", "V=ddp"], cwd=ROOT, capture_output=True, text=True)
    added = [line[1:].strip() for line in result.stdout.splitlines() if line.startswith("+")]
    assert "sampler = DistributedSampler(train_set, world_size, rank, seed=args.seed, drop_last=True)" in added
    assert (
        "sampler.set_epoch(epoch)  # new #" in added and "batch_size = args.batch_size // world_size  # new #" in added
    )
    base = (ROOT / "train.py").read_text()
    assert "    sampler = None  # " in base and "sampler, rank, world_size" in base  # the seam it fills
