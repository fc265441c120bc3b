"""The bench runner: plan the runs, launch each script, sample memory and machine load, write tables and plots.

Run it as `python -m bench` (or `make bench`); `python -m bench.data DIR` writes the generated data.
"""


class BenchError(Exception):
    """Bad input, or a state the bench cannot go on from: `python -m bench` prints it once, as one line."""
