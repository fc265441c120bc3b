"""bench/outputs/headline.py: the answer first, from made-up runs with known verdicts through the same summarize() the
bench uses."""

import pandas as pd
import pytest

from bench import modes
from bench.modes import speed
from bench.observe import machine
from bench.outputs import diffs, headline, markdown, verdicts
from bench.stages.statistics import rules
from helpers import STEADY, runs_of, scaled, told


def test_each_settled_answer_lands_in_its_group_with_speed_memory_and_lines():
    said, summary = told(
        {
            "baseline": STEADY,
            "channels_last": scaled(1.5, memory=1100),  # faster: pays, whatever the memory
            "checkpoint": scaled(0.7, memory=600),  # slower for less memory: a trade
            "compile": scaled(0.5),  # slower: costs
            "dali": [(100.0, {"loader": "dali"}), (60.0, {"loader": "dali"}), (150.0, {"loader": "dali"})],
        }
    )
    assert said["Pays"] == f"channels_last 1.50x, 1.10x the memory (more), {diffs.cost('channels_last')} lines"
    assert said["Trades speed for memory"].startswith("checkpoint 0.70x, 0.60x the memory (less)")
    assert "worth it only where memory, not speed, is the limit" in said["Trades speed for memory"]
    assert said["Costs"].startswith("compile 0.50x, 1.00x the memory (")
    assert said["Open"].startswith(f"dali {summary.loc['dali', 'speedup']:.2f}x +-")
    assert said["Best measured"].startswith("channels_last, 1.50x (")
    assert "Flag" not in said and not any(label.startswith("Within the margin") for label in said)


def test_emulated_bf16_is_a_cost_not_a_trade_and_says_why():
    emulated = dict(amp_dtype="bf16", bf16_native=False)
    said, _ = told({"baseline": STEADY, "amp": scaled(0.2, memory=900, **emulated)})
    assert said["Costs"].endswith(": bf16 is emulated on this device") and "Trades speed for memory" not in said
    assert said["Pays"] == "nothing measured pays here" and "Best measured" not in said


def test_a_row_not_settled_is_told_how_many_rounds_would_settle_it():
    wobbly = [(110.0, {}), (96.0, {}), (104.0, {})]  # about 1.03x, +-7%
    said, summary = told({"baseline": STEADY, "compile": wobbly})
    rounds = rules.rounds_to_settle(summary.loc["compile"].rename("compile").to_frame().T.iloc[0])
    assert (
        summary.loc["compile", "speed_answer"] == "unsettled" and summary.loc["compile", "rounds_to_settle"] == rounds
    )
    if rounds <= headline.ROUNDS_AT_MOST:
        assert f"about {rounds} rounds at this noise would decide it (--repeats {rounds})" in said["Open"]
    else:
        assert "below this machine's noise" in said["Open"]


def test_a_compiled_row_that_ran_eager_code_gets_no_answer_on_compiling():
    """The meter counts the timed steps that ran compiled code: a compile row with none is named so by its verdict
    and the answer, never put in pays or costs, whatever its speed; graph breaks are said where there are some."""
    compiled = dict(compile_mode="default", compile_s=10.0, compile_graphs=1, compile_graph_breaks=0)
    eager = [(rate * 1.3, dict(compiled, compiled_steps_timed=0)) for rate, _ in STEADY]
    broken = [(rate * 1.5, dict(compiled, compiled_steps_timed=25, compile_graphs=3, compile_graph_breaks=2))
              for rate, _ in STEADY]  # fmt: skip
    said, summary = told({"baseline": STEADY, "compile": eager, "all": broken})
    assert said["Not compiled"] == (
        "compile: compiled code did not run in its timed window (torch.compile fell back to eager code), so its 1.30x"
        " is eager code's"
    )
    assert "compile" not in said["Pays"] and said["Pays"].startswith("all 1.50x")
    verdict = summary.loc["compile", "verdict"]
    assert verdict.startswith("compile: no verdict on compiling: compiled code did not run in its timed window")
    assert "torch.compile made 3 graphs with 2 graph breaks" in summary.loc["all", "verdict"]


def test_a_row_of_one_round_states_no_spread():
    """One round has no interval: its item says so and states no spread (it once read '1.20x +-nan%')."""
    said, _ = told({"baseline": STEADY[:1], "amp": [(STEADY[0][0] * 1.2, {})], "compile": [(STEADY[0][0] * 0.9, {})]})
    assert said["Open"] == "amp 1.20x, compile 0.90x: one paired round, no interval yet; run more rounds (--repeats)"


def test_a_combination_slower_than_its_part_is_flagged_with_the_part_that_costs():
    emulated = dict(amp_dtype="bf16", bf16_native=False)
    said, _ = told(
        {
            "baseline": STEADY,
            "amp": scaled(0.2, **emulated),
            "ddp": scaled(1.3, world_size=2),
            "all": scaled(0.25, world_size=2, **emulated),
        }
    )
    assert said["Flag"] == (
        "all (0.25x) is slower than its part ddp (1.30x): it holds amp (0.20x on its own: bf16 is emulated on this"
        " device)"
    )
    quiet, _ = told({"baseline": STEADY, "ddp": scaled(1.3, world_size=2), "all:no-amp": scaled(0.9, world_size=2)})
    assert "none of its parts is slower on its own" in quiet["Flag"]


def test_a_row_above_its_ceiling_is_flagged_by_its_interval_not_by_its_point():
    """Point ratios above 100% within the noise say 'at it'; an interval wholly above 100% is flagged."""
    ceiling = [(r, {"dataset": "synthetic", "cpu_model_cores": 1.9, "cpu_loader_cores": 0.0}) for r in (120, 80, 125)]
    near = [(r, {"loader": "dali"}) for r in (100.0, 102.0, 98.0)]  # 125/83/78%: the interval holds 100%
    said, summary = told({"baseline": STEADY, "synthetic": ceiling, "dali": near})
    assert "Flag" not in said and markdown.ceiling_cell(summary.loc["dali"]).startswith("at it (")
    fields = dict(loader="dali", cpu_model_cores=1.99, cpu_loader_cores=0.05)
    above = [(r * 1.3, fields) for r in (120, 80, 125)]  # 130% in every round
    said, summary = told({"baseline": STEADY, "synthetic": ceiling, "dali": above})
    assert markdown.ceiling_cell(summary.loc["dali"]) == "ABOVE it (130-130%)"
    assert said["Flag"].startswith("dali runs above its ceiling (130% to 130% of synthetic, by the paired rounds)")
    assert "the model's process used 1.99 cores against the ceiling's 1.90 (its loader: 0.05)" in said["Flag"]


def test_the_ceilings_are_limits_never_options():
    ceiling = [(r * 1.4, {"dataset": "synthetic"}) for r, _ in STEADY]
    said, summary = told({"baseline": STEADY, "synthetic": ceiling, "amp": scaled(1.2)})
    assert markdown.answer_cell(summary.loc["synthetic"].rename("synthetic")) == "limit (no loading)"
    assert "synthetic" not in said["Pays"] and said["Limit"].startswith("synthetic: 140.0 samples/s in full precision")
    assert "the baseline reaches 71% of the ceiling" in said["Limit"]
    assert verdicts.settled_note(summary.reset_index()).startswith("Decided: 1 of 1 row ")  # amp; not the ceiling


def test_one_memory_ratio_in_the_table_the_verdict_and_the_plot():
    """Medians of 1000/1000/1000 against 1100/900/1300 differ from the paired geometric mean: the table shows the
    paired one, which the verdict says and the trade-off plot draws (memory_vs_baseline)."""
    memory = [(r, dict(peak_host_mem_mib=m)) for (r, _), m in zip(STEADY, (1500, 900, 1100))]
    summary = speed.summary_of(runs_of({"baseline": STEADY, "compile": memory}))
    row = summary.set_index("variant").loc["compile"]
    paired = row["memory_vs_baseline"]
    assert round(paired, 2) != round(row["peak_host_mem_vs_baseline"], 2)  # two definitions would disagree here
    headers, rows = markdown.cells(summary, markdown.train_columns(summary))
    cell = dict(zip(headers, rows[list(summary["variant"]).index("compile")]))["memory vs baseline"]
    assert cell == f"{paired:.2f}x" and f"{paired:.2f}x the host memory" in row["verdict"]


def test_a_title_names_the_cpu_class_and_bf16_so_two_classes_never_share_one():
    avx2 = dict(gpu_count=0, cpu_model="AMD EPYC", cpu_cores=2, cpu_isa="avx2")
    bf16 = dict(avx2, cpu_isa="avx2 avx512 avx512_bf16")
    assert machine.where(avx2) == "CPU only: AMD EPYC, 2 cores, AVX2 only, bf16 emulated"
    assert machine.where(bf16) == "CPU only: AMD EPYC, 2 cores, AVX-512-BF16, bf16 native"
    gpu = dict(gpu_count=1, gpu_name="NVIDIA H100", gpu_capability="9.0", gpu_bf16_native=True)
    assert machine.where(gpu) == "1x NVIDIA H100 (compute capability 9.0, bf16 native)"
    assert machine.where(dict(avx2, cpu_isa=None)).endswith("CPU features unknown")


def test_the_bench_answer_names_a_data_bound_row_and_points_to_the_sweep():
    from helpers import STEADY, runs_of

    bound = [(rate, {"data_wait_frac": 0.35}) for rate, _ in STEADY]
    summary = speed.summary_of(runs_of({"baseline": bound, "amp": [(r * 1.5, {"data_wait_frac": 0.02}) for r, _ in
                                                               STEADY]}))  # fmt: skip
    said = dict(headline.items(summary, modes.joined()))  # the mode that points to the loader's settings: named
    assert said["Data-bound"].startswith("baseline waits for data 35% of its window: the loader, not the technique,")
    assert "python -m bench --tune-loader finds the loader's settings for this machine" in said["Data-bound"]
    assert dict(headline.items(summary))["Data-bound"].endswith("sets the pace")  # no mode points there: no pointer
    calm = speed.summary_of(runs_of({"baseline": STEADY, "amp": [(r * 1.5, {}) for r, _ in STEADY]}))
    assert "Data-bound" not in dict(headline.items(calm))


@pytest.mark.parametrize("wait, bound", [(0.2, True), (0.2 - 1e-4, False)])
def test_a_row_is_data_bound_from_a_fifth_of_its_window_waiting(wait, bound):
    """WAIT_BOUND (0.2): a real row waiting for its data that share of its window or more is data-bound in the answer;
    a ceiling (synthetic data) or a failed row never is."""
    train = pd.DataFrame(
        dict(variant=["baseline", "amp", "amp-synthetic"], dataset=["small", "small", "synthetic"], runs_ok=[3, 0, 3],
             wait_share=[wait, 0.9, 0.9], ceiling_pct=[50.0, None, None])
    )  # fmt: skip
    found = dict(headline.data_bound_items(train))
    assert ("Data-bound" in found) == bound and rules.WAIT_BOUND == 0.2
    if bound:
        assert found["Data-bound"].startswith(
            f"baseline waits for data {wait:.0%} of its window, at 50% of its ceiling"
        )
