#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How far Winograd F(2x2, 3x3) with bf16 GEMMs would be from the exact convolution, against what dtnn's bf16
convolutions (convgemm, oneDNN: inputs rounded to bf16, products summed in fp32) and its fp32 Winograd give: the
accuracy study issue 37 asks for before Winograd's GEMMs may run in bf16.

  bench/winograd_bf16_accuracy.py [--batch 4] [--seed 0] [--json FILE]

For 3x3 stride-1 layers of ResNet-18 and VGG-16 (64 to 512 channels, CIFAR planes), x a ReLU's output (normal
values, negatives zeroed) and He-normal weights, each method's output is compared with the convolution of the same
fp32 x and w in float64; the error is given as the largest |difference| over the largest |exact output| (the
measure of docs/design.md's bf16 passes) and as the RMS difference over the RMS output. Methods:

  fp32 Winograd      dtnn's --conv winograd: the transforms, products and sums in fp32 (float32 arithmetic here).
  bf16 direct        x and w rounded to bf16 (to nearest even), the products summed exactly (float64), the result
                     rounded to fp32: the limit of convgemm's and oneDNN's bf16 passes (their fp32 accumulation adds
                     ~sqrt(C * 9) x 2^-24 of relative error, negligible beside the inputs' 2^-9).
  bf16 Winograd      the fp32 transforms of x's 4x4 tiles (V = B^T d B) and of the weights (U = G g G^T) rounded to
                     bf16, the 16 GEMMs over the channels summed exactly then rounded to fp32, the output transform
                     (A^T M A) in fp32: what bf16 GEMMs inside dtnn's Winograd would compute.
  bf16 Winograd, bf16 x   the same from x already rounded to bf16 (activations stored in bf16 between layers).

Backward-data is the same computation on dy with the flipped weights (codelets/cpu/winograd.hpp), so the forward
figures stand for it (dy here would be normal values, not a ReLU's output: --signed-input measures that).
"""
import argparse
import json
import sys

import numpy as np

BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float32)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float32)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float32)

LAYERS = [(64, 64, 32), (128, 128, 16), (256, 256, 8), (512, 512, 4), (512, 512, 2)]  # (C, K, plane side)


def to_bf16(a):
    """float32 -> the nearest bf16 (ties to even), returned as float32; as VCVTNEPS2BF16 for finite values."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def exact_conv(x, w):
    """3x3, stride 1, padding 1, in float64: y[n, k, h, w]."""
    n, c, h, wd = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack([xp[:, :, i:i + h, j:j + wd] for i in range(3) for j in range(3)], axis=2)  # n, c, 9, h, w
    return np.einsum("ncthw,kct->nkhw", cols, w.astype(np.float64).reshape(w.shape[0], c, 9), optimize=True)


def tiles(x):
    """The 4x4 input tiles of F(2x2, 3x3) with padding 1: [n, c, th, tw, 4, 4] (planes of even side)."""
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    th, tw = h // 2, wd // 2
    out = np.empty((n, c, th, tw, 4, 4), dtype=x.dtype)
    for a in range(th):
        for b in range(tw):
            out[:, :, a, b] = xp[:, :, 2 * a:2 * a + 4, 2 * b:2 * b + 4]
    return out


def winograd(x, w, round_v, round_u, dtype):
    """Winograd F(2x2, 3x3): transforms in float32, the GEMMs' products and sums in `dtype` (float32, or float64
    then rounded to float32), V and U rounded to bf16 where asked; the output transform in float32."""
    v = np.einsum("ij,nctsjl,ml->nctsim", BT, tiles(x), BT, optimize=True).astype(np.float32)
    u = np.einsum("ij,kcjl,ml->kcim", G, w, G, optimize=True).astype(np.float32)
    if round_v:
        v = to_bf16(v)
    if round_u:
        u = to_bf16(u)
    m = np.einsum("kcij,nctsij->nktsij", u.astype(dtype), v.astype(dtype), optimize=True).astype(np.float32)
    y = np.einsum("ij,nktsjl,ml->nktsim", AT, m, AT, optimize=True).astype(np.float32)  # n, k, th, tw, 2, 2
    n, k, th, tw = y.shape[:4]
    return y.transpose(0, 1, 2, 4, 3, 5).reshape(n, k, 2 * th, 2 * tw)


def errors(got, ref):
    d = got.astype(np.float64) - ref
    return {"max_rel": float(np.abs(d).max() / np.abs(ref).max()),
            "rms_rel": float(np.sqrt((d * d).mean()) / np.sqrt((ref * ref).mean()))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--signed-input", action="store_true", help="x normal, not a ReLU's output (dy in backward-data)")
    ap.add_argument("--json")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    rows = []
    print(f"{'layer':>18}  {'fp32 Winograd':>22}  {'bf16 direct':>22}  {'bf16 Winograd':>22}  "
          f"{'bf16 Winograd, bf16 x':>22}   (largest / RMS error, relative)")
    for c, k, side in LAYERS:
        x = rng.standard_normal((a.batch, c, side, side)).astype(np.float32)
        if not a.signed_input:
            x = np.maximum(x, 0.0)
        w = (rng.standard_normal((k, c, 3, 3)) * np.sqrt(2.0 / (9 * c))).astype(np.float32)
        ref = exact_conv(x, w)
        methods = {
            "fp32_winograd": winograd(x, w, False, False, np.float32),
            "bf16_direct": exact_conv(to_bf16(x), to_bf16(w)).astype(np.float32),
            "bf16_winograd": winograd(x, w, True, True, np.float64),
            "bf16_winograd_bf16_x": winograd(to_bf16(x), w, True, True, np.float64),
        }
        row = {"layer": f"{c}->{k} @{side}", "batch": a.batch, **{m: errors(y, ref) for m, y in methods.items()}}
        rows.append(row)
        cells = "  ".join(f"{row[m]['max_rel']:9.2e} / {row[m]['rms_rel']:9.2e}" for m in methods)
        print(f"{row['layer']:>18}  {cells}")
        sys.stdout.flush()
    ratio = [r["bf16_winograd"]["max_rel"] / r["bf16_direct"]["max_rel"] for r in rows]
    ratio_rms = [r["bf16_winograd"]["rms_rel"] / r["bf16_direct"]["rms_rel"] for r in rows]
    print(f"bf16 Winograd over bf16 direct: largest error {min(ratio):.2f}-{max(ratio):.2f}x, "
          f"RMS error {min(ratio_rms):.2f}-{max(ratio_rms):.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"input": "normal" if a.signed_input else "relu(normal)", "seed": a.seed, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
