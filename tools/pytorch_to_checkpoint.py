#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Converts a PyTorch state_dict file into a dtnn HDF5 checkpoint that `dtnn train --resume` accepts.

  tools/pytorch_to_checkpoint.py STATE_DICT.pt CHECKPOINT.h5 [--like DTNN_CHECKPOINT.h5]
                                 [--model-name NAME] [--model-options JSON]

The input is what torch.save wrote: a state_dict, a dict holding one under "state_dict", "model_state_dict"
or "model", or a whole nn.Module. Tensors become float32 datasets under their names and shapes.

With --like, a checkpoint of the dtnn model supplies the model name and options, which entries are
parameters and which are buffers, and the shape of entries whose element count matches but whose shape
differs (a scalar against a one-element vector). Without it, running_mean, running_var and
num_batches_tracked are buffers and everything else a parameter. The result starts training afresh: epoch,
step, optimizer state and RNG states are empty.

The file is written like dtnn writes it (HDF5's newest format, which checksums its metadata; a CRC-32 per
dataset; a temporary file renamed into place after fsync). Run it with /usr/bin/python3 (Debian's h5py and
torch).
"""
import argparse
import datetime
import json
import os
import sys
import zlib

import h5py
import numpy as np
import torch

FORMAT = "dtnn-checkpoint"
FORMAT_VERSION = 1
BUFFER_SUFFIXES = ("running_mean", "running_var", "num_batches_tracked")


def fixed_string(value):
    """A fixed-length UTF-8 string, as dtnn writes them (kept in the checksummed object header)."""
    data = value.encode("utf-8")
    return np.array(data, dtype=h5py.string_dtype("utf-8", max(1, len(data))))


def text(value):
    if isinstance(value, np.ndarray):
        value = value[()]
    return value.decode("utf-8") if isinstance(value, (bytes, np.bytes_)) else str(value)


def load_state_dict(path):
    obj = torch.load(path, map_location="cpu")
    if isinstance(obj, torch.nn.Module):
        return obj.state_dict()
    if isinstance(obj, dict):
        for key in ("state_dict", "model_state_dict", "model"):
            inner = obj.get(key)
            if isinstance(inner, dict) and inner and all(torch.is_tensor(v) for v in inner.values()):
                return inner
        if obj and all(isinstance(k, str) and torch.is_tensor(v) for k, v in obj.items()):
            return obj
    sys.exit(f"{path}: expected a state_dict (names to tensors), got {type(obj).__name__}")


def read_template(path):
    """Model name, options, and the names and shapes of each group of a dtnn checkpoint."""
    with h5py.File(path, "r") as f:
        if text(f.attrs.get("format", "")) != FORMAT:
            sys.exit(f'{path}: not a dtnn checkpoint, expected format "{FORMAT}"')
        groups = {g: {name: tuple(d.shape) for name, d in f[g].items()} for g in ("parameters", "buffers")}
        return text(f.attrs.get("model_name", "")), text(f.attrs.get("model_options", "{}")), groups


def write_entry(group, name, values):
    if "/" in name or not name:
        sys.exit(f"{name!r}: expected a name without '/'")
    values = np.asarray(values, dtype="<f4", order="C")  # ascontiguousarray would make a scalar 1-D
    dataset = group.create_dataset(name, data=values, track_times=False)
    dataset.attrs.create("crc32", np.int64(zlib.crc32(values.tobytes()) & 0xFFFFFFFF))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("state_dict", help="file written by torch.save")
    parser.add_argument("output", help="dtnn checkpoint to write (.h5)")
    parser.add_argument("--like", help="a dtnn checkpoint of the same model, to take names, groups and shapes from")
    parser.add_argument("--model-name", help="model name (default: the --like checkpoint's, else empty)")
    parser.add_argument("--model-options", help="model options as JSON (default: the --like checkpoint's, else {})")
    args = parser.parse_args()

    state = load_state_dict(args.state_dict)
    model_name, model_options, template = "", "{}", None
    if args.like:
        model_name, model_options, template = read_template(args.like)
    if args.model_name is not None:
        model_name = args.model_name
    if args.model_options is not None:
        json.loads(args.model_options)
        model_options = args.model_options

    parameters, buffers = [], []
    for name, tensor in state.items():
        values = tensor.detach().cpu().to(torch.float32).numpy()
        if template is not None:
            group = "buffers" if name in template["buffers"] else "parameters"
            shape = template[group].get(name)
            if shape is None:
                print(f"warning: {name} is not in {args.like}; kept as a {group[:-1]}", file=sys.stderr)
            elif shape != values.shape and int(np.prod(shape)) == values.size:
                values = values.reshape(shape)
        else:
            group = "buffers" if name.endswith(BUFFER_SUFFIXES) else "parameters"
        (buffers if group == "buffers" else parameters).append((name, values))

    out = os.path.abspath(args.output)
    tmp = f"{out}.{os.getpid()}.tmp"
    try:
        with h5py.File(tmp, "w", libver="latest", track_order=True) as f:
            f.attrs.create("format", fixed_string(FORMAT))
            f.attrs.create("format_version", np.int64(FORMAT_VERSION))
            f.attrs.create("model_name", fixed_string(model_name))
            f.attrs.create("model_options", fixed_string(model_options))
            f.attrs.create("world_size", np.int64(1))
            for key in ("epoch", "step", "samples_seen"):
                f.attrs.create(key, np.int64(0))
            f.attrs.create("optimizer", fixed_string("{}"))
            f.attrs.create("schedule", fixed_string("{}"))
            created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            f.attrs.create("created", fixed_string(created))
            for group_name, entries in (("parameters", parameters), ("buffers", buffers), ("optimizer_state", [])):
                group = f.create_group(group_name, track_order=True)
                for name, values in entries:
                    write_entry(group, name, values)
            rng = f.create_dataset("rng_states", shape=(0,), dtype=h5py.string_dtype("utf-8", 1))
            rng.attrs.create("crc32", np.int64(zlib.crc32(b"")))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, out)
        dir_fd = os.open(os.path.dirname(out), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    print(f"{args.output}: {len(parameters)} parameters, {len(buffers)} buffers")


if __name__ == "__main__":
    main()
