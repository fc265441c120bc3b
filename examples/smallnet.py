"""Your own model: a small residual CNN in plain PyTorch, as `--model FILE.py:FACTORY` takes it.

    python train.py --model examples/smallnet.py:build
    python train_amp.py --model examples/smallnet.py:build --data ~/my_photos
    make bench ARGS="--model examples/smallnet.py:build"

The scripts call build(num_classes) and train the module it returns as it is (no change to its stem):
it takes a batch of images, (N, 3, H, W), and returns one score per class, (N, num_classes).
`--model package.module:build` finds the same function in an importable module.
train_checkpoint.py checkpoints layer1..layer3: nn.Sequential containers of blocks, as in ResNet.
"""

import torch
from torch import nn


class Block(nn.Module):
    """Two 3x3 convolutions and a shortcut around them (a 1x1 convolution where the shape changes)."""

    def __init__(self, channels_in, channels_out, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels_out)
        self.conv2 = nn.Conv2d(channels_out, channels_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels_out)
        self.shortcut = nn.Identity()
        if stride != 1 or channels_in != channels_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(channels_in, channels_out, 1, stride, bias=False), nn.BatchNorm2d(channels_out)
            )

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class SmallNet(nn.Module):
    """A stem, three stages of two blocks (each stage halves the resolution and doubles the width), a linear head.
    Any image size works: the head pools whatever is left."""

    def __init__(self, num_classes, width=32):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.layer1 = nn.Sequential(Block(width, width), Block(width, width))
        self.layer2 = nn.Sequential(Block(width, 2 * width, stride=2), Block(2 * width, 2 * width))
        self.layer3 = nn.Sequential(Block(2 * width, 4 * width, stride=2), Block(4 * width, 4 * width))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * width, num_classes))

    def forward(self, x):
        return self.head(self.layer3(self.layer2(self.layer1(self.stem(x)))))


def build(num_classes):
    """The factory: --model examples/smallnet.py:build calls it with the number of classes in the data."""
    return SmallNet(num_classes)


def tiny(num_classes):
    """A quarter of the width (8 to 32 channels): the model of python -m bench --to-accuracy on a CPU, where
    an epoch of the hard data takes seconds and accuracy still climbs over several epochs."""
    return SmallNet(num_classes, width=8)
