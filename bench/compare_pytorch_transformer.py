#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gpt_char in dtnn and in PyTorch 1.13, side by side in one run: the training loss of every step from identical
weights on identical batches, the validation bits per character after a fixed budget of steps (with the unigram
and bigram baselines beside them), then training tokens/s and peak memory.

  /usr/bin/python3 bench/compare_pytorch_transformer.py [--parts curve,speed] [--steps 50] [--budget 300]
      [--batch 16] [--lr 1e-3] [--runs 3] [--threads 2] [--speed gpt_char,gpt2_small:256] [--out DIR]

Curve (--parts curve). The corpus is `dtnn convert --dataset text`'s token file (Debian's fortunes by default:
io/text.hpp's split, every tenth fortune to validation); both sides cut it into windows of context + 1 bytes at
stride context, as io/dataset.hpp's token_windows does. PyTorch draws the initial weights
(tools/gpt_reference.py, the module of dtnn's names and shapes), tools/pytorch_to_checkpoint.py moves them into a
dtnn checkpoint, and `dtnn train --resume` starts from it. Each epoch is one step (--steps-per-epoch 1), so that
dtnn's --history holds every step's loss; an epoch's batch is the first --batch windows of that epoch's
permutation (models/training.cpp epoch_order: std::mt19937_64 seeded with seed ^ (0x9E3779B97F4A7C15 (epoch + 1)),
Fisher-Yates from the last index down, Rng::below's rejection sampling), which this script draws the same way for
PyTorch. Both train with AdamW (weight decay 0.1 on the matrices; biases, LayerNorms and embeddings undecayed),
gradients clipped to norm 1, a constant learning rate, dropout 0, mean cross-entropy over the batch's tokens. The
check: every one of the first --steps losses within 1e-3 relative of PyTorch's; after --budget steps, dtnn's
validation bits per character (its test evaluation of the whole validation split) within 0.02 of PyTorch's.

Speed (--parts speed). Training tokens/s of `dtnn benchmark` against a PyTorch loop of the same model, batch,
optimizer and thread count, runs interleaved, medians of --runs, each side's first epoch (a warm-up) untimed; peak
memory is each process's peak resident set. An entry MODEL:SEQ trains the model at sequences of SEQ tokens
(`dtnn --sequence`; PyTorch feeds the same) on synthetic tokens; gpt_char trains on the corpus. PyTorch runs at
its best (bench/pytorch_peer.py: an allocator that keeps its memory, BLIS_ARCH_TYPE set to the configuration dtnn
chose); the output says what was set.

Writes DIR/transformer.json and DIR/transformer.md (the tables). Run with /usr/bin/python3 (torch and h5py).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np
import torch
from torch.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import compare_pytorch  # noqa: E402
from gpt_reference import CONFIGS, TransformerLM  # noqa: E402

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
WEIGHT_DECAY = 0.1
CLIP = 1.0
BETAS = (0.9, 0.99)


class Mt19937_64:
    """std::mt19937_64, whose outputs the C++ standard fixes bit for bit."""

    def __init__(self, seed):
        self.mt = [seed & MASK]
        for i in range(1, 312):
            self.mt.append((6364136223846793005 * (self.mt[-1] ^ (self.mt[-1] >> 62)) + i) & MASK)
        self.index = 312

    def _twist(self):
        mt = self.mt
        for i in range(312):
            x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
            mt[i] = mt[(i + 156) % 312] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
        self.index = 0

    def __call__(self):
        if self.index >= 312:
            self._twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        return (y ^ (y >> 43)) & MASK

    def below(self, n):
        limit = MASK - (MASK % n)
        v = self()
        while v >= limit:
            v = self()
        return v % n


def epoch_batch(n, batch, seed, epoch):
    """The windows of epoch `epoch`'s only step: the first `batch` of its permutation (dtnn's epoch_order)."""
    rng = Mt19937_64(seed ^ ((GOLDEN * (epoch + 1)) & MASK))
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng.below(i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm[:batch]


def windows(tokens, seq):
    """Inputs and targets [count, seq] of the windows at stride seq (io::token_windows)."""
    count = (len(tokens) - 1) // seq
    starts = np.arange(count) * seq
    idx = starts[:, None] + np.arange(seq + 1)[None, :]
    w = tokens[idx].astype(np.int64)
    return torch.from_numpy(w[:, :-1].copy()), torch.from_numpy(w[:, 1:].copy())


def run(cmd, env=None):
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\nexited with {done.returncode}:\n{done.stdout[-3000:]}\n"
                           f"{done.stderr[-3000:]}")
    return done.stdout


def param_groups(model):
    """AdamW's groups as dtnn's --no-weight-decay bias,norm,embedding: decay on the matrices of the linear and
    attention layers only."""
    decay, rest = [], []
    for name, p in model.named_parameters():
        table = name.startswith("wte.") or name.startswith("wpe.")
        (decay if p.dim() >= 2 and not table else rest).append(p)
    return [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": rest, "weight_decay": 0.0}]


def bits_per_char(model, inputs, targets, batch=32):
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(inputs), batch):
            logits = model(inputs[i:i + batch])
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets[i:i + batch].reshape(-1),
                                     reduction="sum").item()
            count += targets[i:i + batch].numel()
    model.train()
    return total / count / math.log(2)


def baselines(train_tokens, targets, inputs):
    """Bits per character of the validation targets under the training split's byte frequencies (unigram) and
    byte-pair frequencies given the previous byte (bigram), both with add-one smoothing."""
    uni = np.bincount(train_tokens, minlength=256).astype(np.float64) + 1.0
    uni /= uni.sum()
    pairs = np.zeros((256, 256))
    np.add.at(pairs, (train_tokens[:-1], train_tokens[1:]), 1.0)
    pairs += 1.0
    pairs /= pairs.sum(axis=1, keepdims=True)
    t = targets.numpy().reshape(-1)
    prev = inputs.numpy().reshape(-1)
    return float(-np.log2(uni[t]).mean()), float(-np.log2(pairs[prev, t]).mean())


def curve(a, out):
    cfg = CONFIGS["gpt_char"]
    seq = cfg["context"]
    work = tempfile.mkdtemp(prefix="dtnn-transformer-")
    corpus = os.path.join(work, "corpus.h5")
    data_args = ["--dataset", "text"] + (["--data-dir", a.data_dir] if a.data_dir else [])
    print(run([a.dtnn, "convert", *data_args, "--output", corpus]).strip(), flush=True)
    with h5py.File(corpus, "r") as f:
        train_tokens = f["train/tokens"][()].astype(np.int64)
        test_tokens = f["test/tokens"][()].astype(np.int64)
    train_x, train_y = windows(train_tokens, seq)
    test_x, test_y = windows(test_tokens, seq)
    print(f"corpus: {len(train_tokens)} training and {len(test_tokens)} validation bytes, {len(train_x)} and "
          f"{len(test_x)} windows of {seq} + 1", flush=True)

    # The initial weights: PyTorch's draw, moved into a dtnn checkpoint shaped like one of dtnn's own.
    torch.manual_seed(a.seed)
    model = TransformerLM(**cfg)
    state = os.path.join(work, "init.pt")
    torch.save(model.state_dict(), state)
    like_dir = os.path.join(work, "like")
    run([a.dtnn, "train", "--model", "gpt_char", *data_args, "--batch-size", "2", "--steps-per-epoch", "1",
         "--no-test", "--quiet", "--checkpoint-dir", like_dir, "--workers", str(a.threads)])
    like = sorted(p for p in os.listdir(like_dir) if p.endswith(".h5"))[-1]
    init = os.path.join(work, "init.h5")
    run(["/usr/bin/python3", os.path.join(ROOT, "tools", "pytorch_to_checkpoint.py"), state, init, "--like",
         os.path.join(like_dir, like)])

    # dtnn: one step per epoch, every step's loss in the history.
    history, report = os.path.join(work, "history.json"), os.path.join(work, "report.json")
    start = time.time()
    run([a.dtnn, "train", "--model", "gpt_char", *data_args, "--resume", init, "--batch-size", str(a.batch),
         "--epochs", str(a.budget), "--steps-per-epoch", "1", "--seed", str(a.seed), "--optimizer", "adamw",
         "--lr", str(a.lr), "--beta1", str(BETAS[0]), "--beta2", str(BETAS[1]), "--weight-decay", str(WEIGHT_DECAY),
         "--no-weight-decay", "bias,norm,embedding", "--clip-grad-norm", str(CLIP), "--lr-schedule", "constant",
         "--workers", str(a.threads), "--tiles", str(a.tiles), "--history", history, "--report", report, "--quiet",
         "--checkpoint-dir", os.path.join(work, "trained")])
    dtnn_seconds = time.time() - start
    sample = run([a.dtnn, "generate", "--checkpoint", os.path.join(work, "trained"), "--prompt", "The ", "--tokens",
                  "200", "--temperature", "0.8", "--top-k", "20", "--seed", "1", "--workers", str(a.threads)])
    with open(history) as f:
        ours = [e["loss"] for e in json.load(f)]
    with open(report) as f:
        rep = json.load(f)
    ours_bpc = rep["test_bits_per_char"]

    # PyTorch: the same batches, optimizer and clipping.
    torch.set_num_threads(a.threads)
    opt = torch.optim.AdamW(param_groups(model), lr=a.lr, betas=BETAS)
    theirs = []
    start = time.time()
    for step in range(a.budget):
        idx = torch.tensor(epoch_batch(len(train_x), a.batch, a.seed, step))
        logits = model(train_x[idx])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), train_y[idx].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        theirs.append(loss.item())
    torch_seconds = time.time() - start
    theirs_bpc = bits_per_char(model, test_x, test_y)
    unigram, bigram = baselines(train_tokens, test_y, test_x)

    rel = [abs(o - t) / abs(t) for o, t in zip(ours[:a.steps], theirs[:a.steps])]
    result = {"steps": a.steps, "budget": a.budget, "batch": a.batch, "lr": a.lr, "seed": a.seed,
              "dtnn_loss": ours, "pytorch_loss": theirs, "max_relative_difference_first_steps": max(rel),
              "dtnn_validation_bpc": ours_bpc, "pytorch_validation_bpc": theirs_bpc,
              "unigram_bpc": unigram, "bigram_bpc": bigram, "dtnn_seconds": dtnn_seconds,
              "pytorch_seconds": torch_seconds, "windows": [len(train_x), len(test_x)], "dtnn_sample": sample}
    out["curve"] = result
    print(f"\nfirst {a.steps} steps: largest relative difference {max(rel):.2e} (step "
          f"{rel.index(max(rel)) + 1}); at step {a.budget}: dtnn loss {ours[-1]:.4f}, PyTorch {theirs[-1]:.4f}")
    print(f"validation bits per character after {a.budget} steps: dtnn {ours_bpc:.4f}, PyTorch {theirs_bpc:.4f} "
          f"(difference {ours_bpc - theirs_bpc:+.4f}); unigram {unigram:.4f}, bigram {bigram:.4f}")
    print(f"dtnn generate --prompt 'The ' --tokens 200 --temperature 0.8 --top-k 20 --seed 1:\n{sample}", flush=True)


TORCH_SPEED = r"""
import json, sys, time, numpy as np, torch
from torch.nn import functional as F
sys.path.insert(0, sys.argv[1])
from gpt_reference import CONFIGS, TransformerLM
name, seq, batch, steps, threads = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
torch.set_num_threads(threads)
torch.manual_seed(0)
cfg = dict(CONFIGS[name], dropout=0.0)
model = TransformerLM(**cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, cfg["vocabulary"], (steps * 2, batch, seq + 1))
def step(i):
    x, y = ids[i, :, :-1], ids[i, :, 1:]
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
for i in range(steps):  # the warm-up epoch
    step(i)
start = time.perf_counter()
for i in range(steps, 2 * steps):
    step(i)
print(steps * batch * seq / (time.perf_counter() - start))
"""


def speed(a, out):
    rows = {}
    med = statistics.median
    engine, said = "", ""
    for entry in a.speed.split(","):
        name, _, seq_text = entry.partition(":")
        seq = int(seq_text) if seq_text else CONFIGS[name]["context"]
        batch = a.speed_batch if name == "gpt_char" else a.speed_batch_large
        data = ["--dataset", "text"] if name == "gpt_char" else \
            ["--dataset", "synthetic", "--synthetic-samples", str(max(64, 2 * a.speed_steps * batch))]
        ours, theirs, our_rss, their_rss = [], [], [], []
        for r in range(a.runs):
            with tempfile.NamedTemporaryFile(suffix=".json") as report:
                cmd = [a.dtnn, "benchmark", "--model", name, *data, "--epochs", "2", "--steps-per-epoch",
                       str(a.speed_steps), "--batch-size", str(batch), "--workers", str(a.threads), "--tiles",
                       str(a.tiles), "--optimizer", "adamw", "--lr", "1e-4", "--quiet", "--report", report.name]
                if seq_text:
                    cmd += ["--sequence", str(seq)]
                _, rss = compare_pytorch.run_child(cmd, env=dict(os.environ, STARPU_SILENT="1"))
                with open(report.name) as f:
                    doc = json.load(f)
            engine = doc["engine"]
            ours.append(doc["images_per_second_after_first_epoch"] * seq)
            our_rss.append(rss)
            env, said = compare_pytorch.torch_env(None, engine, "best", "auto")
            text, rss = compare_pytorch.run_child(
                ["/usr/bin/python3", "-c", TORCH_SPEED, os.path.join(ROOT, "tools"), name, str(seq), str(batch),
                 str(a.speed_steps), str(a.threads)], env=env)
            theirs.append(float(text.strip().splitlines()[-1]))
            their_rss.append(rss)
            print(f"{entry} run {r + 1}: dtnn {ours[-1]:9.1f} tokens/s {our_rss[-1]:7.0f} MiB   PyTorch "
                  f"{theirs[-1]:9.1f} tokens/s {their_rss[-1]:7.0f} MiB", flush=True)
        rows[entry] = {"model": name, "sequence": seq, "batch": batch, "steps": a.speed_steps, "dtnn": ours,
                       "pytorch": theirs, "ratio": med(ours) / med(theirs), "dtnn_peak_rss_mib": our_rss,
                       "pytorch_peak_rss_mib": their_rss, "peak_rss_ratio": med(our_rss) / med(their_rss)}
    out["speed"] = {"rows": rows, "engine": engine, "pytorch_environment": said, "threads": a.threads}
    print(f"\n{a.threads} threads each, medians of {a.runs} runs, first epoch untimed; dtnn: {engine}")
    print(f"PyTorch {torch.__version__}: {said}")
    for entry, r in rows.items():
        print(f"{entry:16} batch {r['batch']:3d}: dtnn {med(r['dtnn']):9.1f} tokens/s, PyTorch "
              f"{med(r['pytorch']):9.1f} tokens/s, ratio {r['ratio']:.2f}; peak {med(r['dtnn_peak_rss_mib']):.0f} "
              f"MiB against {med(r['pytorch_peak_rss_mib']):.0f} MiB ({r['peak_rss_ratio']:.2f})")


def write_markdown(out, path):
    lines = [f"# gpt_char: dtnn against PyTorch {torch.__version__}", "", f"CPU: {out['cpu']}", ""]
    c = out.get("curve")
    if c:
        lines += [f"## Loss curve ({c['budget']} steps, batch {c['batch']} x 256 tokens, AdamW lr {c['lr']})", "",
                  f"- largest relative difference of the first {c['steps']} losses: "
                  f"{c['max_relative_difference_first_steps']:.2e}",
                  f"- validation bits per character: dtnn {c['dtnn_validation_bpc']:.4f}, PyTorch "
                  f"{c['pytorch_validation_bpc']:.4f} (unigram {c['unigram_bpc']:.4f}, bigram {c['bigram_bpc']:.4f})",
                  f"- seconds for the {c['budget']} steps (one step an epoch, dtnn's test evaluation included): dtnn "
                  f"{c['dtnn_seconds']:.0f}, PyTorch {c['pytorch_seconds']:.0f}", "",
                  "A sample of dtnn's model (`dtnn generate --prompt 'The ' --tokens 200 --temperature 0.8 --top-k 20 "
                  "--seed 1`):", "", "```", c.get("dtnn_sample", "").rstrip(), "```",
                  "", "| step | dtnn loss | PyTorch loss | relative difference |", "|---:|---:|---:|---:|"]
        for i, (o, t) in enumerate(zip(c["dtnn_loss"], c["pytorch_loss"])):
            if i < 10 or (i + 1) % 25 == 0 or i + 1 == len(c["dtnn_loss"]):
                lines.append(f"| {i + 1} | {o:.6f} | {t:.6f} | {abs(o - t) / abs(t):.2e} |")
        lines.append("")
    s = out.get("speed")
    if s:
        med = statistics.median
        lines += ["## Training speed", "", f"{s['threads']} threads each, medians; dtnn: {s['engine']}; PyTorch: "
                  f"{s['pytorch_environment']}", "",
                  "| model | sequence | batch | dtnn tokens/s | PyTorch tokens/s | ratio | dtnn MiB | PyTorch MiB |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for entry, r in s["rows"].items():
            lines.append(f"| {r['model']} | {r['sequence']} | {r['batch']} | {med(r['dtnn']):.1f} | "
                         f"{med(r['pytorch']):.1f} | {r['ratio']:.2f} | {med(r['dtnn_peak_rss_mib']):.0f} | "
                         f"{med(r['pytorch_peak_rss_mib']):.0f} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="curve,speed")
    ap.add_argument("--dtnn", default=os.path.join(ROOT, "build", "bin", "dtnn"))
    ap.add_argument("--data-dir", default="", help="the text corpus (default: dtnn's, Debian's fortunes)")
    ap.add_argument("--steps", type=int, default=50, help="steps whose losses must agree within 1e-3")
    ap.add_argument("--budget", type=int, default=300, help="steps before the validation bits per character")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tiles", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--speed", default="gpt_char,gpt2_small:256", help="MODEL or MODEL:SEQUENCE, comma-separated")
    ap.add_argument("--speed-steps", type=int, default=5)
    ap.add_argument("--speed-batch", type=int, default=16, help="gpt_char's batch")
    ap.add_argument("--speed-batch-large", type=int, default=4, help="the batch of the other models")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "transformer"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    out = {"cpu": compare_pytorch_cpu(), "pytorch": torch.__version__}
    parts = a.parts.split(",")
    if "curve" in parts:
        curve(a, out)
    if "speed" in parts:
        speed(a, out)
    with open(os.path.join(a.out, "transformer.json"), "w") as f:
        json.dump(out, f, indent=2)
    write_markdown(out, os.path.join(a.out, "transformer.md"))
    return 0


def compare_pytorch_cpu():
    for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
