"""tools/gpurun.py: the next GPU session's commands: its parts, their limits, DALI carried in parts (pruned), a command
killed at its limit."""

import json
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import gpurun
import pytest

from bench import cli
from bench.stages.planning import plan
from helpers import ROOT, run

TOOL = ROOT / "tools" / "gpurun.py"


def a_wheel(folder, name="carried_probe"):
    """A wheel made by hand: one module, the three files of its .dist-info."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-1.0.dist-info"
    files = {f"{name}.py": "ANSWER = 42\n", f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"}
    files[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(folder / f"{name}-1.0-py3-none-any.whl", "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)


@pytest.mark.slow
def test_the_dry_run_names_each_parts_steps_in_order_with_estimates_that_fit():
    result = run(TOOL, "--dry-run")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    for part in gpurun.PARTS:
        seconds = gpurun.PART_SECONDS[part]
        assert f"part {part} (at most {seconds} s; python3 tools/gpurun.py --part {part} --out $OUT):" in text
        total = sum(s for _, s in gpurun.estimates(part)) + gpurun.GRACE_S + gpurun.PACK_S
        assert total <= seconds and f"in all about {total:.0f} s" in text
    names = [s.name for s in gpurun.STEPS]
    assert [text.index(f"  {name} (at most ") for name in names] == sorted(
        text.index(f"  {n} (at most ") for n in names
    )
    # in order of value: the recipe over each loader with its ceiling, the loaders alone, vit; DALI's a session of
    # its own; the six rows the fourth run settled are not run again
    assert names == ["environment", "imagenet-data", "recipe-rounds", "recipe-more", "loaders-alone", "vit-fsdp",
                     "dali-rounds"]  # fmt: skip
    rounds = next(line for line in text.splitlines() if line.startswith("  recipe-rounds "))
    assert f"--variants {gpurun.RECIPE} " in rounds and "--budget none" in rounds  # no row dropped by a budget
    assert "all:no-ddp+nvjpeg" in gpurun.RECIPE and "all-synthetic" in gpurun.RECIPE and "checkpoint" not in rounds
    plan_lines = text.split("  recipe-rounds ")[1].split("\n  recipe-more")[0]
    assert "windows: steps 21 to 120 of epochs of 156 steps: no epoch start" in plan_lines  # the bench's own plan
    assert "estimate: " in plan_lines
    more = next(line for line in text.splitlines() if line.startswith("  recipe-more "))
    assert f"--resume --out {gpurun.WORK}/part-1/recipe --budget none" in more  # part 1's bench, where it is
    assert "3 calls carrying DALI's parts" in text and f"of the {gpurun.PLAN_S} planned" in text


def test_two_commands_hold_the_run_in_13_minutes_and_dali_has_a_session_of_its_own():
    """Part 1 is one device command (600 s, its start and transfers beside it); with the machine's start and part 2
    at once after it the session's calls take 13 of its 15 minutes; DALI's carries and part 3 fit another."""
    assert gpurun.PARTS == [1, 2, 3] and set(gpurun.PART_SECONDS) == set(gpurun.PARTS)
    assert all(seconds + 30 <= 600 for seconds in gpurun.PART_SECONDS.values())
    assert gpurun.PART_SECONDS[1] <= 570  # 9.5 minutes
    session = gpurun.START_S + gpurun.PART_SECONDS[1] + gpurun.BETWEEN_S + gpurun.PART_SECONDS[2]
    assert session <= gpurun.PLAN_S == 13 * 60
    dali = gpurun.START_S + gpurun.DALI_CALLS * gpurun.CARRY_S + gpurun.PART_SECONDS[3]
    assert dali <= gpurun.PLAN_S
    assert all(s.least_s <= gpurun.PART_SECONDS[s.part] for s in gpurun.STEPS)


@pytest.mark.slow
@pytest.mark.parametrize("step", [s for s in gpurun.STEPS if s.cmd[:2] == ["-m", "bench"]], ids=lambda s: s.name)
def test_every_bench_command_is_one_the_bench_takes(step, tmp_path):
    """Each bench step's flags parse, and its plan is made on a GPU machine (--dry-run --gpus 1): no typo waits for
    the GPU; its budget leaves the part's later steps their time."""
    flags = [gpurun.fill(part, tmp_path, 3.0) for part in step.cmd[2:]]
    asked = cli.parse_args(flags)
    out = flags[flags.index("--out") + 1]
    assert asked.outputs.out == Path(out) and out.startswith(str(tmp_path))
    if asked.mode == "resume":  # a bench part 1 began: its flags are the saved plan's, and resume has no dry run
        assert asked.limits.budget == "none" and flags[-4:] == ["--out", out, "--budget", "none"]
        return
    result = run("-m", "bench", *flags, "--dry-run", "--gpus", 1)
    assert result.returncode == 0, result.stderr
    assert "--device cuda" in result.stdout


@pytest.mark.slow
def test_a_part_keeps_to_its_limits_and_packs_one_file(monkeypatch, tmp_path):
    """Made-up steps: one that writes (a compile cache too, left out of the pack), one that hangs (stopped at its
    limit), one that would need more than is left (skipped): every step has its row, and one file comes back."""
    monkeypatch.setattr(gpurun, "WORK", tmp_path / "work")
    monkeypatch.setattr(gpurun, "PART_SECONDS", {1: 12})  # the steps end by 12 - 2 - 2 = 8 s after the start
    monkeypatch.setattr(gpurun, "GRACE_S", 2)
    monkeypatch.setattr(gpurun, "PACK_S", 2)
    monkeypatch.setattr(gpurun, "DALI_PARTS", tmp_path / "none")
    monkeypatch.setattr(gpurun, "DALI_TMP", tmp_path / "dali")
    writes = "import pathlib, sys; w = pathlib.Path(sys.argv[1]); (w / 'compile-cache').mkdir();"
    writes += " (w / 'compile-cache' / 'k').write_text('x'); (w / 'made.txt').write_text('hello'); print('wrote it');"
    writes += " (w / 'run-1.pt.trace.json.gz').write_bytes(b'trace')"  # --profile's: not packed either
    steps = [
        gpurun.Step("writes", 1, 30, ["-c", writes, "{work}"], least_s=0),
        gpurun.Step("hangs", 1, 3, ["-c", "import time; print('waiting', flush=True); time.sleep(60)"], least_s=0),
        gpurun.Step("too-long", 1, 30, ["-c", "print('never')"], least_s=60),
    ]
    started = time.monotonic()
    rows = gpurun.run_part(1, tmp_path / "out", "/nonexistent", steps)
    assert time.monotonic() - started < 12  # the part's seconds, the packing included
    assert [r["code"] for r in rows] == [0, "stopped at its limit of 3 s", "skipped"]
    assert rows[0]["last"] == "wrote it" and rows[1]["last"] == "waiting" and rows[2]["last"].startswith("skipped:")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["part-1.md", "part-1.tar.gz"]  # 8 come back
    with tarfile.open(tmp_path / "out" / "part-1.tar.gz") as tar:
        names = tar.getnames()
        assert tar.extractfile("part-1/made.txt").read() == b"hello"
    assert sorted(names) == [f"part-1/{n}" for n in ("01-writes.log", "02-hangs.log", "03-too-long.log", "made.txt",
                                                     "steps.md")]  # fmt: skip
    assert not [n for n in names if "compile-cache" in n or "trace" in n]
    md = (tmp_path / "out" / "part-1.md").read_text()
    assert "| hangs | stopped at its limit of 3 s |" in md and "| too-long | skipped | 0 |" in md
    hangs = next(line for line in md.splitlines() if line.startswith("- `02-hangs`: `"))  # each step's command
    assert "time.sleep(60)" in hangs and "- `03-too-long`: not run" in md


def test_part_2_goes_on_in_part_1s_folder_and_brings_all_of_it_back(monkeypatch, tmp_path):
    """Part 2 (the next command, the machine warm) empties nothing: its steps find part 1's files where part 1 left
    them (the bench they resume), its logs and steps are its own, and its pack holds part 1's files and its own."""
    monkeypatch.setattr(gpurun, "WORK", tmp_path / "work")
    monkeypatch.setattr(gpurun, "DALI_PARTS", tmp_path / "none")
    monkeypatch.setattr(gpurun, "DALI_TMP", tmp_path / "dali")
    writes = "import pathlib, sys; (pathlib.Path(sys.argv[1]) / 'rounds.csv').write_text('round 1')"
    goes_on = "import pathlib, sys; f = pathlib.Path(sys.argv[1]) / 'rounds.csv'; f.write_text(f.read_text() + ', 2')"
    steps = [gpurun.Step("rounds", 1, 30, ["-c", writes, "{work}"], least_s=0),
             gpurun.Step("more", 2, 30, ["-c", goes_on, "{work}"], least_s=0)]  # fmt: skip
    gpurun.run_part(1, tmp_path / "out1", "/nonexistent", steps)
    rows = gpurun.run_part(2, tmp_path / "out2", "/nonexistent", steps)
    assert rows[0]["code"] == 0 and rows[0]["log"] == "2-01-more.log"
    assert sorted(p.name for p in (tmp_path / "out2").iterdir()) == ["part-2.md", "part-2.tar.gz"]
    with tarfile.open(tmp_path / "out2" / "part-2.tar.gz") as tar:
        assert tar.extractfile("part-1/rounds.csv").read() == b"round 1, 2"
        assert {"part-1/01-rounds.log", "part-1/2-01-more.log", "part-1/steps.md", "part-1/steps-2.md"} <= set(
            tar.getnames()
        )
    assert "| more | 0 |" in (tmp_path / "out2" / "part-2.md").read_text()
    assert "| rounds | 0 |" in (tmp_path / "work" / "part-1" / "steps.md").read_text()  # part 1's report kept


@pytest.mark.slow
def test_the_environment_step_on_a_cpu(tmp_path):
    result = run(TOOL, "--environment", tmp_path / "environment.json")
    assert result.returncode == 0, result.stderr
    found = json.loads((tmp_path / "environment.json").read_text())
    assert found["cuda_available"] is False and found["nvml_sees_our_pids"] == "no GPU"
    assert found["cores"] >= 1 and found["dev_shm_gib"] > 0 and found["torch"] and found["missing"] == []
    assert found["dali"] == __import__("nvidia.dali").dali.__version__  # the CPU wheel CI installs imports here


def test_loader_rows_alone_need_no_calibration(tiny_data, tmp_path):
    """A GPU plan of loader rows alone (the first GPU run's loader rate): no training row to calibrate on, so a fixed
    number of batches (it once tried to calibrate on no row, and its window fit divided by zero)."""
    config = cli.parse_args(
        ["--data", str(tiny_data), "--variants", "", "--loaders", "loader", "--batch-size", "8", "--repeats", "1"]
    )
    runs, works, _ = plan.make_plan(config, 1, 2, tmp_path)
    (loader,) = runs
    assert loader.cmd[loader.cmd.index("--steps") + 1] == str(plan.LOADER_ONLY_STEPS)


def test_carried_wheels_are_installed_where_every_step_finds_them(tmp_path):
    """The GPU machine has no network: the wheels carried in .wheels/ go into the site folder with pip --no-index,
    and a step's environment puts that folder on PYTHONPATH."""
    said, ok = gpurun.install_wheels(tmp_path / "site", tmp_path / "none")
    assert ok and said.startswith("no wheels carried")
    a_wheel(tmp_path / "wheels")
    said, ok = gpurun.install_wheels(tmp_path / "site", tmp_path / "wheels")
    assert ok and said == f"installed 1 carried wheels into {tmp_path / 'site'}", said
    env = gpurun.environment_of(str(tmp_path / "site"))
    probe = subprocess.run([sys.executable, "-c", "import carried_probe; print(carried_probe.ANSWER)"], env=env,
                           capture_output=True, text=True)  # fmt: skip
    assert probe.stdout.strip() == "42", probe.stderr
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    said, ok = gpurun.install_wheels(tmp_path / "site", tmp_path / "bad")
    assert not ok and said.startswith("installing the carried wheels failed: ")


def test_a_background_step_runs_on_and_a_wait_step_waits_for_it(monkeypatch, tmp_path):
    """The data is made in the background of part 1 while the check runs; part 2 waits for its last file."""
    monkeypatch.setattr(gpurun, "WORK", tmp_path / "work")
    monkeypatch.setattr(gpurun, "DALI_PARTS", tmp_path / "none")
    monkeypatch.setattr(gpurun, "DALI_TMP", tmp_path / "dali")
    done = tmp_path / "done.json"
    slow = f"import time, pathlib; time.sleep(0.3); pathlib.Path({str(done)!r}).write_text('made')"
    steps = [gpurun.Step("makes", 1, 60, ["-c", slow], background=True, least_s=0),
             gpurun.Step("waits", 1, 30, ["tools/gpurun.py", "--wait", str(done)], least_s=0)]  # fmt: skip
    rows = gpurun.run_part(1, tmp_path / "out", "/nonexistent", steps)
    assert rows[0]["code"].startswith("started in the background (pid ") and rows[0]["seconds"] == 0
    assert rows[1]["code"] == 0 and done.exists() and rows[1]["last"].startswith(f"{done} is there after")


def test_dali_travels_in_parts_that_fit_a_call_and_is_unpacked_when_all_are_there(tmp_path):
    """--pack-dali on made-up wheels, cut into parts of 300 bytes: each call leaves its part in /tmp/dali, and the
    one that brings the last unpacks them; nvidia/__init__.py then joins the machine's own nvidia.* packages."""
    wheels = tmp_path / "wheels"
    a_wheel(wheels, "dali_probe")
    with zipfile.ZipFile(wheels / "nvidia_part-1.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("nvidia/__init__.py", "")  # as nvimgcodec's wheel has it: it would hide the others
        wheel.writestr("nvidia/dali/__init__.py", "__version__ = 'probe'\n" + "# padding\n" * 40)
    parts = tmp_path / "parts"
    count = gpurun.pack_dali(wheels, parts, part_bytes=300)
    assert count >= 2 and sorted(p.name for p in parts.iterdir()) == [str(i) for i in range(1, count + 1)]
    assert all(p.stat().st_size <= 300 for p in parts.glob("*/dali.tar.xz.*"))
    site, gathered = tmp_path / "site", tmp_path / "dali"
    for i in range(1, count + 1):  # one part a call: the folder the call carried is .dali/i alone
        carried = tmp_path / f"call-{i}"
        (carried / str(i)).mkdir(parents=True)
        shutil.copytree(parts / str(i), carried / str(i), dirs_exist_ok=True)
        said = gpurun.unpack_dali(site, carried, gathered)
        if i < count:
            assert said == f"DALI: {i} of its {count} parts are here; the rest come with the next parts' calls"
    assert said == f"DALI unpacked into {site} from its {count} parts"
    assert (site / "dali_probe.py").read_text() == "ANSWER = 42\n"
    assert (site / "nvidia" / "__init__.py").read_text() == gpurun.NAMESPACE
    probe = subprocess.run([sys.executable, "-c", "import nvidia.dali as d; print(d.__version__)"],
                           env=gpurun.environment_of(str(site)), capture_output=True, text=True)  # fmt: skip
    assert probe.stdout.strip() == "probe", probe.stderr
    assert gpurun.unpack_dali(site, tmp_path / "none", gathered) == f"DALI is in {site}"


@pytest.mark.parametrize("seconds", [0, 30, 571])
def test_a_part_cut_to_the_time_left_is_refused_outside_what_a_part_can_take(seconds, tmp_path):
    result = run(TOOL, "--part", 2, "--seconds", seconds, "--out", tmp_path)
    assert result.returncode == 2 and f"--seconds {seconds}: more than 30" in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr and not list(tmp_path.iterdir())


@pytest.mark.slow
def test_a_command_killed_at_its_limit_leaves_what_it_measured(tmp_path):
    """The device kills a command at its limit (SIGKILL, no last packing): what the part had written is already in
    OUT/part-1.tar.gz, packed whole as it went."""
    driver = f"""import sys, time
sys.path.insert(0, "tools")
import gpurun
gpurun.WORK, gpurun.MIRROR_S = {str(tmp_path / "work")!r}, 0.2
gpurun.WORK = __import__("pathlib").Path(gpurun.WORK)
gpurun.DALI_PARTS, gpurun.DALI_TMP = gpurun.WORK / "none", gpurun.WORK / "dali"
writes = "import pathlib, sys, time; (pathlib.Path(sys.argv[1]) / 'row.csv').write_text('1'); time.sleep(60)"
steps = [gpurun.Step("measures", 1, 60, ["-c", writes, "{{work}}"], least_s=0)]
gpurun.run_part(1, {str(tmp_path / "out")!r}, "/nonexistent", steps)
"""
    process = subprocess.Popen([sys.executable, "-c", driver], cwd=ROOT)
    try:
        for _ in range(200):
            if (tmp_path / "out" / "part-1.tar.gz").exists():
                with tarfile.open(tmp_path / "out" / "part-1.tar.gz") as tar:
                    if "part-1/row.csv" in tar.getnames():
                        break
            time.sleep(0.1)
    finally:
        process.kill()
        process.wait()
        subprocess.run(["pkill", "-f", str(tmp_path / "work")])  # the step, in a session of its own, goes on
    with tarfile.open(tmp_path / "out" / "part-1.tar.gz") as tar:  # whole: written beside it, then renamed
        assert tar.extractfile("part-1/row.csv").read() == b"1"
    assert {p.name for p in (tmp_path / "out").iterdir()} <= {"part-1.tar.gz", "part-1.tar.gz.part"}  # one file


def test_dali_is_pruned_to_what_its_pipeline_loads_on_the_gpu_machines_python(tmp_path):
    """Other Pythons' extension modules, headers, nvCOMP and the JPEG 2000 and TIFF codecs go; DALI's libraries, the
    GPU machine's Python's modules, nvimgcodec with its JPEG extensions and nvJPEG stay."""
    kept = [
        "nvidia/dali/backend_impl.cpython-312-x86_64-linux-gnu.so",
        "nvidia/dali/libdali_operators.so",
        "nvidia/dali/.libs/libcvcuda.so.0",
        "nvidia/nvimgcodec/libnvimgcodec.so.0",
        "nvidia/nvimgcodec/extensions/libnvjpeg_ext.so.0.9.0",
        "nvidia/nvimgcodec/extensions/libjpeg_turbo_ext.so.0",
        "nvidia/cu13/lib/libnvjpeg.so.13",
        "nvidia/dali/fn/__init__.py",
    ]
    gone = [
        "nvidia/dali/backend_impl.cpython-311-x86_64-linux-gnu.so",
        "nvidia/dali/include/dali/core.h",
        "nvidia/libnvcomp/lib/libnvcomp.so.5",
        "nvidia/nvjpeg2k/lib/libnvjpeg2k.so.0",
        "nvidia/nvtiff/lib/libnvtiff.so.0",
        "nvidia/nvimgcodec/extensions/libnvjpeg2k_ext.so.0.9.0",
        "nvidia/nvimgcodec/extensions/libtiff_ext.so.0.9.0",
        "nvidia/nvimgcodec/nvimgcodec_impl.cpython-39-x86_64-linux-gnu.so",
    ]
    for name in kept + gone:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x" * 10)
    assert gpurun.prune(tmp_path) == 10 * len(gone)
    assert all((tmp_path / name).exists() for name in kept)
    assert not any((tmp_path / name).exists() for name in gone)
