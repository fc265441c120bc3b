"""train_fused.py: no fused step is one line."""

import pytest
import torch

import checks


def test_no_fused_step_is_one_line(monkeypatch, capsys):
    def refuses(*args, fused=None, **kwargs):
        raise RuntimeError("`fused=True` requires all the params to be floating point Tensors of supported devices")

    monkeypatch.setattr(torch.optim, "AdamW", refuses)
    with pytest.raises(SystemExit) as done:
        checks.check_fused("adamw", torch.device("cpu"))
    said = capsys.readouterr().err.strip()
    assert done.value.code == 2 and len(said.splitlines()) == 1
    assert f"torch {torch.__version__} has no fused refuses step on the cpu" in said and "supported devices" in said
    checks.check_fused("sgd", torch.device("cpu"))  # this torch has one: no error
