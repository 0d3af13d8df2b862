"""A small network written as a PyTorch user writes one, for `epochcast import --torch`'s test:
a residual block, squeeze-and-excitation and stochastic depth as torchvision writes them."""
import torch
from torch import nn
import torch.nn.functional as F
import torchvision


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.squeeze = nn.AdaptiveAvgPool2d(1)
        self.reduce = nn.Conv2d(channels, channels // 4, 1)
        self.expand = nn.Conv2d(channels // 4, channels, 1)
        self.drop_path = torchvision.ops.StochasticDepth(0.1, "row")

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        gate = torch.sigmoid(self.expand(F.relu(self.reduce(self.squeeze(out)))))
        out = self.drop_path(out * gate)
        return F.relu(out + x)


class SmallNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.blocks = nn.Sequential(Block(16), Block(16))
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.Linear(16 * 14 * 14, classes))

    def forward(self, x):
        return self.head(self.pool(self.blocks(self.stem(x))))


def build(classes=10):
    return SmallNet(classes)
