#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Logits of tools/gpt_reference.py's TransformerLM (dtnn's models::transformer_lm) in PyTorch, eval mode, float64,
with the weights of dtnn checkpoints: the other side of the transformer interchange test.

  transformer_lm_logits.py CASES_JSON
CASES_JSON: a list of {"checkpoint": dtnn .h5, "config": TransformerLM's keyword arguments, "ids": a file of N x SEQ
int32 token ids, "n": N, "seq": SEQ, "output": the file to receive N x SEQ x vocabulary float64 logits}. The
checkpoint is read as tools/checkpoint_to_pytorch.py reads it, and must hold exactly the module's names and shapes
(strict load). One process for every case: importing torch is most of the time.
"""
import json
import os
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from checkpoint_to_pytorch import read_entries, to_tensor  # noqa: E402
from gpt_reference import TransformerLM  # noqa: E402


def main(argv):
    for case in json.loads(argv[1]):
        model = TransformerLM(**case["config"]).double().eval()
        with h5py.File(case["checkpoint"], "r") as f:
            state = {name: to_tensor(name, values).double()
                     for name, values in read_entries(case["checkpoint"], f, "parameters")}
        model.load_state_dict(state, strict=True)
        ids = np.fromfile(case["ids"], dtype=np.int32).reshape(case["n"], case["seq"]).astype(np.int64)
        with torch.no_grad():
            logits = model(torch.from_numpy(ids))
        logits.numpy().astype(np.float64).tofile(case["output"])
        print(f"{case['checkpoint']}: {len(state)} tensors, logits {tuple(logits.shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
