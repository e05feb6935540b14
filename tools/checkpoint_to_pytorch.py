#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Converts a dtnn HDF5 checkpoint into a PyTorch state_dict file (written with torch.save).

  tools/checkpoint_to_pytorch.py CHECKPOINT.h5 STATE_DICT.pt

The state_dict holds the checkpoint's parameters, then its buffers, in the order they were saved, under
their dotted PyTorch names and shapes (Conv OIHW, Linear (out, in)), as float32 tensors; BatchNorm's
num_batches_tracked becomes the int64 scalar PyTorch keeps. Every dataset's CRC-32 is verified first.
Optimizer state, schedule and RNG states have no place in a state_dict and are left out.

Uses Debian's python3-h5py and python3-torch: run it with /usr/bin/python3.
"""
import argparse
import collections
import sys
import zlib

import h5py
import numpy as np
import torch

FORMAT = "dtnn-checkpoint"
FORMAT_VERSION = 1


def text(value):
    """An attribute as str, whether h5py gives it as str (variable length) or bytes (fixed length)."""
    if isinstance(value, np.ndarray):
        value = value[()]
    return value.decode("utf-8") if isinstance(value, (bytes, np.bytes_)) else str(value)


def fail(path, what):
    sys.exit(f"{path}: {what}")


def read_entries(path, f, group_name):
    if group_name not in f or not isinstance(f[group_name], h5py.Group):
        fail(path, f"missing group /{group_name}")
    entries = []
    # h5py lists members in creation order when the group tracks it, which dtnn's groups do.
    for name, dataset in f[group_name].items():
        where = f"/{group_name}/{name}"
        if not isinstance(dataset, h5py.Dataset):
            fail(path, f"{where}: expected a dataset, got a group")
        if dataset.dtype != np.dtype("<f4"):
            fail(path, f"{where}: dtype expected float32, got {dataset.dtype}")
        values = np.asarray(dataset[()], dtype="<f4")
        crc = zlib.crc32(values.tobytes()) & 0xFFFFFFFF
        stored = int(dataset.attrs.get("crc32", -1))
        if stored != crc:
            fail(path, f"{where}: checksum mismatch, the data is corrupt: "
                       f"crc32 expected {stored:#010x}, got {crc:#010x}")
        entries.append((name, values))
    return entries


def to_tensor(name, values):
    if name.endswith("num_batches_tracked"):
        if values.size != 1:
            raise ValueError(f"{name}: expected one value, got shape {values.shape}")
        return torch.tensor(int(round(float(values.reshape(-1)[0]))), dtype=torch.int64)
    return torch.from_numpy(np.array(values, dtype=np.float32, copy=True))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="dtnn checkpoint (.h5)")
    parser.add_argument("output", help="PyTorch state_dict file to write (.pt)")
    args = parser.parse_args()

    path = args.checkpoint
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        fail(path, f"cannot open as HDF5: {e}")
    with f:
        fmt = text(f.attrs["format"]) if "format" in f.attrs else None
        if fmt != FORMAT:
            fail(path, f'not a dtnn checkpoint, expected format "{FORMAT}", got {fmt!r}')
        version = int(f.attrs.get("format_version", -1))
        if not 1 <= version <= FORMAT_VERSION:
            fail(path, f"format_version expected 1..{FORMAT_VERSION}, got {version}")
        state = collections.OrderedDict()
        for name, values in read_entries(path, f, "parameters") + read_entries(path, f, "buffers"):
            state[name] = to_tensor(name, values)
        model = text(f.attrs.get("model_name", ""))
    torch.save(state, args.output)
    print(f"{args.output}: {len(state)} tensors of model '{model}'")


if __name__ == "__main__":
    main()
