#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Logits of the CIFAR ResNet-18 (the kuangliu/pytorch-cifar definition, dtnn's resnet18_cifar10) in PyTorch, eval
mode, with weights from a state_dict file: the other side of the interchange test.

  resnet18_cifar10_logits.py STATE_DICT.pt INPUT.f32 N OUTPUT.f32
INPUT.f32 holds N x 3 x 32 x 32 float32 values; OUTPUT.f32 receives N x 10 logits.
"""
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            layers.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.linear = nn.Linear(512, classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.linear(out)


def main():
    state_file, input_file, n, output_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    model = ResNet18()
    model.load_state_dict(torch.load(state_file), strict=True)
    model.eval()
    x = torch.from_numpy(np.fromfile(input_file, dtype=np.float32).reshape(n, 3, 32, 32))
    with torch.no_grad():
        model(x).numpy().astype(np.float32).tofile(output_file)


if __name__ == "__main__":
    main()
