#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's side of bench/gpu_check.sh: torchvision's resnet50 trained on synthetic ImageNet-shaped data on one
GPU, fp32 (TF32 off, as dtnn's cuDNN/cuBLAS calls), SGD with momentum, the same steps as dtnn: the first
`warmup` steps are not timed (dtnn's first epoch is not either). Prints one JSON line.

  bench/gpu_pytorch.py [--batch 128] [--steps 20] [--warmup 10] [--model resnet50]
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torchvision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--model", default="resnet50")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = getattr(torchvision.models, a.model)(num_classes=1000).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    # Synthetic data made on the host and copied each step, as dtnn loads each batch from host memory.
    x_host = torch.randn(a.batch, 3, 224, 224).pin_memory()
    y_host = torch.randint(0, 1000, (a.batch,)).pin_memory()

    def step():
        x = x_host.to(dev, non_blocking=True)
        y = y_host.to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    timed = a.steps - a.warmup
    for _ in range(timed):
        loss = step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    print(json.dumps({"framework": "pytorch " + torch.__version__, "model": a.model, "batch": a.batch,
                      "timed_steps": timed, "seconds": seconds, "images_per_second": timed * a.batch / seconds,
                      "loss": float(loss), "gpu": torch.cuda.get_device_name(0)}))


if __name__ == "__main__":
    main()
