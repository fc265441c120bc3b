"""python -m bench.firstgpu: the first GPU run's script, tried on a CPU. Its dry run, every bench command it gives
(the bench's own parser and plan take them), a part run for real on steps made up (the time limits, a step that no
longer fits, the one packed file), and its environment step as a CPU answers it."""

import json
import subprocess
import sys
import tarfile
import zipfile

import pytest

from bench import cli, firstgpu, plan
from helpers import run


def test_the_dry_run_names_each_parts_steps_in_order():
    result = run("-m", "bench.firstgpu", "--dry-run")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    for part in 1, 2:
        assert f"part {part} (at most {firstgpu.PART_S} s; python3 -m bench.firstgpu --part {part} --out $OUT):" in text
    names = [s.name for s in firstgpu.STEPS]
    assert [text.index(f"  {name} (at most ") for name in names] == sorted(
        text.index(f"  {n} (at most ") for n in names
    )
    assert names[:3] == ["environment", "check", "bench-small"] and "max-batch" in names and "cold-compile" in names
    assert firstgpu.PART_S + 30 <= 600  # a device command runs 10 minutes at most: the start and the packing beside


@pytest.mark.slow
@pytest.mark.parametrize("step", [s for s in firstgpu.STEPS if s.cmd[:2] == ["-m", "bench"]], ids=lambda s: s.name)
def test_every_bench_command_is_one_the_bench_takes(step, tmp_path):
    """Each bench step's flags parse, and its plan is made on a GPU machine (--dry-run --gpus 1): no typo waits for
    the GPU."""
    flags = [firstgpu.fill(part, tmp_path, 3.0) for part in step.cmd[2:]]
    args = cli.parse_args(flags)
    assert args.out == tmp_path / flags[flags.index("--out") + 1].rsplit("/", 1)[-1]
    if args.mode != "check":  # --check has no plan to print
        result = run("-m", "bench", *flags, "--dry-run", "--gpus", 1)
        assert result.returncode == 0, result.stderr
        assert "--device cuda" in result.stdout


@pytest.mark.slow
def test_a_part_keeps_to_its_limits_and_packs_one_file(monkeypatch, tmp_path):
    """Made-up steps: one that writes (a compile cache too, left out of the pack), one that hangs (stopped at its
    limit), one that would need more than is left (skipped): every step has its row, and one file comes back."""
    monkeypatch.setattr(firstgpu, "WORK", tmp_path / "work")
    monkeypatch.setattr(firstgpu, "PART_S", 8)
    monkeypatch.setattr(firstgpu, "GRACE_S", 2)
    writes = "import pathlib, sys; w = pathlib.Path(sys.argv[1]); (w / 'compile-cache').mkdir();"
    writes += " (w / 'compile-cache' / 'k').write_text('x'); (w / 'made.txt').write_text('hello'); print('wrote it');"
    writes += " (w / 'run-1.pt.trace.json.gz').write_bytes(b'trace')"  # --profile's: not packed either
    steps = [
        firstgpu.Step("writes", 1, 30, ["-c", writes, "{work}"], least_s=0),
        firstgpu.Step("hangs", 1, 3, ["-c", "import time; print('waiting', flush=True); time.sleep(60)"], least_s=0),
        firstgpu.Step("too-long", 1, 30, ["-c", "print('never')"], least_s=60),
    ]
    rows = firstgpu.run_part(1, tmp_path / "out", "/nonexistent", steps)
    assert [r["code"] for r in rows] == [0, "stopped at its limit of 3 s", "skipped"]
    assert rows[0]["last"] == "wrote it" and rows[1]["last"] == "waiting" and rows[2]["last"].startswith("skipped:")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["part-1.md", "part-1.tar.gz"]
    with tarfile.open(tmp_path / "out" / "part-1.tar.gz") as tar:
        names = tar.getnames()
        assert tar.extractfile("part-1/made.txt").read() == b"hello"
    assert "part-1/steps.md" in names and "part-1/02-hangs.log" in names
    assert not [n for n in names if "compile-cache" in n or "trace" in n]
    md = (tmp_path / "out" / "part-1.md").read_text()
    assert "| hangs | stopped at its limit of 3 s |" in md and "| too-long | skipped | 0 |" in md


@pytest.mark.slow
def test_the_environment_step_on_a_cpu(tmp_path):
    result = run("-m", "bench.firstgpu", "--environment", tmp_path / "environment.json")
    assert result.returncode == 0, result.stderr
    found = json.loads((tmp_path / "environment.json").read_text())
    assert found["cuda_available"] is False and found["nvml_sees_our_pids"] == "no GPU"
    assert found["cores"] >= 1 and found["dev_shm_gib"] > 0 and found["torch"] and found["missing"] == []
    assert found["dali"] == __import__("nvidia.dali").dali.__version__  # the CPU wheel CI installs imports here


def test_loader_rows_alone_need_no_calibration(tiny_data, tmp_path):
    """A GPU plan of loader rows alone (the first GPU run's loader rate): no training row to calibrate on, so a fixed
    number of batches (it once tried to calibrate on no row, and its window fit divided by zero)."""
    args = cli.parse_args(
        ["--data", str(tiny_data), "--variants", "", "--loaders", "loader", "--batch-size", "8", "--repeats", "1"]
    )
    runs, works, _ = plan.make_plan(args, 1, 2, tmp_path, dry_run=False)
    (loader,) = runs
    assert loader.cmd[loader.cmd.index("--steps") + 1] == str(plan.LOADER_ONLY_STEPS)


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


def test_carried_wheels_are_installed_where_every_step_finds_them(tmp_path):
    """The GPU machine has no network: the wheels carried in .wheels/ go into the site folder with pip --no-index,
    and a step's environment puts that folder on PYTHONPATH."""
    said, ok = firstgpu.install_wheels(tmp_path / "site", tmp_path / "none")
    assert ok and said.startswith("no wheels carried")
    a_wheel(tmp_path / "wheels")
    said, ok = firstgpu.install_wheels(tmp_path / "site", tmp_path / "wheels")
    assert ok and said == f"installed 1 carried wheels into {tmp_path / 'site'}", said
    env = firstgpu.environment_of(str(tmp_path / "site"))
    probe = subprocess.run([sys.executable, "-c", "import carried_probe; print(carried_probe.ANSWER)"], env=env,
                           capture_output=True, text=True)  # fmt: skip
    assert probe.stdout.strip() == "42", probe.stderr
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    said, ok = firstgpu.install_wheels(tmp_path / "site", tmp_path / "bad")
    assert not ok and said.startswith("installing the carried wheels failed: ")
