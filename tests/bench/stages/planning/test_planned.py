"""bench/stages/planning/planned.py: the records a plan is made of. A run's command is built last, a flag set again
replaces the one before; a Work or Context from plan.json passes over a field a newer bench added; a Work's window lies
against its epochs once its steps are known."""

from bench.stages.planning import planned


def test_a_runs_command_is_its_script_then_its_flags_and_a_flag_set_again_replaces_it():
    run = planned.Run("amp-1", "amp", "train", 1, 1, ["python", "train_amp.py"], flags={"--steps": "30"})
    run = run.with_flags(flags={"--batch-size": 64, "--no-progress": None})
    again = run.with_flags(flags={"--steps": 12}, name="amp-2")
    assert run.cmd == ["python", "train_amp.py", "--steps", "30", "--batch-size", "64", "--no-progress"]
    assert again.cmd == ["python", "train_amp.py", "--steps", "12", "--batch-size", "64", "--no-progress"]
    assert (again.name, run.name) == ("amp-2", "amp-1")  # a copy: the run it came from as it was


def test_a_saved_work_or_context_passes_over_a_field_it_does_not_know():
    work = planned.Work.saved(dict(model="resnet18", batch_size=64, steps=30, a_newer_field=1))
    assert (work.model, work.batch_size, work.steps) == ("resnet18", 64, 30)
    context = planned.Context.saved(dict(gpu_count=1, variants=["baseline"], another=2))
    assert (context.gpu_count, context.variants) == (1, ["baseline"])


def test_a_works_window_is_known_once_its_steps_are():
    work = planned.Work(batch_size=64, steps="auto", warmup_steps=5, train_size=640)
    assert work.window() is None  # not calibrated yet
    work.steps = 30
    window = work.window()
    assert window is not None and window.epoch == 10  # 640 images at 64: an epoch of 10 steps


def test_a_run_says_what_its_estimate_reads_of_its_catalogue_row():
    """Whether it compiles (a combination by its switches), into its own cache (a row over another loader shares its
    row's), trains under autocast, and how much slower its window is on each kind of machine (1 where unmeasured)."""

    def run(variant, kind="train"):
        return planned.Run(f"{variant}-1", variant, kind, 1, 1)

    assert [run(v).compiles for v in ("compile", "all:no-compile", "all:no-ddp+nvjpeg", "amp")] == [1, 0, 1, 0]
    assert [run(v).own_cache for v in ("compile", "all:no-ddp+nvjpeg", "all:no-ddp")] == [True, False, True]
    assert [run(v).amp for v in ("amp", "all:no-amp", "all:no-ddp", "baseline")] == [True, False, True, False]
    assert (run("checkpoint").slower("cpu"), run("checkpoint").slower("gpu-vit"), run("amp").slower("cpu")) == (
        1.3,
        6.5,
        1,
    )
    assert not run("loader_dali", "loader").compiles and run("loader", "loader").slower("gpu") == 1
