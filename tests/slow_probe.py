"""Run a train script's main() with its batches slowed by a known delay, for the timing tests.

    python tests/slow_probe.py SCRIPT TRAIN_DELAY_S EVAL_DELAY_S [the script's flags]

Every training batch comes TRAIN_DELAY_S later than the loader gives it, every validation batch
EVAL_DELAY_S later: a wait the script cannot tell from a slow loader. Nothing in the script is
changed; loader.build_loaders is wrapped before main() imports it.
"""

import importlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import loader  # noqa: E402


class Slowed:
    def __init__(self, batches, delay):
        self.batches, self.delay, self.sampler = batches, delay, getattr(batches, "sampler", None)

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        for batch in self.batches:
            time.sleep(self.delay)
            yield batch


build_loaders = loader.build_loaders
script, train_delay, eval_delay = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])


def slowed(*args, **kwargs):
    train_loader, val_loader = build_loaders(*args, **kwargs)
    return Slowed(train_loader, train_delay), Slowed(val_loader, eval_delay)


loader.build_loaders = slowed
sys.argv = [script, *sys.argv[4:]]
importlib.import_module(Path(script).stem).main()
