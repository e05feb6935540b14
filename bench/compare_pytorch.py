#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Training throughput and peak memory of dtnn and PyTorch on the same models, side by side in one run.

For each model, both train the same architecture at the same batch size and thread count with SGD + momentum
for the same number of steps; each run's first epoch is a warm-up and is not timed. Runs alternate between
the two so that machine noise hits both; medians are reported with the ratio dtnn / PyTorch. Peak memory is each
process's peak resident set (ru_maxrss of the child, as /usr/bin/time -v reports it: the whole process, runtime
and libraries included).

  bench/compare_pytorch.py [--models simplecnn,resnet18_cifar10,vgg16_cifar10,resnet50_imagenet] [--runs 3]
                           [--steps 20] [--batch 64] [--imagenet-batch 16] [--threads 2] [--data synthetic|real]
                           [--precision fp32,bf16] [--peer best|as-was] [--torch-allocator auto|jemalloc|...]
                           [--torch-memory-format auto|contiguous|channels_last]
                           [--max-isa avx512|avx2|generic] [--json FILE]

--data real trains simplecnn on Fashion-MNIST (the other models always use synthetic data: CIFAR shape, or
224x224 with 1000 classes for the ImageNet models, at --imagenet-batch).
PyTorch's CPU back end is Debian's python3-torch: oneDNN convolutions, ATen's vectorised operators, and the
system's libblas.so.3 (BLIS or OpenBLAS, whichever Debian's alternative points to) for the dense layers.

--peer best (the default) runs PyTorch as its CPU tuning guide says a user should (bench/pytorch_peer.py): an
allocator that keeps its memory (jemalloc, else tcmalloc, else glibc's malloc with tunables that stop it from
returning large blocks to the kernel: glibc's default page-faults PyTorch's tensors in again every step), its BLAS
in the configuration dtnn found best (BLIS_ARCH_TYPE), and channels-last where it is faster (measured per model
and precision by a short run of each layout before the timed runs), and ATen's AVX-512 kernels where they are
faster than its own choice (PyTorch 1.13 picks AVX2 on AMD's AVX-512 CPUs; probed with the layout). --peer as-was
is the benchmark before issue 37: glibc's default malloc, NCHW, the BLAS as installed. The header, the table and
the JSON say how PyTorch ran, with its minor page faults per timed step.

--precision fp32,bf16 runs each model in each precision: dtnn --precision bf16 against PyTorch's bf16 autocast
(torch.autocast("cpu", torch.bfloat16): convolutions and matmuls in bf16, the rest in fp32). An entry OURS:THEIRS
pairs different precisions: fp32:bf16 is dtnn in fp32 against PyTorch's bf16 autocast; bf16-amx (dtnn's AMX
kernels) and bf16-emulated run against PyTorch's bf16.

--max-isa caps the instruction set of both sides: dtnn through DTNN_MAX_CPU_ISA (its kernels and BLIS), PyTorch
through ATEN_CPU_CAPABILITY (avx2, or default for generic), DNNL_MAX_CPU_ISA (AVX512_CORE, AVX2, SSE41) and, below
avx512, its BLAS: BLIS_ARCH_TYPE set to the configuration dtnn ran where libblas.so.3 is BLIS, OPENBLAS_CORETYPE
(Haswell, Prescott) where it is OpenBLAS. At avx512 ATen is left as it is. A variable already in the environment
is kept.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pytorch_peer  # noqa: E402

TORCH_CHILD = r"""
import sys, time, gzip, resource, contextlib, numpy as np, torch, torch.nn as nn
model_name, steps, batch, threads, data = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
layout, precision = sys.argv[6], sys.argv[7]
torch.set_num_threads(threads)
torch.manual_seed(0)

def vgg16():
    cfg = [64, 64, 'M', 128, 128, 'M', 256, 256, 256, 'M', 512, 512, 512, 'M', 512, 512, 512, 'M']
    layers, c = [], 3
    for v in cfg:
        if v == 'M':
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU()]
            c = v
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(512, 10))

class Basic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False); self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False); self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))

def resnet18():
    layers, c = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()], 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        layers += [Basic(c, cout, stride), Basic(cout, cout, 1)]
        c = cout
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10))

class Bottleneck(nn.Module):  # torchvision's resnet50 (v1.5: the stride on the 3x3 convolution)
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = 4 * width
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False); self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False); self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False); self.bn3 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        return torch.relu(self.bn3(self.conv3(y)) + self.shortcut(x))

def resnet50():
    layers, c = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)], 64
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for b in range(blocks):
            layers.append(Bottleneck(c, width, stride if b == 0 else 1))
            c = 4 * width
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000))

def simplecnn():
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))

m = {'simplecnn': simplecnn, 'resnet18_cifar10': resnet18, 'vgg16_cifar10': vgg16, 'resnet50_imagenet': resnet50}[model_name]()
shape = {'simplecnn': (1, 28, 28), 'resnet50_imagenet': (3, 224, 224)}.get(model_name, (3, 32, 32))
classes = 1000 if model_name.endswith('_imagenet') else 10
n = steps * batch
if data == 'real':
    d = '/usr/share/datasets/fashion-mnist/'
    x = torch.tensor(np.frombuffer(gzip.open(d + 'train-images-idx3-ubyte.gz').read(), np.uint8, offset=16)
                     .reshape(-1, 1, 28, 28).astype(np.float32) / 255)
    y = torch.tensor(np.frombuffer(gzip.open(d + 'train-labels-idx1-ubyte.gz').read(), np.uint8, offset=8).astype(np.int64))
else:
    # Samples for the steps (at least 1024 of the small shapes; ImageNet's are 0.6 MB each, dtnn's benchmark makes
    # as many).
    count = max(n, 1024) if classes == 10 else n + batch
    x, y = torch.rand(count, *shape), torch.randint(0, classes, (count,))
if layout == 'channels_last':
    m = m.to(memory_format=torch.channels_last)
    x = x.contiguous(memory_format=torch.channels_last)
opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
m.train()
def compute():
    # bf16 autocast: PyTorch's mixed precision on CPU (convolutions and matmuls in bf16, weights and the loss fp32).
    return torch.autocast('cpu', dtype=torch.bfloat16) if precision == 'bf16' else contextlib.nullcontext()
def epoch():
    perm = torch.randperm(x.shape[0])
    for s in range(steps):
        idx = perm[(s * batch) % (x.shape[0] - batch):][:batch]
        xb, yb = x[idx], y[idx]   # a real loop gathers its batch every step too
        if layout == 'channels_last':
            xb = xb.contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        with compute():
            loss = nn.functional.cross_entropy(m(xb), yb)
        loss.backward()
        opt.step()
epoch()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
t = time.perf_counter()
epoch()
seconds = time.perf_counter() - t
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
capability = [l for l in torch.__config__.show().splitlines() if 'CPU capability usage' in l]
print(capability[0].split(':', 1)[1].strip() if capability else 'unknown')
print(faults / steps)
print(steps * batch / seconds)
"""

# --max-isa: what caps each library of the PyTorch side (see the docstring); None leaves the variable alone.
ATEN_CAPABILITY = {"avx512": None, "avx2": "avx2", "generic": "default"}
DNNL_ISA = {"avx512": "AVX512_CORE", "avx2": "AVX2", "generic": "SSE41"}
OPENBLAS_CORE = {"avx512": None, "avx2": "Haswell", "generic": "Prescott"}


def torch_env(max_isa, dtnn_engine, peer, allocator):
    """The PyTorch child's environment (dtnn_engine: dtnn's start-up line, which names its BLIS configuration),
    and the words saying what was set."""
    env = dict(os.environ)
    said = []

    def put(name, value):
        if value is None:
            return
        if name not in env:
            env[name] = value
        said.append(f"{name}={env[name]}")

    blas = os.path.realpath(pytorch_peer.LIBBLAS)
    if max_isa:
        put("ATEN_CPU_CAPABILITY", ATEN_CAPABILITY[max_isa])
        put("DNNL_MAX_CPU_ISA", DNNL_ISA[max_isa])
        if "openblas" in blas:
            put("OPENBLAS_CORETYPE", OPENBLAS_CORE[max_isa])
    if peer == "best" or (max_isa and max_isa != "avx512"):
        # dtnn's start-up line names the BLIS configuration it found best for this CPU (docs/design.md, BLIS), or
        # the one the cap allows.
        for name, value in pytorch_peer.blas_env(dtnn_engine).items():
            put(name, value)
    if not max_isa and peer != "best":
        said = [f"{n}={env[n]}" for n in ("ATEN_CPU_CAPABILITY", "DNNL_MAX_CPU_ISA", "OPENBLAS_CORETYPE",
                                          "BLIS_ARCH_TYPE") if n in env]
    alloc_said = "glibc malloc as installed"
    if peer == "best":
        extra, alloc_said = pytorch_peer.allocator_env(allocator, env)
        env.update(extra)
    return env, f"BLAS {blas}; " + (", ".join(said) if said else "no BLAS or instruction-set variable set") + \
        f"; allocator: {alloc_said}"


# The ATen capabilities that --peer best tries on an AVX-512 CPU: its own choice, and AVX-512.
ATEN_CHOICES = ("as-set", "avx512")


def cpu_has(flag):
    with open("/proc/cpuinfo") as f:
        return any(line.startswith("flags") and flag in line.split() for line in f)


def aten_env(env, capability):
    """env with ATEN_CPU_CAPABILITY=capability (as-set: env unchanged)."""
    return env if capability == "as-set" else dict(env, ATEN_CPU_CAPABILITY=capability)


def run_child(cmd, env=None):
    """Runs cmd to completion; returns its stdout and its peak resident set in MiB (the child's own ru_maxrss)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd[:4])} ... exited with {child.returncode}:\n{err.read().decode(errors='replace')}")
        out.seek(0)
        return out.read().decode(), usage.ru_maxrss / 1024.0  # Linux: KiB


def run_dtnn(exe, model, steps, batch, threads, tiles, data, conv, extra, max_isa, precision):
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        dataset = ["--dataset", "fashion-mnist"] if data == "real" and model == "simplecnn" else \
                  ["--dataset", "synthetic", "--synthetic-samples",
                   str(max(steps * batch, 1024) if not model.endswith("_imagenet") else (steps + 1) * batch)]
        # fp32 is dtnn's default: leaving the option out keeps the command of builds that predate it.
        precision_args = [] if precision == "fp32" else ["--precision", precision]
        cmd = [exe, "benchmark", "--model", model, *dataset, "--epochs", "2", "--steps-per-epoch", str(steps),
               "--batch-size", str(batch), "--workers", str(threads), "--tiles", str(tiles), "--lr", "0.01",
               "--momentum", "0.9", "--conv", conv, *precision_args, "--quiet", "--report", report.name, *extra]
        env = dict(os.environ, STARPU_SILENT="1")
        if max_isa:
            env["DTNN_MAX_CPU_ISA"] = max_isa
        _, peak = run_child(cmd, env=env)
        with open(report.name) as f:
            doc = json.load(f)
    return doc["images_per_second_after_first_epoch"], peak, doc["engine"]


def run_torch(model, steps, batch, threads, data, env, layout, precision):
    out, peak = run_child(["/usr/bin/python3", "-c", TORCH_CHILD, model, str(steps), str(batch), str(threads),
                           "real" if data == "real" and model == "simplecnn" else "synthetic", layout, precision],
                          env=env)
    lines = out.strip().splitlines()
    return float(lines[-1]), peak, lines[-3], float(lines[-2])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="simplecnn,resnet18_cifar10,vgg16_cifar10,resnet50_imagenet")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--imagenet-batch", type=int, default=16, help="batch of the *_imagenet models (224x224)")
    ap.add_argument("--imagenet-steps", type=int, default=5, help="timed steps of the *_imagenet models")
    ap.add_argument("--dtnn-args", default="", help="more options for dtnn benchmark, e.g. '--host-allocator pool'")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tiles", type=int, default=2)
    ap.add_argument("--conv", default="winograd", help="dtnn --conv (dtnn's default: winograd)")
    ap.add_argument("--data", choices=["synthetic", "real"], default="synthetic")
    ap.add_argument("--dtnn", default=os.path.join(HERE, "..", "build", "bin", "dtnn"))
    ap.add_argument("--precision", default="fp32",
                    help="comma-separated: fp32, bf16, bf16-amx (dtnn --precision against PyTorch's bf16 autocast)")
    ap.add_argument("--peer", choices=["best", "as-was"], default="best",
                    help="best: PyTorch as its tuning guide says (allocator, BLAS configuration, channels-last where "
                         "faster); as-was: glibc's malloc, NCHW, the BLAS as installed (the benchmark before issue 37)")
    ap.add_argument("--torch-allocator", choices=["auto", "jemalloc", "tcmalloc", "glibc-tunables"], default="auto",
                    help="--peer best's allocator (auto: jemalloc, else tcmalloc, else glibc's tunables)")
    ap.add_argument("--torch-memory-format", choices=["auto", "contiguous", "channels_last"], default="auto",
                    help="--peer best's layout (auto: the faster of a short run of each, per model and precision)")
    ap.add_argument("--max-isa", type=str.lower, choices=["avx512", "avx2", "generic"],
                    help="cap both sides at this instruction set (dtnn: DTNN_MAX_CPU_ISA; PyTorch: ATEN_CPU_CAPABILITY, "
                         "DNNL_MAX_CPU_ISA and its BLAS's variable)")
    ap.add_argument("--json", help="also write the results to this file")
    a = ap.parse_args()
    precisions = []
    for entry in a.precision.split(","):
        pair = entry.split(":")
        # dtnn's bf16 kinds (bf16-amx: AMX's TDPBF16PS) all run against PyTorch's bf16 autocast.
        ours = pair[0]
        theirs = pair[1] if len(pair) == 2 else ("fp32" if ours == "fp32" else "bf16")
        if (len(pair) > 2 or ours not in ("fp32", "bf16", "bf16-amx", "bf16-emulated")
                or theirs not in ("fp32", "bf16")):
            ap.error(f"--precision: '{entry}', expected fp32, bf16, bf16-amx, bf16-emulated or DTNN:PYTORCH such as "
                     f"fp32:bf16 (comma-separated)")
        precisions.append((ours, theirs))

    import torch  # noqa: E402  (only for its version string)
    results, engine, torch_said, capability = {}, "", "", ""
    med = statistics.median
    for model in a.models.split(","):
        imagenet = model.endswith("_imagenet")
        steps = a.imagenet_steps if imagenet else a.steps if model != "simplecnn" else max(a.steps, 150)
        batch = a.imagenet_batch if imagenet else a.batch
        for ours_precision, precision in precisions:
            label = precision if ours_precision == precision else f"{ours_precision}:{precision}"
            key = model if label == "fp32" else f"{model}:{label}"
            layout, aten, probe = "contiguous", "as-set", {}
            if a.peer == "best":
                layout = a.torch_memory_format
                # ATen picks AVX2 on some AVX-512 CPUs (1.13 on this Zen 5); its AVX-512 kernels may be faster.
                if not a.max_isa or a.max_isa == "avx512":
                    aten = "auto" if "ATEN_CPU_CAPABILITY" not in os.environ and cpu_has("avx512f") else "as-set"
            ours, theirs, our_rss, their_rss, faults = [], [], [], [], []
            for r in range(a.runs):
                ips, rss, engine = run_dtnn(a.dtnn, model, steps, batch, a.threads, a.tiles, a.data, a.conv,
                                            a.dtnn_args.split(), a.max_isa, ours_precision)
                ours.append(ips)
                our_rss.append(rss)
                env, torch_said = torch_env(a.max_isa, engine, a.peer, a.torch_allocator)
                if layout == "auto" or aten == "auto":
                    # A short run of each layout and ATen capability, once per model and precision; the fastest
                    # is timed.
                    probe_steps = max(2, min(steps, 3 if imagenet else 10))
                    for lay in (("contiguous", "channels_last") if layout == "auto" else (layout,)):
                        for cap in (ATEN_CHOICES if aten == "auto" else (aten,)):
                            probe[f"{lay}/{cap}"] = run_torch(model, probe_steps, batch, a.threads, a.data,
                                                              aten_env(env, cap), lay, precision)[0]
                    layout, aten = max(probe, key=probe.get).split("/")
                    print(f"{key}: PyTorch probe ({probe_steps} steps): " +
                          ", ".join(f"{k} {v:.1f} images/s" for k, v in probe.items()) +
                          f" -> {layout}/{aten}", flush=True)
                env = aten_env(env, aten)
                ips, rss, capability, fault = run_torch(model, steps, batch, a.threads, a.data, env, layout,
                                                        precision)
                theirs.append(ips)
                their_rss.append(rss)
                faults.append(fault)
                print(f"{key} run {r + 1}: dtnn {ours[-1]:9.1f} images/s {our_rss[-1]:7.0f} MiB   "
                      f"PyTorch {theirs[-1]:9.1f} images/s {their_rss[-1]:7.0f} MiB ({fault:.0f} page faults/step)",
                      flush=True)
            results[key] = {"model": model, "precision": label, "dtnn_precision": ours_precision,
                            "pytorch_precision": precision, "dtnn": ours, "pytorch": theirs, "steps": steps,
                            "batch": batch, "ratio": med(ours) / med(theirs),
                            "dtnn_peak_rss_mib": our_rss, "pytorch_peak_rss_mib": their_rss,
                            "peak_rss_ratio": med(our_rss) / med(their_rss),
                            "pytorch_layout": layout, "pytorch_aten_capability": capability,
                            "pytorch_probe": probe,
                            "pytorch_minor_faults_per_step": faults}
    print(f"\n{a.threads} threads each, medians of {a.runs} runs, first epoch untimed; peak RSS of each process")
    options = f"--conv {a.conv}, --tiles {a.tiles} {a.dtnn_args}".rstrip()
    print(f"dtnn: {engine}; {options}{'; DTNN_MAX_CPU_ISA=' + a.max_isa if a.max_isa else ''}")
    print(f"PyTorch {torch.__version__} (--peer {a.peer}): {torch_said}\n")
    print(f"{'model':20} {'prec':>9} {'batch':>5} {'steps':>5} {'dtnn img/s':>11} {'PyTorch img/s':>14} {'ratio':>6} "
          f"{'dtnn MiB':>9} {'PyTorch MiB':>12} {'ratio':>6}  PyTorch layout, ATen, faults/step")
    for key, r in results.items():
        print(f"{r['model']:20} {r['precision']:>9} {r['batch']:5d} {r['steps']:5d} {med(r['dtnn']):11.1f} "
              f"{med(r['pytorch']):14.1f} {r['ratio']:6.2f} {med(r['dtnn_peak_rss_mib']):9.0f} "
              f"{med(r['pytorch_peak_rss_mib']):12.0f} {r['peak_rss_ratio']:6.2f}  "
              f"{r['pytorch_layout']}, {r['pytorch_aten_capability']}, "
              f"{med(r['pytorch_minor_faults_per_step']):.0f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": results, "threads": a.threads, "engine": engine, "dtnn_args": a.dtnn_args,
                       "max_isa": a.max_isa, "peer": a.peer,
                       "pytorch": {"version": torch.__version__,
                                   "environment": torch_said}},
                      f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
