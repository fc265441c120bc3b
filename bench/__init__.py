"""The bench runner: plan the runs, launch each script, sample memory, write tables and plots.

Run it as `python -m bench` (or `make bench`); `python -m bench.data DIR` writes the default data.
"""
