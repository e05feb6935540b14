#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's side of bench/gpu_check.sh: torchvision's resnet50 trained on synthetic ImageNet-shaped data on one
GPU, fp32 (TF32 off, as dtnn's cuDNN/cuBLAS calls; --tf32: on for cuDNN and matmuls, as dtnn --precision tf32),
SGD with momentum, the same steps as dtnn: the first `warmup` steps are not timed (dtnn's first epoch is not
either). Prints one JSON line; where PyTorch, torchvision or a GPU is missing, a line {"skipped": "<why>"} and exit
status 0 (the check then skips this part).

  bench/gpu_pytorch.py [--batch 128] [--steps 20] [--warmup 10] [--model resnet50] [--device cuda] [--tf32]
"""
import argparse
import json
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--model", default="resnet50")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="cpu only to rehearse the check where there is no GPU")
    p.add_argument("--tf32", action="store_true",
                   help="torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32 on")
    a = p.parse_args()
    if a.warmup >= a.steps:
        p.error(f"--warmup {a.warmup}, expected fewer than --steps {a.steps}")
    try:
        import torch
        import torch.nn as nn
        import torchvision
    except Exception as e:  # any import failure means: no usable PyTorch here
        print(json.dumps({"skipped": f"PyTorch or torchvision cannot be imported: {type(e).__name__}: {e}"}))
        return
    if a.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"skipped": f"torch {torch.__version__} sees no GPU (torch.cuda.is_available() is False)"}))
        return
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.backends.cudnn.benchmark = True
    dev = torch.device(a.device)
    torch.manual_seed(0)
    model = getattr(torchvision.models, a.model)(num_classes=1000).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    # Synthetic data made on the host and copied each step, as dtnn loads each batch from host memory.
    x_host = torch.randn(a.batch, 3, 224, 224)
    y_host = torch.randint(0, 1000, (a.batch,))
    if a.device == "cuda":
        x_host, y_host = x_host.pin_memory(), y_host.pin_memory()

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize()

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
    sync()
    t0 = time.perf_counter()
    timed = a.steps - a.warmup
    for _ in range(timed):
        loss = step()
    sync()
    seconds = time.perf_counter() - t0
    print(json.dumps({"framework": "pytorch " + torch.__version__, "torchvision": torchvision.__version__,
                      "model": a.model, "batch": a.batch, "timed_steps": timed, "seconds": seconds,
                      "images_per_second": timed * a.batch / seconds, "loss": float(loss), "device": a.device,
                      "tf32": a.tf32,
                      "gpu": torch.cuda.get_device_name(0) if a.device == "cuda" else None,
                      "cudnn": torch.backends.cudnn.version() if a.device == "cuda" else None}))


if __name__ == "__main__":
    main()
