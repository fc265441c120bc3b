"""bench/schema.py: the fields the scripts write are the schema's, the documented table is the schema, older and newer
files."""

import dataclasses
import json
import re

import pandas as pd
import pytest

from bench import BenchError, schema
from bench.outputs import diffs
from bench.stages.records import baseline, record
from helpers import ROOT, TINY_MODEL, run, train

SCRIPTS = ["train.py", *(script for base, script in diffs.TECHNIQUES.values() if base == "train.py")]


UNITS = {
    "MiB": "_mib",
    "s": "_s",
    "ms": "_ms",
    "1/s": "_per_s",
    "%": "_pct",
    "MHz": "_mhz",
    "GB": "_gb",
    "J": "_j",
    "W": "_w",
}


V1_COLUMNS = """bench_id time_utc run variant kind repeat status returncode error wall_s runner_cpu_s
script world_size device device_name model dataset image_size batch_size global_batch_size steps_timed
samples_per_s compute_samples_per_s step_time_ms_median step_time_ms_p90 data_wait_frac epoch_time_s
train_loss_final val_acc val_samples images_per_s
peak_mem_allocated_mb peak_mem_reserved_mb peak_mem_allocated_mb_sum nvml_peak_mb nvml_method peak_host_mem_mb
memory_samples sampler_cpu_s amp_dtype loader workers seed dp_devices sync_bn tf32_matmul tf32_cudnn
torch_version torchvision_version cuda_version cudnn_version dali_version
machine_class cpu_model cpu_cores ram_gb gpu_count gpu_name driver_version python_version platform
git_commit git_dirty command""".split()


def v1_runs(path):
    rows = [
        dict(bench_id="b1", run="baseline-1", variant="baseline", kind="train", status="ok", samples_per_s=300.0,
             step_time_ms_median=200.0, peak_host_mem_mb=1200.0),
        dict(bench_id="b1", run="loader-1", variant="loader", kind="loader", status="ok", images_per_s=1600.0,
             peak_host_mem_mb=800.0),
    ]  # fmt: skip
    pd.DataFrame(rows).reindex(columns=V1_COLUMNS).to_csv(path, index=False)


@pytest.mark.parametrize("script", [s if s == "train.py" else pytest.param(s, marks=pytest.mark.slow) for s in SCRIPTS])
def test_a_train_script_writes_exactly_the_schema_fields(tiny_data, tmp_path, script):
    small = ("--model", TINY_MODEL)  # the fields are the model's alike; a tiny graph compiles fast
    result, m = train(script, tiny_data, tmp_path / "m.json", "--steps", 3, "--warmup-steps", 1, *small)
    assert result.returncode == 0, result.stderr
    assert set(m) == schema.written_by(script), set(m) ^ schema.written_by(script)


@pytest.mark.parametrize("script", ["loader.py", "loader_dali.py"])
def test_a_loader_bench_writes_exactly_the_schema_fields(tiny_data, tmp_path, script):
    out = tmp_path / "m.json"
    result = run(script, "--data", tiny_data, "--bench", "--batch-size", 16, "--steps", 3, "--metrics-out", out)
    assert result.returncode == 0, result.stderr
    assert set(json.loads(out.read_text())) == schema.written_by(script)


def test_the_variants_list_is_every_train_script():
    assert SCRIPTS and set(SCRIPTS) == {p.name for p in ROOT.glob("train*.py")}


def test_every_unit_is_in_the_name():
    for f in schema.FIELDS:
        if f.source == "summary":
            continue
        if f.unit in UNITS:
            assert f.name.endswith(UNITS[f.unit]), f
        elif f.unit == "share":
            assert f.name.endswith(("_frac", "_acc")), f
        assert not re.search(r"_mb\b|_mb_", f.name), f"{f.name}: MiB are _mib"
    assert len({f.name for f in schema.FIELDS}) == len(schema.FIELDS), "a field defined twice"


def test_the_documented_field_table_is_the_schema():
    readme = (ROOT / "docs" / "runs.md").read_text()
    begin, end = "<!-- fields: python -m bench.schema -->\n", "<!-- end of fields -->"
    assert begin in readme and end in readme
    assert readme.split(begin)[1].split(end)[0] == schema.markdown(), "run python -m bench.schema into docs/runs.md"


def test_an_older_runs_csv_is_upgraded_in_place(tmp_path):
    path = tmp_path / "runs.csv"
    v1_runs(path)
    before = path.read_bytes()
    message = record.prepare_runs_file(path)
    assert "schema version 3" in message and (tmp_path / "runs.csv.v1").read_bytes() == before
    runs = record.read_runs(path)
    assert list(pd.read_csv(path).columns) == record.RUN_COLUMNS
    assert list(runs["samples_per_s"]) == [300.0, 1600.0]  # the loaders' images_per_s, under training's name
    assert list(runs["peak_host_mem_mib"]) == [1200.0, 800.0] and runs.loc[0, "step_time_median_ms"] == 200.0
    record.append_row(path, dict(bench_id="b2", run="amp-1", variant="amp", kind="train", samples_per_s=250.0))
    assert list(record.read_runs(path)["samples_per_s"]) == [300.0, 1600.0, 250.0]
    assert record.prepare_runs_file(path) is None  # already this version


def test_an_older_baseline_is_compared_with_renamed_columns(tmp_path):
    work = dict(kind="train", device="cpu", model="m", dataset="generated", image_size=32, global_batch_size=64,
                steps_timed=20)  # fmt: skip
    folder = tmp_path / "old"
    folder.mkdir()
    pd.DataFrame([dict(variant="baseline", rate_median=100.0, peak_host_mem_mb=1000.0, **work)]).to_csv(
        folder / "summary.csv", index=False
    )
    saved = baseline.load("old", baseline_dir=tmp_path)
    now = pd.DataFrame([dict(variant="baseline", rate_median=110.0, peak_host_mem_mib=500.0, **work)])
    assert baseline.compare(now, saved) == ["baseline: 110.0 samples/s, +10.0% against 100.0, host memory 0.50x"]


def test_a_file_from_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "runs.csv"
    pd.DataFrame([dict(schema_version=99, run="x")]).to_csv(path, index=False)
    with pytest.raises(BenchError, match="schema version 99, newer"):
        record.read_runs(path)


def test_a_summary_rows_answers_are_fields_named_once_in_the_schema():
    """The fields the rules and the causes add to every row (bench/stages/statistics/rules.py DERIVED, causes.py's
    causes_found and causes_unshown) are the schema's `derived` fields, no more and no fewer, and no column of
    summary.csv nor of runs.csv."""
    from bench.stages.statistics import causes, rules

    derived = {f.name for f in schema.FIELDS if f.source == "derived"}
    assert derived == {field.column for field in rules.DERIVED} | set(causes.COLUMNS)
    assert not derived & set(schema.SUMMARY_COLUMNS) and not derived & set(schema.RUN_COLUMNS)


def test_a_summary_row_is_read_by_attribute_and_a_misspelt_field_fails_where_it_is_read():
    """schema.SummaryRow: a field the row does not hold reads None, a column a mode's Joins added reads alike, and a
    name that is neither fails (AttributeError), where a pandas row's get() gave None: a rule that never fired."""
    row = schema.SummaryRow.of(pd.Series(dict(variant="amp", speedup=1.2, images_counted=3)))
    assert (row.variant, row.speedup, row.speed_answer, row.images_counted) == ("amp", 1.2, None, 3)
    assert schema.SummaryRow.of(row) is row and schema.SummaryRow.of(dict(variant="amp")).variant == "amp"
    with pytest.raises(AttributeError, match="'speed_answr' is no field"):
        print(row.speed_answr)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.speedup = 2.0
    assert [r.variant for r in schema.rows_of(pd.DataFrame(dict(variant=["a", "b"])))] == ["a", "b"]
