"""The record: runs.csv, one row per run, appended; read back, and upgraded from older versions.

Every column is a field of bench/schema.py. runs.csv is written a whole row at a time, under an
exclusive lock, in one write and flushed to disk: a bench killed at any moment leaves every
finished row readable, and two benches writing to the same folder do not interleave their rows.
A runs.csv written by an older version is upgraded in place (its columns renamed and completed),
its old form kept beside it as runs.csv.v<N>; one from a newer version is refused. The saved
baselines that a bench is compared with are bench/stages/records/baseline.py's.
"""

import csv
import io
import os
import shutil
import sys
from pathlib import Path

import pandas as pd

from bench import BenchError, schema, write_whole

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, rows are still written whole
    fcntl = None


RUN_COLUMNS = schema.RUN_COLUMNS


RUNS_NEEDED = ("bench_id", "run", "variant")  # a runs.csv without them is another file


TORN_SAID = set()  # the tables whose torn last row was said, in this process


def load_csv(path, needed=(), say_torn=True):
    """A CSV table the bench wrote, as a DataFrame. A torn last line (a bench killed while it appended a row) is
    left out, and said on stderr (say_torn: where the caller says it itself); any other damage is a BenchError
    naming the file and the line, and saying how many rows before it are whole and how to keep them: a file that is
    not text, is empty, is not a table, or lacks the columns needed."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BenchError(f"{path} is not a CSV table (it is not text): move it away") from None
    if not text.strip():
        raise BenchError(f"{path} is empty: move it away, or delete it")
    if not text.endswith("\n"):  # the last line was being written when the bench stopped: it never finished
        text = text[: text.rfind("\n") + 1]
        if say_torn and str(path) not in TORN_SAID:  # once a process: a bench reads its runs.csv more than once
            TORN_SAID.add(str(path))
            print(f"warning: {path}: its last row is left out: torn (a bench stopped while writing it)",
                  file=sys.stderr)  # fmt: skip
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
        for count, row in enumerate(reader):
            if len(row) != len(header):
                line = reader.line_num
                raise BenchError(
                    f"{path}: line {line} is damaged ({len(row)} fields where the header has {len(header)}); the"
                    f" {count} rows before it are whole: keep them with `head -n {line - 1} {path} > kept.csv` and"
                    f" put kept.csv in its place, or move the file away"
                )
    except csv.Error as e:
        raise BenchError(f"{path} is not a CSV table ({e}): move it away") from None
    frame = pd.read_csv(io.StringIO(text))
    try:  # a newer bench may have renamed the columns needed: say so rather than call the table foreign
        schema.check_version(frame)
    except schema.VersionError as e:
        raise BenchError(f"{path}: {e}") from None
    missing = [column for column in needed if column not in header]
    if missing:
        raise BenchError(f"{path} is not a table the bench wrote: it has no {', '.join(missing)} column: move it away")
    return frame


def read_runs(path, say_torn=True):
    """All rows of runs.csv as a DataFrame with this version's columns, those a file lacks empty (a torn last line
    is left out; other damage is a BenchError, see load_csv)."""
    try:
        runs = schema.upgrade(load_csv(path, needed=RUNS_NEEDED, say_torn=say_torn))
    except schema.VersionError as e:
        raise BenchError(f"{path}: {e}") from None
    wrong = schema.out_of_range(runs)  # a value its field's least (bench/schema.py) refuses: no summary of it
    if wrong:
        line, name, value, least = wrong
        raise BenchError(f"{path}, line {line}: {name} {value}: must be {least:g} or more (bench/schema.py)")
    return runs.reindex(columns=list(dict.fromkeys(RUN_COLUMNS + list(runs.columns))))


def prepare_runs_file(path):
    """Before the bench starts: make sure rows can be appended to path (a torn last row cut, damage refused); upgrade
    an older file first. Returns what it did, to print, or None."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    original = load_csv(path, needed=RUNS_NEEDED, say_torn=False)  # damage is one line, before any run
    runs = read_runs(path, say_torn=False)  # so is a newer schema
    notes = []
    with open(path, "rb+") as f:  # a row torn by a killed bench: cut, so that the next row starts on a line of its own
        content = f.read()
        if not content.endswith(b"\n"):
            f.truncate(content.rfind(b"\n") + 1)
            notes.append(f"{path}: left out its last row, torn when a bench stopped while writing it")
    if list(original.columns) == RUN_COLUMNS:
        return "\n".join(notes) or None
    version = schema.version_of(original)
    unknown = sorted(set(runs.columns) - set(RUN_COLUMNS))
    if unknown:
        raise BenchError(f"{path} has columns this version does not know ({', '.join(unknown[:5])}): move it away")
    kept = f"{path}.v{version}"
    write_whole(kept, lambda tmp: shutil.copy2(path, tmp))
    write_whole(path, lambda tmp: runs.reindex(columns=RUN_COLUMNS).to_csv(tmp, index=False))
    notes.append(f"upgraded {path} to schema version {schema.VERSION} (the file as it was: {kept})")
    return "\n".join(notes)


def append_row(path, row):
    """Append one row to the CSV at path, with the header first if the file is new. A write that fails (a
    full disk) is cut back to the rows before it and is a BenchError: they stay readable."""
    buffer = io.StringIO()
    csv.writer(buffer).writerow(["" if row.get(c) is None else row.get(c) for c in RUN_COLUMNS])
    try:
        with open(path, "ab", buffering=0) as f:  # unbuffered: what failed to be written can be cut off
            if fcntl:
                fcntl.flock(f, fcntl.LOCK_EX)
            size, data = f.seek(0, os.SEEK_END), buffer.getvalue().encode()
            if size == 0:
                header = io.StringIO()
                csv.writer(header).writerow(RUN_COLUMNS)
                data = header.getvalue().encode() + data
            try:
                written = 0
                while written < len(data):
                    written += f.write(data[written:])
                os.fsync(f.fileno())
            except OSError:
                f.truncate(size)
                raise
    except OSError as e:
        raise BenchError(f"cannot add a row to {path}: {e.strerror or e} (the rows before it are kept)") from None
