#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch modules of dtnn's transformer language models (models/zoo.hpp: gpt_tiny, gpt_char, gpt2_small,
bert_medium; models::transformer_lm), with dtnn's parameter names, shapes and order, one for one.

  tools/gpt_reference.py [--model NAME ...] [--names]

prints each model's parameter count (and with --names its state_dict, name and shape per line). As a module:
`from gpt_reference import TransformerLM, CONFIGS; model = TransformerLM(**CONFIGS["gpt_char"])`.

Built from nn.Embedding, nn.MultiheadAttention(batch_first=True), nn.LayerNorm, nn.Linear, nn.GELU and
nn.Dropout, as dtnn builds its blocks from the layers of the same names:
  wte.weight [vocabulary, d_model]; wpe.weight [context, d_model] (learned positions, dtnn's
  PositionalEncoding(learned) is this table added to the embeddings); emb_ln (post-LN only);
  h.<i>.ln_1, h.<i>.attn.{in_proj_weight [3 d_model, d_model], in_proj_bias, out_proj.weight, out_proj.bias},
  h.<i>.ln_2, h.<i>.mlp.c_fc [d_ff, d_model], h.<i>.mlp.c_proj [d_model, d_ff]; ln_f (pre-LN only);
  lm_head.weight [vocabulary, d_model] when the head is not tied.
A tied head (gpt_tiny, gpt2_small, bert_medium) is F.linear(h, wte.weight): the state_dict, like dtnn's
checkpoint, holds the table once, as wte.weight. (HuggingFace's GPT2LMHeadModel lists it twice, as
transformer.wte.weight and lm_head.weight, two names of one tensor: drop lm_head.weight when moving its weights
here, and give it both names when moving them back.)

Initialisation as dtnn's (GPT-2's): matrices and tables N(0, 0.02), with pre-LN the residual projections
(attn.out_proj.weight, mlp.c_proj.weight) N(0, 0.02 / sqrt(2 layers)), biases 0, LayerNorm 1 and 0. The draws differ
from dtnn's: for identical weights move them through a checkpoint (tools/checkpoint_to_pytorch.py).

Run it with /usr/bin/python3 (Debian's python3-torch 1.13).
"""
import argparse
import math
import sys

import torch
from torch import nn
from torch.nn import functional as F

# The zoo's models, as models/zoo_transformer.cpp defines them.
CONFIGS = {
    "gpt_tiny": dict(vocabulary=256, context=16, d_model=32, num_heads=2, layers=2, d_ff=128, dropout=0.0,
                     tied=True),
    "gpt_char": dict(vocabulary=256, context=256, d_model=256, num_heads=4, layers=4, d_ff=1024, dropout=0.0,
                     tied=False),
    "gpt2_small": dict(vocabulary=50257, context=1024, d_model=768, num_heads=12, layers=12, d_ff=3072, dropout=0.1,
                       tied=True),
    "bert_medium": dict(vocabulary=30522, context=512, d_model=512, num_heads=8, layers=8, d_ff=2048, dropout=0.1,
                        tied=True, causal=False, norm_first=False, activation="gelu", eps=1e-12),
}


def activation_module(name):
    if name == "gelu":
        return nn.GELU()
    if name == "gelu_tanh":
        return nn.GELU(approximate="tanh")
    if name == "relu":
        return nn.ReLU()
    raise ValueError(f"activation={name!r}, expected 'gelu', 'gelu_tanh' or 'relu'")


class Mlp(nn.Module):
    def __init__(self, d_model, d_ff, dropout, activation):
        super().__init__()
        self.c_fc = nn.Linear(d_model, d_ff)
        self.act = activation_module(activation)
        self.c_proj = nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.c_proj(self.act(self.c_fc(x))))


class Block(nn.Module):
    """layers/transformer.hpp's transformer_block: pre-LN x + attn(ln_1(x)), x + mlp(ln_2(x)); post-LN
    ln_1(x + attn(x)), ln_2(x + mlp(x)). Dropout on the attention probabilities and on each branch's output."""

    def __init__(self, d_model, num_heads, d_ff, dropout, causal, norm_first, activation, eps):
        super().__init__()
        self.causal = causal
        self.norm_first = norm_first
        # Registered in dtnn's order of parameters (each LayerNorm where the block applies it).
        if norm_first:
            self.ln_1 = nn.LayerNorm(d_model, eps=eps)
        self.attn = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, batch_first=True)
        self.attn_drop = nn.Dropout(dropout)
        if not norm_first:
            self.ln_1 = nn.LayerNorm(d_model, eps=eps)
        if norm_first:
            self.ln_2 = nn.LayerNorm(d_model, eps=eps)
        self.mlp = Mlp(d_model, d_ff, dropout, activation)
        if not norm_first:
            self.ln_2 = nn.LayerNorm(d_model, eps=eps)

    def attention(self, x):
        mask = None
        if self.causal:
            seq = x.shape[1]
            mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=x.device), diagonal=1)
        y, _ = self.attn(x, x, x, attn_mask=mask, need_weights=False)
        return self.attn_drop(y)

    def forward(self, x):
        if self.norm_first:
            x = x + self.attention(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))
        x = self.ln_1(x + self.attention(x))
        return self.ln_2(x + self.mlp(x))


class TransformerLM(nn.Module):
    """models::transformer_lm: int64 token ids [batch, seq] (seq <= context) give logits [batch, seq, vocabulary]."""

    def __init__(self, vocabulary, context, d_model, num_heads, layers, d_ff=0, dropout=0.0, tied=False, causal=True,
                 norm_first=True, activation="gelu_tanh", eps=1e-5):
        super().__init__()
        d_ff = d_ff or 4 * d_model
        self.context = context
        self.norm_first = norm_first
        self.tied = tied
        self.wte = nn.Embedding(vocabulary, d_model)
        self.wpe = nn.Embedding(context, d_model)
        if not norm_first:
            self.emb_ln = nn.LayerNorm(d_model, eps=eps)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(Block(d_model, num_heads, d_ff, dropout, causal, norm_first, activation, eps)
                               for _ in range(layers))
        if norm_first:
            self.ln_f = nn.LayerNorm(d_model, eps=eps)
        if not tied:
            self.lm_head = nn.Linear(d_model, vocabulary, bias=False)
        self.reset_parameters(layers)

    def reset_parameters(self, layers):
        residual_std = 0.02 / math.sqrt(2 * layers) if self.norm_first else 0.02
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                residual = name.endswith("attn.out_proj.weight") or name.endswith("mlp.c_proj.weight")
                nn.init.normal_(p, 0.0, residual_std if residual else 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
            else:
                nn.init.ones_(p)

    def forward(self, ids):
        seq = ids.shape[1]
        if seq > self.context:
            raise ValueError(f"sequence of {seq}, expected at most context={self.context}")
        x = self.wte(ids) + self.wpe.weight[:seq]
        if not self.norm_first:
            x = self.emb_ln(x)
        x = self.drop(x)
        for block in self.h:
            x = block(x)
        if self.norm_first:
            x = self.ln_f(x)
        return F.linear(x, self.wte.weight) if self.tied else self.lm_head(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", choices=sorted(CONFIGS), help="default: every model")
    parser.add_argument("--names", action="store_true", help="print the state_dict's names and shapes")
    args = parser.parse_args()
    torch.manual_seed(0)
    for name in args.model or list(CONFIGS):
        model = TransformerLM(**CONFIGS[name])
        count = sum(p.numel() for p in model.parameters())
        print(f"{name}: {count:,} parameters, {len(model.state_dict())} state_dict entries")
        if args.names:
            for key, value in model.state_dict().items():
                print(f"  {key} {tuple(value.shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
