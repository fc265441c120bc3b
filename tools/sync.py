"""python tools/sync.py: a fix to the base goes into every variant in the same commit; this applies one edit to a
base and all its copies.

The edit is a pair of files, the text as it is now (OLD) and as it should be (NEW). It is applied to every
script of the family (train.py and each train_*.py; with --loaders, loader.py and each loader_*.py) only if OLD
occurs exactly once in each: otherwise nothing is written and the scripts where it does not are named, so a
variant whose copy has drifted is found, not skipped. NEW is inserted as given: no line of it is marked, so a
shared fix stays a base line in every diff.

    python tools/sync.py OLD.txt NEW.txt             # train.py and every train_*.py
    python tools/sync.py --loaders OLD.txt NEW.txt   # loader.py, loader_dali.py and loader_nvjpeg.py
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the bench package, beside tools/
from bench import BenchError  # noqa: E402
from bench.observe.machine import ROOT  # noqa: E402
from bench.outputs.diffs import TECHNIQUES  # noqa: E402


def family(loaders=False, root=ROOT):
    """The base and its variants, as paths."""
    base = "loader.py" if loaders else "train.py"
    names = [base] + [script for b, script in TECHNIQUES.values() if b == base]
    return [root / name for name in names]


def apply(old, new, paths):
    """Replace old by new in every path, or in none: a BenchError names the files where old is not found once."""
    if not old:
        raise BenchError("the text to replace is empty")
    texts = {path: path.read_text() for path in paths}
    wrong = [f"{path.name} ({text.count(old)} times)" for path, text in texts.items() if text.count(old) != 1]
    if wrong:
        raise BenchError(f"the text to replace is not found exactly once in: {', '.join(wrong)}; nothing written")
    for path, text in texts.items():
        path.write_text(text.replace(old, new))
    return list(texts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="a file holding the text as it is in every script")
    parser.add_argument("new", help="a file holding its replacement")
    parser.add_argument("--loaders", action="store_true", help="loader.py and loader_dali.py, not the train scripts")
    args = parser.parse_args(argv)
    try:
        old, new = (open(name).read() for name in (args.old, args.new))
        changed = apply(old, new, family(args.loaders))
    except OSError as e:
        print(f"sync: error: {e.filename}: {e.strerror}", file=sys.stderr)
        raise SystemExit(2) from None
    except BenchError as e:
        print(f"sync: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    print(f"changed {len(changed)} scripts: {', '.join(path.name for path in changed)}")


if __name__ == "__main__":
    main()
