"""The smallest model, which the tests compile and learn with (helpers.TINY_MODEL, LEARN): two small convolution
blocks in one stage (which train_checkpoint.py and train_fsdp.py find) and a linear head. torch.compile's cold start
takes seconds with it, not a minute. Its forward is code of this file: under DDP, whose forward breaks the compiled
graph, a bare nn.Sequential here compiled nothing (0 graphs under train_all.py), a model with a forward of its own
compiles; TwoGraphs breaks its graph on purpose."""

import torch
from torch import nn


def block(channels_in, channels_out):
    return nn.Sequential(nn.Conv2d(channels_in, channels_out, 3, padding=1, bias=False), nn.BatchNorm2d(channels_out),
                         nn.ReLU())  # fmt: skip


class TinyNet(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.stage = nn.Sequential(block(3, 16), block(16, 16))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, num_classes))

    def forward(self, x):
        return self.head(self.stage(x))


class TwoGraphs(TinyNet):
    """TinyNet whose forward breaks torch.compile's graph in two (torch._dynamo.graph_break)."""

    def forward(self, x):
        x = self.stage(x)
        torch._dynamo.graph_break()
        return self.head(x)


def build(num_classes):
    return TinyNet(num_classes)


def two_graphs(num_classes):
    return TwoGraphs(num_classes)
