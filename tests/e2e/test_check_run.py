"""End to end: `python -m bench --check`, every CPU path trained once."""

import pytest

from bench.modes import check
from helpers import TINY_MODEL, run


@pytest.mark.slow
@pytest.mark.minutes(4)
def test_make_check_passes_on_this_machine(tmp_path):
    """Every path that applies on a CPU runs and learns; the CUDA ones say why they do not apply; exit 0. With the
    tests' smallest model (--model: the check's own, smallnet, compiles for a minute on 2 cores, this one in seconds;
    each path's own tests train the real models)."""
    result = run("-m", "bench", "--check", "--model", TINY_MODEL, "--out", tmp_path, timeout=1500)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert out.startswith("CPU: ") and "features " in out and "GPU: none that torch can see" in out
    table = (tmp_path / "check" / "check.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith(("| path", "| ---"))]
    assert len(rows) == len(check.paths(0))
    works = [r for r in rows if "| works |" in r]
    not_here = [r for r in rows if "| does not apply | needs" in r]
    assert len(works) == 19 and len(not_here) == 10, table
    assert all("loss " in r or "delivered" in r for r in works)
    assert any("train.py --loader nvjpeg" in r for r in works) and any("loader_nvjpeg.py --bench" in r for r in works)
    cuda = ("NCCL", "fp16", "reduce-overhead", "snapshot", "NVML", "TF32")
    assert all(any(word in r for word in cuda) for r in not_here)
    assert "check: 19 of 19 paths work here" in out
    assert "| train.py --profile: torch.profiler after the window (CPU) | works | " in table
