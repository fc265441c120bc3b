"""train_compile.py: the toolchain looked for not tried, a compiler that cannot build in one line, the cache reused,
graph breaks said."""

import pytest
import torch

from helpers import ROOT, TECHNIQUE_TIMED, TINY_MODEL, check_clean_failure, train


@pytest.mark.slow
def test_compile_without_a_compiler(tiny_data, tmp_path):
    """A cold cache (nothing compiled to reuse) and no C++ compiler: one line saying what is missing."""
    metrics = tmp_path / "m.json"
    env = {"CXX": "/no/such/g++", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    result, _ = train("train_compile.py", tiny_data, metrics, *TECHNIQUE_TIMED, env=env)
    check_clean_failure(result, metrics, "torch.compile cannot compile on this machine", "C++ compiler")


@pytest.mark.slow
@pytest.mark.torches
def test_a_compiler_that_cannot_build_is_one_line_from_the_first_step(tiny_data, tmp_path):
    """A C++ compiler that is there (it answers --version) but builds nothing: the toolchain is only looked for
    before training, so the first step finds it out; the error is one line naming the compiler's own error."""
    fake = tmp_path / "g++"
    fake.write_text('#!/bin/sh\ncase "$*" in *--version*) exec g++ "$@";; esac\n'
                    'echo "kernel.cpp:1:1: error: this compiler builds nothing" >&2\nexit 1\n')  # fmt: skip
    fake.chmod(0o755)
    metrics = tmp_path / "m.json"
    env = {"CXX": str(fake), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}  # cold: nothing to reuse
    result, _ = train("train_compile.py", tiny_data, metrics, "--model", TINY_MODEL, *TECHNIQUE_TIMED, env=env)
    check_clean_failure(result, metrics, "torch.compile cannot compile on this machine (CppCompileError: ",
                        "this compiler builds nothing", "that builds its kernels")  # fmt: skip


@pytest.mark.torches
def test_the_toolchain_is_looked_for_not_tried(monkeypatch):
    """No trial compile before the first step: its time would be Inductor's start, paid outside compile_s (which
    read 4.8 s where a fresh start paid 13.5 s with the tiny model here). A compiler that is not there is found
    all the same."""
    import checks

    tried = []
    monkeypatch.setattr(torch, "compile", lambda *args, **kwargs: tried.append(args))
    checks.check_compiler(torch.device("cpu"))
    assert tried == []
    monkeypatch.setenv("CXX", "/no/such/g++")
    monkeypatch.setattr(torch._inductor.config.cpp, "cxx", (None, "/no/such/g++"))
    with pytest.raises(SystemExit) as ended:
        checks.check_compiler(torch.device("cpu"))
    assert ended.value.code == 2 and tried == []


def test_on_a_gpu_triton_is_looked_for_not_tried(monkeypatch):
    """The GPU's branch, with Triton's answer made up (never run on a GPU yet): no Triton is one line, exit code 2;
    a Triton found compiles nothing before the first step either."""
    import torch.utils._triton as triton

    import checks

    tried = []
    monkeypatch.setattr(torch, "compile", lambda *args, **kwargs: tried.append(args))
    monkeypatch.setattr(triton, "has_triton", lambda: True)
    checks.check_compiler(torch.device("cuda"))
    monkeypatch.setattr(triton, "has_triton", lambda: False)
    with pytest.raises(SystemExit) as ended:
        checks.check_compiler(torch.device("cuda"))
    assert ended.value.code == 2 and tried == []


def test_a_toolchain_error_is_found_under_what_wraps_it_and_is_one_line(capsys):
    """TorchDynamo wraps the backend's error (BackendCompilerFailed, its inner_exception); the toolchain's is found
    by its name under it, said in one line (the compiler's own error line where it gave one); any other error is
    raised as it is."""
    import checks

    class CppCompileError(RuntimeError):  # Inductor's, by name: torch versions move it
        pass

    class BackendCompilerFailed(RuntimeError):
        def __init__(self, inner):
            super().__init__(f"backend='inductor' raised:\n{type(inner).__name__}: {inner}")
            self.inner_exception = inner

    inner = CppCompileError("C++ compile error\n\nCommand:\ng++ k.cpp\n\nOutput:\nk.cpp:3:1: error: no such header")
    wrapped = BackendCompilerFailed(inner)
    assert checks.toolchain_error(wrapped) is inner and checks.toolchain_error(RuntimeError("boom")) is None
    assert checks.cannot_compile(inner) == (
        "torch.compile cannot compile on this machine (CppCompileError: k.cpp:3:1: error: no such header): it needs "
        "a C++ compiler (g++, or CXX=...) that builds its kernels"
    )
    with pytest.raises(SystemExit) as ended, checks.one_line_errors():
        raise wrapped
    assert ended.value.code == 2 and "no such header" in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="boom"), checks.one_line_errors():
        raise RuntimeError("boom")


def test_compile_needs_a_warmup_step(tiny_data, tmp_path):
    metrics = tmp_path / "m.json"
    result, _ = train("train_compile.py", tiny_data, metrics, "--warmup-steps", 0)
    check_clean_failure(result, metrics, "--warmup-steps 0", "compiles")


@pytest.mark.slow
def test_compile_fills_a_cache_that_the_next_run_reuses(tiny_data, tmp_path, monkeypatch):
    """Where torch keeps it by itself (no TORCHINDUCTOR_CACHE_DIR, no USER: torch names the folder after the user all
    the same, in the temporary folder): the first run compiles cold and says so, the next finds the kernels there."""
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)  # conftest's shared cache: not this test's
    monkeypatch.delenv("USER", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    small = ("--model", TINY_MODEL)  # a tiny graph: a cold compile in seconds, not a minute
    cold_result, cold = train("train_compile.py", tiny_data, tmp_path / "cold.json", *TECHNIQUE_TIMED, *small)
    assert cold_result.returncode == 0, cold_result.stderr[-3000:]
    assert cold["variant"] == "compile" and cold["compile_mode"] == "default"
    assert cold["compile_cache_warm"] is False and cold["compile_s"] > 0 and cold["compile_s"] == cold["first_step_s"]
    assert f"  compile {cold['compile_s']:.1f} s, the first step (cold cache)" in cold_result.stdout
    (cache,) = [p for p in tmp_path.iterdir() if p.name.startswith("torchinductor_")]
    assert len(list(cache.rglob("*"))) > 10, "nothing compiled into the cache"
    warm_result, warm = train("train_compile.py", tiny_data, tmp_path / "warm.json", *TECHNIQUE_TIMED, *small)
    assert warm_result.returncode == 0, warm_result.stderr[-3000:]
    assert warm["compile_cache_warm"] is True and 0 < warm["compile_s"] < cold["compile_s"]
    assert "the first step (warm cache)" in warm_result.stdout
    for m in cold, warm:  # the timed steps ran the compiled graph (a FLOP count once left it eager on torch 2.11)
        assert m["compiled_steps_timed"] == m["steps_timed"] == 2 and m["flop_per_step"] > 0
        assert (m["compile_graphs"], m["compile_graph_breaks"], m["compile_recompiles_timed"]) == (1, 0, 0)
    assert "compiled code ran in 2 of 2 timed steps; 1 graph, 0 graph breaks" in warm_result.stdout


@pytest.mark.torches
@pytest.mark.slow
def test_a_compiled_model_that_breaks_its_graph_says_so(tiny_data, tmp_path):
    """A forward with a graph break on purpose: two graphs, one break, compiled code in every timed step; printed
    in the summary and kept in the record."""
    model = ("--model", f"{ROOT}/tests/tinynet.py:two_graphs")
    result, m = train("train_compile.py", tiny_data, tmp_path / "m.json", *TECHNIQUE_TIMED, *model)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (m["compile_graphs"], m["compile_graph_breaks"], m["compiled_steps_timed"]) == (2, 1, 2)
    assert "compiled code ran in 2 of 2 timed steps; 2 graphs, 1 graph break" in result.stdout
