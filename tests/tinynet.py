"""The smallest model a test compiles: one convolution and a linear head (torch.compile's cold start in seconds)."""

from torch import nn


def build(num_classes):
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(8, num_classes),
    )  # fmt: skip
