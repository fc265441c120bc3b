"""The smallest model, which the tests compile and learn with (helpers.TINY_MODEL, LEARN): two small convolution
blocks in one stage (which train_checkpoint.py and train_fsdp.py find) and a linear head. torch.compile's cold start
takes seconds with it, not a minute."""

from torch import nn


def block(channels_in, channels_out):
    return nn.Sequential(nn.Conv2d(channels_in, channels_out, 3, padding=1, bias=False), nn.BatchNorm2d(channels_out),
                         nn.ReLU())  # fmt: skip


def build(num_classes):
    stage = nn.Sequential(block(3, 16), block(16, 16))
    return nn.Sequential(stage, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, num_classes))
