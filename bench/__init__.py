"""The bench runner: plan the runs, launch each script, sample memory and machine load, write tables and plots.

Run it as `python -m bench` (or `make bench`); `python -m bench.data DIR` writes the generated data.
"""

import contextlib
import os

# module -> package: what every run needs (`python -m bench` names the missing ones before anything else)
NEEDED = dict(torch="torch", torchvision="torchvision", numpy="numpy", PIL="pillow", tqdm="tqdm")
NEEDED.update(pandas="pandas", matplotlib="matplotlib", psutil="psutil", scipy="scipy")
NEEDED.update(jinja2="jinja2", pygments="pygments", filelock="filelock")  # report.html, the results lock


class BenchError(Exception):
    """Bad input, or a state the bench cannot go on from: `python -m bench` prints it once, as one line."""


def write_whole(path, write):
    """Write the file at path whole or not at all: write(temporary path), then a rename. A write that fails
    (a full disk, say) removes the temporary file and is a BenchError naming path."""
    tmp = f"{path}.tmp"
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise BenchError(f"cannot write {path}: {e.strerror or e}") from None


def check_folder(path, flag):
    """Make the folder at path if missing and check that files can be written in it, before any work."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise BenchError(f"{flag} {path} is a file, not a folder")
    probe = os.path.join(path, f".write-test-{os.getpid()}")
    try:
        os.makedirs(path, exist_ok=True)
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as e:
        raise BenchError(f"{flag} {path} cannot be written: {e.strerror or e}") from None
