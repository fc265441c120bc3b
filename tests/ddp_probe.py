"""Run train_ddp.py's main() under torchrun, then save what each rank did, for the tests.

    torchrun --standalone --nproc-per-node 2 tests/ddp_probe.py OUT_DIR [train_ddp.py flags]

Writes OUT_DIR/rank<R>.pt: the trained weights of this rank's model and, per epoch, the
training-set indices its sampler handed out. Nothing in train_ddp.py is changed; the probe only
wraps the DDP class and the sampler it uses.
"""

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import train_ddp  # noqa: E402

models, epochs = [], []


class RecordingDDP(train_ddp.DDP):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        models.append(self)


class RecordingSampler(train_ddp.DistributedSampler):
    def __iter__(self):
        indices = list(super().__iter__())
        epochs.append(indices)
        return iter(indices)


train_ddp.DDP = RecordingDDP
train_ddp.DistributedSampler = RecordingSampler
out = Path(sys.argv.pop(1))
sys.argv[0] = "train_ddp.py"
train_ddp.main()
state = {name: tensor.detach().cpu() for name, tensor in models[0].module.state_dict().items()}
torch.save({"state": state, "epochs": epochs}, out / f"rank{os.environ['RANK']}.pt")
