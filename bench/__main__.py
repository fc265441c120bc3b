"""python -m bench (make bench): see bench/cli.py, or python -m bench --help.

The packages every run needs, and a torch the scripts were tested on, are checked first, so that
an environment of one's own (make bench PY=python3) that lacks one gets a line naming it rather
than a traceback.
Every error the bench finds in its input is a BenchError, printed here once, as one line.
"""

import importlib.metadata
import importlib.util
import sys

from bench import NEEDED, oldest_torch

missing = [package for module, package in NEEDED.items() if importlib.util.find_spec(module) is None]
if missing:
    print(
        f"bench: error: {sys.executable} lacks {', '.join(missing)}: pip install {' '.join(missing)}", file=sys.stderr
    )
    raise SystemExit(2)
torch_version = importlib.metadata.version("torch")  # without importing torch (seconds)
if tuple(int(part) for part in torch_version.split("+")[0].split(".")[:2]) < oldest_torch():
    oldest = ".".join(map(str, oldest_torch()))
    print(
        f"bench: error: torch {torch_version}: the scripts need torch {oldest} or newer (the oldest tested)",
        file=sys.stderr,
    )
    raise SystemExit(2)

if __name__ == "__main__":  # not when a process started by spawn imports this module again as __mp_main__
    from bench import BenchError
    from bench.cli import main

    try:
        main()
    except BenchError as e:
        print(f"bench: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
