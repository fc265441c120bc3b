"""bench/stages/epochs.py: a timed window holds epoch starts no more often than training on the real data set its
workload stands for would; the planner keeps it inside an epoch where it may, and says where it cannot (made-up
costs: no run, no data folder)."""

import math

import pytest

from bench import cli
from bench import data as bench_data
from bench.stages import cost, epochs
from bench.stages.planning import build, plan, prepare

IMAGENET = epochs.Real("ImageNet-1k", 1_281_167)


@pytest.mark.parametrize(
    "warmup,steps,epoch,expected",
    [(20, 144, 78, 1), (20, 144, 156, 0), (0, 10, 5, 2), (5, 30, 781, 0), (78, 79, 78, 1), (79, 156, 78, 0),
     (5, 30, 1, 25), (3, 3, 2, 0)],
)  # fmt: skip
def test_the_starts_in_a_window_are_the_epoch_boundaries_inside_it(warmup, steps, epoch, expected):
    """Steps warmup .. steps - 1 (from 0): an epoch starts at every multiple of its length, step 0 the first."""
    assert epochs.starts(warmup, steps, epoch) == expected
    assert expected == sum(1 for step in range(warmup, steps) if step % epoch == 0)


def test_a_window_shorter_than_the_real_sets_epoch_may_hold_no_start():
    assert epochs.epoch_steps(1_281_167, 256) == 5004 and epochs.epoch_steps(50_000, 256) == 195
    assert epochs.allowed(124, 5004) == 0 and epochs.allowed(400, 195) == 2 and epochs.allowed(5, None) == math.inf


def test_each_generated_workload_stands_for_a_real_set_and_a_folder_of_ones_own_for_itself():
    assert set(bench_data.STANDS_FOR) == set(bench_data.WORKLOADS)
    assert epochs.real_set("imagenet", True) == IMAGENET
    assert epochs.real_set("vit", True) == IMAGENET and epochs.real_set("vit", False).name == "CIFAR-10"
    assert epochs.real_set("custom", False, 300) == epochs.Real("its own data", 300)
    assert epochs.real_set("custom", False) is None


def test_the_fourth_gpu_runs_window_is_cut_to_end_inside_the_first_epoch():
    """20,000 photos at batch 256: 78 steps an epoch, and the windows of steps 21-144 held one start each (41x
    ImageNet's rate): the planner cuts them to end at step 78, where the epoch holds warm-up and MIN_TIMED steps."""
    window = epochs.fit(20, 144, 20_000, 256, IMAGENET)
    assert (window.warmup, window.steps, window.cut_from, window.starts, window.over) == (20, 78, 144, 0, False)
    assert "cut from 144" in window.words() and "no epoch start" in window.words()
    asked = epochs.window(20, 144, 20_000, 256, IMAGENET)
    assert asked.starts == 1 and asked.allowed == 0 and asked.over


def test_steps_the_user_gave_are_kept_and_said_to_hold_too_many_starts():
    window = epochs.fit(20, 300, 40_000, 256, IMAGENET, given=True)
    assert window.steps == 300 and window.starts == 1 and window.over
    assert "18 times as often" in window.words() and "(--steps)" in window.words()


def test_an_epoch_too_short_for_a_window_keeps_the_steps_and_says_so():
    """A generated set 30 steps an epoch cannot hold warm-up 20 and MIN_TIMED timed steps: kept, and said."""
    window = epochs.fit(20, 144, 30 * 256, 256, IMAGENET)
    assert window.steps == 144 and window.over and f"fewer than {epochs.MIN_TIMED}" in window.words()


@pytest.fixture
def photos(monkeypatch):
    """The plan's view of data folders without reading one: the imagenet workload at `train_size` photos."""
    sizes = {}

    def describe(path, workload):
        spec = bench_data.WORKLOADS.get(workload)
        size = sizes.get(workload, spec["train"] * 10 if spec else 100)
        image = 224 if spec and spec["photo"] else 32
        return dict(image_size=image, classes=list(range(10)), train_size=size, dataset="generated")

    monkeypatch.setattr(prepare, "describe", describe)
    return sizes


def saved(step_s):
    """Made-up saved GPU costs of every imagenet row: step_s a timed step (the fastest decides the steps)."""
    return cost.Saved(start_s=20, first_s=10, warm_step_s=step_s, eval_s=3, step_s=step_s, steady=True, warmup=20,
                      needed=None, runs=1, where="made up")  # fmt: skip


def gpu_plan(tmp_path, *flags, step_s=0.03):
    config = cli.parse_args(["--workload", "imagenet", "--dry-run", "--out", str(tmp_path), "--budget", "none",
                             "--repeats", "2", *flags])  # fmt: skip
    rows = [v for v in build.ordered(build.asked_variants(config, 1), 1)]
    costs = {("resnet50", 256, v): saved(step_s if v == "amp-synthetic" else 3 * step_s) for v in rows}
    return plan.make_plan(config, 1, 16, saved=costs)


def held(run, train_size):
    """(epoch starts in the run's window, the starts the real set allows there)."""
    steps, warmup, batch = (int(run.flags[f]) for f in ("--steps", "--warmup-steps", "--batch-size"))
    epoch = epochs.epoch_steps(train_size, batch)
    return epochs.starts(warmup, steps, epoch), epochs.allowed(
        steps - warmup, epochs.epoch_steps(IMAGENET.images, batch)
    )


def test_a_gpu_imagenet_plan_keeps_every_window_inside_an_epoch(photos, tmp_path):
    """Made-up costs that ask for a window of 233 steps (7 s at 30 ms the fastest row's step): on the generated
    40,000 photos (156 steps an epoch) and on the 20,000 the fourth GPU run trained on (78), every training and loader
    window holds no epoch start, ImageNet-1k's rate in a window under 5,004 steps; every row the same steps."""
    for train_size in (40_000, 20_000):
        photos["imagenet"] = train_size
        runs, works, _ = gpu_plan(tmp_path)
        work = works["imagenet"]
        assert work.steps_cut_from is not None and work.steps == train_size // 256
        assert not work.window().over and work.window().starts == 0
        assert runs and all(held(r, train_size) == (0, 0) for r in runs if r.kind == "train")
        loaders = [r for r in runs if r.kind == "loader"]
        assert loaders and all(int(r.flags["--steps"]) + build.LOADER_WARMUP <= train_size // 256 for r in loaders)
        assert {(r.flags["--steps"], r.flags["--warmup-steps"]) for r in runs if r.kind == "train"} == {
            (str(work.steps), str(work.warmup_steps))
        }


def test_slow_rows_on_a_gpu_keep_their_steps_where_the_epoch_holds_them(photos, tmp_path):
    """At 300 ms the fastest step, 50 steps are timed (the least a calibration gives): inside the first epoch."""
    _, works, _ = gpu_plan(tmp_path, step_s=0.3)
    work = works["imagenet"]
    assert work.steps_cut_from is None and work.steps < 156 and work.window().starts == 0


def test_a_cpu_plan_holds_no_epoch_start(photos, tmp_path):
    for workload in ("small", "imagenet", "vit"):
        config = cli.parse_args(["--workload", workload, "--dry-run", "--out", str(tmp_path), "--repeats", "1"])
        runs, works, _ = plan.make_plan(config, 0, 2)
        window = works[workload].window()
        assert window.starts == 0 and not window.over and window.cut_from is None, (workload, window)
        real = "CIFAR-10" if workload != "imagenet" else "ImageNet-1k"
        assert window.real == real and real in window.words()


def test_a_tiny_folder_of_ones_own_holds_starts_at_its_own_rate_and_says_so(photos, tmp_path, capsys):
    """100 images at batch 64: an epoch is one step, so a window cannot avoid its starts; the folder stands for
    itself, so they are its own training's rate, and the plan's line says how many."""
    folder = tmp_path / "mine"
    folder.mkdir()
    config = cli.parse_args(["--data", str(folder), "--dry-run", "--out", str(tmp_path), "--repeats", "1"])
    runs, works, _ = plan.make_plan(config, 0, 2)
    window = works["custom"].window()
    assert window.epoch == 1 and window.starts == 25 and window.allowed == 25 and not window.over
    assert window.real == "its own data" and "25 epoch starts in a window of 25" in window.words()


def test_an_epoch_of_no_images_or_no_batch_is_not_known_and_holds_no_start():
    """epoch_steps: None where the images or the batch are not known (0, None), at least 1 step where both are;
    starts: none where the epoch is not known or the window is empty (steps at warmup or before)."""
    assert epochs.epoch_steps(0, 256) is None and epochs.epoch_steps(1000, 0) is None
    assert epochs.epoch_steps(None, None) is None and epochs.epoch_steps(10, 256) == 1
    assert epochs.starts(0, 10, None) == 0 and epochs.starts(0, 10, 0) == 0
    assert epochs.starts(10, 10, 5) == 0 and epochs.starts(10, 9, 5) == 0 and epochs.starts(9, 11, 5) == 1


def test_a_window_of_unknown_data_says_so_and_is_never_over():
    window = epochs.window(20, 144, None, 256, None)
    assert (window.epoch, window.real, window.real_epoch, window.starts, window.allowed) == (
        None,
        "not known",
        None,
        0,
        math.inf,
    )
    assert window.words() == "steps 21 to 144: the data's epoch is not known" and not window.over
    assert window.given is False and window.cut_from is None  # the bench chose the steps unless told


def test_the_plans_line_says_where_the_window_lies_in_words_exactly():
    """Window.words, each case whole: inside an epoch (no start, one start, starts), cut, over with the rate and why,
    and over where the real set's epoch is not known."""
    inside = epochs.window(20, 100, 256 * 500, 256, IMAGENET)
    assert inside.words() == (
        "steps 21 to 100 of epochs of 500 steps: no epoch start in a window of 80, as training on it would hold"
        " (ImageNet-1k's epoch is 5,004 steps at this batch)"
    )
    own = epochs.Real("its own data", 256 * 10)
    assert epochs.window(5, 15, 256 * 10, 256, own).words() == (
        "steps 6 to 15 of epochs of 10 steps: 1 epoch start in a window of 10, as training on it would hold (its own"
        " data's epoch is 10 steps at this batch)"
    )
    assert "2 epoch starts in a window of 20," in epochs.window(5, 25, 256 * 10, 256, own).words()
    cut = epochs.fit(20, 144, 20_000, 256, IMAGENET)
    assert cut.words() == (
        "steps 21 to 78 of epochs of 78 steps (cut from 144 to end inside the first epoch): no epoch start in a window"
        " of 58, as training on it would hold (ImageNet-1k's epoch is 5,004 steps at this batch)"
    )
    given = epochs.fit(20, 300, 40_000, 256, IMAGENET, given=True)
    assert given.words() == (
        "steps 21 to 300 of epochs of 156 steps: 1 epoch start in a window of 280, 18 times as often as training on"
        " it would (ImageNet-1k's epoch is 5,004 steps at this batch; the steps were given (--steps)): those rows are"
        " read at their steady steps, and their summary says so"
    )
    short = epochs.fit(20, 144, 30 * 256, 256, IMAGENET)
    assert short.words().startswith("steps 21 to 144 of epochs of 30 steps: 4 epoch starts in a window of 124, 161")
    assert f"(ImageNet-1k's epoch is 5,004 steps at this batch; an epoch holds fewer than {epochs.MIN_TIMED} timed" in (
        short.words()
    )
    unknown = epochs.Window(0, 10, 5, "not known", None, 2, 1)
    assert unknown.over and unknown.words() == (
        "steps 1 to 10 of epochs of 5 steps: 2 epoch starts in a window of 10 (not known; an epoch holds fewer than"
        f" {epochs.MIN_TIMED} timed steps): those rows are read at their steady steps, and their summary says so"
    )


@pytest.mark.parametrize("real_epoch,said", [(29, ""), (30, ", 2 times as often as training on it would")])
def test_a_window_over_its_share_says_how_much_more_often_from_1_5_times(real_epoch, said):
    """The rate is said from 1.5 times the real set's (a window of 20 holding one start: 30 steps an epoch gives
    1.5, 29 gives 1.45, not said)."""
    window = epochs.Window(0, 20, 20, "X", real_epoch, 1, 0)
    assert window.over and f"in a window of 20{said} (X's epoch" in window.words()


@pytest.mark.parametrize("epoch,warmup,cut", [(40, 20, True), (39, 20, False), (40, 1, True), (40, 0, False)])
def test_a_window_is_cut_where_its_epoch_holds_warmup_and_min_timed_steps_and_a_warmup(epoch, warmup, cut):
    """fit cuts the steps to the epoch's end where the epoch holds the warm-up and MIN_TIMED (20) timed steps, each a
    step either side, and the warm-up is a step at least (a window from step 1 holds no start of the first epoch);
    the cut window keeps the real set and the asked steps."""
    window = epochs.fit(warmup, 144, epoch * 256, 256, IMAGENET)
    assert (window.steps == epoch, window.cut_from) == ((True, 144) if cut else (False, None))
    assert window.real == "ImageNet-1k" and window.real_epoch == 5004 and window.given is False
