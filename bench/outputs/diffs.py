"""Each technique's tutorial: its script against its base, as `make diff V=...` shows it, every line it adds marked
`# new #` (at the line's end, or by a full-line `# new # ...` comment opening a block that runs to the next blank
line; tests/bench/outputs/test_diffs.py enforces the rule). The report shows these diffs beside the numbers, and a
technique's cost in code is the count of its marked lines: what someone copies into their own script.

    python -m bench.outputs.diffs        # the marked lines of each technique; each script's lines, main() and loop
"""

import ast
import difflib
import re

from bench import catalogue
from bench.observe.machine import ROOT

MARK = "# new #"
TECHNIQUES = catalogue.tutorials()  # a technique: (its base, its script), in reading order
ROWS = {r.name: r.measures for r in catalogue.ROWS if r.measures}  # bench rows that measure one under another name


def technique(variant):
    """The technique a bench row measures, or None (the baseline, the synthetic ceiling, loader.py alone)."""
    variant = variant.partition("+")[0]  # a row over another loader (all:no-ddp+nvjpeg): the row's technique
    if variant.startswith("all:"):  # a combination: train_all.py with blocks switched off
        return "all"
    return variant if variant in TECHNIQUES else ROWS.get(variant)


def marked(lines):
    """Indices of the marked lines: ending with the mark, or inside a `# new #` block."""
    found, in_block = set(), False
    for i, line in enumerate(lines):
        if not line.strip():
            in_block = False
        elif line.lstrip().startswith(MARK):
            in_block = True
        if in_block or line.rstrip().endswith(MARK):
            found.add(i)
    return found


def body_start(lines):
    """The index of the first line after the module docstring (0 if there is none)."""
    tree = ast.parse("\n".join(lines))
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.end_lineno
    return 0


def read(name, root=ROOT):
    return (root / name).read_text().splitlines()


def diff(name, context=3, root=ROOT, numbered=False):
    """The unified diff of a technique's script against its base, as (kind, line, marked) triples; kind is one of
    'hunk' (an @@ header), 'same', 'removed', 'added'. numbered: each triple also holds the line's index in the base
    and in the script (None where it has none)."""
    base_name, script_name = TECHNIQUES[name]
    base, script = read(base_name, root), read(script_name, root)
    marks = marked(script)
    out = []
    matcher = difflib.SequenceMatcher(None, base, script, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        (_, b0, _, v0, _), (_, _, b1, _, v1) = group[0], group[-1]
        out.append(("hunk", f"@@ -{b0 + 1},{b1 - b0} +{v0 + 1},{v1 - v0} @@", False, None, None))
        for tag, i0, i1, j0, j1 in group:
            if tag == "equal":
                out += [("same", base[i], False, i, j0 + i - i0) for i in range(i0, i1)]
                continue
            out += [("removed", base[i], False, i, None) for i in range(i0, i1)]
            out += [("added", script[j], j in marks, None, j) for j in range(j0, j1)]
    return out if numbered else [line[:3] for line in out]


def cost(name, root=ROOT):
    """The technique's lines: those its script adds or changes against the base, not blank, after the docstring
    (which only names what the script adds); comments count, as they are part of what one copies."""
    base_name, script_name = TECHNIQUES[name]
    base, script = read(base_name, root), read(script_name, root)
    base, script = base[body_start(base) :], script[body_start(script) :]
    matcher = difflib.SequenceMatcher(None, base, script, autojunk=False)
    changed = (script[j] for tag, _, _, j0, j1 in matcher.get_opcodes() if tag != "equal" for j in range(j0, j1))
    return sum(1 for line in changed if line.strip())


def shape(name, root=ROOT):
    """(lines, lines of main(), lines of the training loop (`for epoch` to its end), lines of that loop naming the
    meter) of a script; the last three None where it has no main() (the loop: no `for epoch`)."""
    text = (root / name).read_text()
    lines = text.splitlines()
    main = next((n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == "main"), None)
    if main is None:
        return len(lines), None, None, None
    loops = [n for n in ast.walk(main) if isinstance(n, ast.For) and getattr(n.target, "id", None) == "epoch"]
    if not loops:
        return len(lines), main.end_lineno - main.lineno + 1, None, None
    loop = lines[loops[0].lineno - 1 : loops[0].end_lineno]
    metered = sum(1 for line in loop if re.search(r"\bmeter\b", line))
    return len(lines), main.end_lineno - main.lineno + 1, len(loop), metered


def main():
    for name, (base, script) in TECHNIQUES.items():
        print(f"{name:14} {cost(name):4d} lines  (make diff V={name}: {script} against {base})")
    print(f"\n{'script':24} {'lines':>5} {'main()':>6} {'loop':>5} {'meter in loop':>13}")
    for script in ["train.py", *(s for b, s in TECHNIQUES.values() if b == "train.py"), *catalogue.LOADERS.values()]:
        cells = ["-" if n is None else str(n) for n in shape(script)]
        print(f"{script:24} {cells[0]:>5} {cells[1]:>6} {cells[2]:>5} {cells[3]:>13}")


if __name__ == "__main__":
    main()
