# SPDX-License-Identifier: Apache-2.0
"""PyTorch at its best on a CPU, for the benchmarks that compare with it (compare_pytorch.py; gpu_pytorch.py's
--device cpu only rehearses the GPU check and is no comparison): the environment its CPU tuning guide recommends,
and words saying what was set.

- Allocator: glibc's malloc returns blocks above its mmap threshold to the kernel when they are freed, so a
  training step page-faults every large tensor in again (tens of thousands of minor faults a step); jemalloc or
  tcmalloc (Debian: libjemalloc2, libgoogle-perftools4), preloaded, keep them. Without either, glibc's tunables
  with thresholds of 4 GiB do the same.
- BLAS: Debian's BLIS 0.9 detects recent AMD cores as generic (or zen3); BLIS_ARCH_TYPE set to the configuration
  dtnn's engine chose (its start-up line names it) gives PyTorch's matmuls the same kernels.
"""
import ctypes
import ctypes.util
import os
import re

LIBBLAS = "/usr/lib/x86_64-linux-gnu/libblas.so.3"
LIBDIR = "/usr/lib/x86_64-linux-gnu"
ALLOCATORS = {"jemalloc": os.path.join(LIBDIR, "libjemalloc.so.2"),
              "tcmalloc": os.path.join(LIBDIR, "libtcmalloc.so.4")}
GLIBC_TUNABLES = "glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=4294967296"
# jemalloc that never purges: with its defaults jemalloc 5.3 purges freed pages within seconds, and with the
# settings of PyTorch's CPU tuning guide (oversize_threshold:1, decay 9e9 ms) its oversize arena still does
# (measured, simplecnn batch 64: 3000 and 4600 minor faults a step, as many as glibc's default; 0 with this).
JEMALLOC_CONF = "dirty_decay_ms:-1,muzzy_decay_ms:-1"


def blis_arch_id(blas, name):
    """BLIS_ARCH_TYPE's number for a BLIS configuration name (BLIS 0.9 parses numbers only), from the table of the
    libblis beside the BLAS library (which hides BLIS's own symbols): bli_arch_string needs no initialised BLIS,
    and generic is the table's last entry."""
    beside = os.path.join(os.path.dirname(blas), "libblis.so.4")
    library = beside if os.path.exists(beside) else ctypes.util.find_library("blis")
    if library is None:
        return None
    lib = ctypes.CDLL(library)
    lib.bli_arch_string.restype = ctypes.c_char_p
    lib.bli_arch_string.argtypes = [ctypes.c_int]
    for arch in range(64):
        config = lib.bli_arch_string(arch).decode()
        if config == name:
            return arch
        if config == "generic":
            break
    return None


def blas_env(dtnn_engine):
    """BLIS_ARCH_TYPE for the configuration named in dtnn's start-up line ("BLIS 0.9.0 'skx'"), where
    libblas.so.3 is BLIS; {} otherwise."""
    blas = os.path.realpath(LIBBLAS)
    if "blis" not in blas:
        return {}
    config = re.search(r"BLIS \S+ '(\w+)'", dtnn_engine or "")
    arch = blis_arch_id(blas, config.group(1)) if config else None
    return {} if arch is None else {"BLIS_ARCH_TYPE": str(arch)}


def allocator_env(choice, env):
    """Variables that give the child the allocator `choice` (auto: jemalloc, else tcmalloc, else glibc's
    tunables), and words naming it. An LD_PRELOAD or GLIBC_TUNABLES already in env is kept and named."""
    if "LD_PRELOAD" in env or "GLIBC_TUNABLES" in env:
        given = [f"{n}={env[n]}" for n in ("LD_PRELOAD", "GLIBC_TUNABLES") if n in env]
        return {}, "as the environment sets it (" + ", ".join(given) + ")"
    order = ["jemalloc", "tcmalloc"] if choice == "auto" else [choice]
    for name in order:
        if name in ALLOCATORS and os.path.exists(ALLOCATORS[name]):
            extra = {"LD_PRELOAD": ALLOCATORS[name]}
            if name == "jemalloc" and "MALLOC_CONF" not in env:
                extra["MALLOC_CONF"] = JEMALLOC_CONF
            return extra, f"{name} (" + ", ".join(f"{k}={v}" for k, v in extra.items()) + ")"
        if name != "glibc-tunables" and choice != "auto":
            raise SystemExit(f"--torch-allocator {name}: {ALLOCATORS[name]} not found, expected Debian's "
                             f"{'libjemalloc2' if name == 'jemalloc' else 'libgoogle-perftools4'} "
                             f"(scripts/setup.sh bench installs it)")
    return {"GLIBC_TUNABLES": GLIBC_TUNABLES}, f"glibc malloc with GLIBC_TUNABLES={GLIBC_TUNABLES}"

