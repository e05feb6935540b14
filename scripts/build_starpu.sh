#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds dtnn's own StarPU from Debian's source package (the same 1.3.10 as libstarpu-dev) into a prefix outside
# the clone and prints the prefix on its last line. Debian's binary build caps StarPU at 4 CPU workers and has
# neither FxT (so none of StarPU's trace tools work) nor CUDA; this one has up to 256 CPU workers, FxT (off at
# run time unless `dtnn train --fxt DIR`), StarPU-MPI, and CUDA where nvcc exists.
#
#   scripts/build_starpu.sh [--cuda auto|on|off] [--maxbuffers N] [--simgrid] [--print-prefix]
#
#   --cuda auto    CUDA when nvcc is at $CUDA_HOME/bin/nvcc (default /usr/local/cuda); on requires it; off never
#   --maxbuffers N STARPU_NMAXBUFS, the buffers one task may name (Debian's 8; default 8, see docs/building.md)
#   --simgrid      the simulation variant (docs/simulation.md): StarPU's --enable-simgrid on Debian's
#                  libsimgrid-dev (3.32), where codelets do not run and time is SimGrid's; no CUDA, FxT or MPI
#   --print-prefix print the prefix these options build into, and build nothing
#
# The prefix is $DTNN_STARPU_PREFIX, else /opt/dtnn/starpu-<version>[-cuda<version>]-fxt[-nbufs<N>], or
# /opt/dtnn/starpu-<version>-simgrid[-nbufs<N>] with --simgrid. A prefix
# whose stamp file records the same StarPU version, CUDA version, options and patches is reused as it is; any
# other is rebuilt (a prefix without our stamp is never touched). Each variant is one more option here and
# one more prefix name, so variants live side by side.
# Needs root (apt-get) or the packages already there, and deb-src access to Debian's archive (enabled if missing).
# Debian's source is patched with scripts/starpu-patches/*.patch (its README says which variant applies which):
# the two CUDA 13 incompatibilities of StarPU 1.3.10, the start-up warning about FxT printed only when a trace
# is recorded, and the simulation variant's changes to StarPU's SimGrid mode.
set -euo pipefail

me="build_starpu.sh"
patch_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/starpu-patches"
cuda_mode=auto
maxbuffers=8
print_prefix=0
simgrid=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cuda) cuda_mode="${2:-}"; shift 2 ;;
    --cuda=*) cuda_mode="${1#*=}"; shift ;;
    --maxbuffers) maxbuffers="${2:-}"; shift 2 ;;
    --maxbuffers=*) maxbuffers="${1#*=}"; shift ;;
    --simgrid) simgrid=1; shift ;;
    --print-prefix) print_prefix=1; shift ;;
    *) echo "$me: unknown option '$1', expected --cuda auto|on|off, --maxbuffers N, --simgrid or --print-prefix" >&2
       exit 2 ;;
  esac
done
case "$cuda_mode" in
  auto|on|off) ;;
  *) echo "$me: --cuda '$cuda_mode', expected auto, on or off" >&2; exit 2 ;;
esac
if ! [[ "$maxbuffers" =~ ^[0-9]+$ ]] || [ "$maxbuffers" -lt 8 ] || [ "$maxbuffers" -gt 64 ]; then
  echo "$me: --maxbuffers '$maxbuffers', expected a number from 8 to 64" >&2
  exit 2
fi

cuda="${CUDA_HOME:-/usr/local/cuda}"
cuda_version=""
if [ "$simgrid" = 1 ] && [ "$cuda_mode" = on ]; then
  echo "$me: --simgrid with --cuda on: the simulation variant has no CUDA (simulated GPUs need no CUDA), expected --cuda auto or off" >&2
  exit 2
fi
if [ "$simgrid" = 1 ]; then
  :
elif [ "$cuda_mode" != off ] && [ -x "$cuda/bin/nvcc" ]; then
  cuda_version="$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
elif [ "$cuda_mode" = on ]; then
  echo "$me: --cuda on but no nvcc at $cuda/bin/nvcc (set CUDA_HOME)" >&2
  exit 2
fi
starpu_version="$(dpkg-query -W -f='${Version}' libstarpu-dev 2>/dev/null || true)"
[ -n "$starpu_version" ] || starpu_version="1.3.10+dfsg-2"
upstream="${starpu_version%%+*}"
if [ "$simgrid" = 1 ]; then
  name="starpu-${upstream}-simgrid"
else
  name="starpu-${upstream}${cuda_version:+-cuda$cuda_version}-fxt"
fi
[ "$maxbuffers" = 8 ] || name+="-nbufs$maxbuffers"
prefix="${DTNN_STARPU_PREFIX:-/opt/dtnn/$name}"
if [ "$print_prefix" = 1 ]; then
  echo "$prefix"
  exit 0
fi

sudo_cmd=""
[ "$(id -u)" = 0 ] || sudo_cmd="sudo"

# The patches this variant applies to Debian's source, in this order (scripts/starpu-patches/README.md).
patches=()
[ -z "$cuda_version" ] || patches+=(0001-cuda13-compute-mode.patch 0002-cuda13-cublas-v2-only.patch)
patches+=(0003-fxt-warning-only-when-tracing.patch)
[ "$simgrid" = 0 ] || patches+=(0004-simgrid-dmda-one-decision-at-a-time.patch 0005-simgrid-duration-scatter.patch
                                0006-simgrid-worker-speeds.patch 0007-simgrid-task-overhead.patch)
for p in "${patches[@]}"; do
  [ -f "$patch_dir/$p" ] || { echo "$me: no $patch_dir/$p, expected the StarPU patches beside this script" >&2; exit 1; }
done

# Everything that changes the result goes into the stamp: a prefix is reused only when it matches. The patches
# count by their contents (one sha256 of the files' names and sha256s), so editing one rebuilds the prefixes
# that apply it, and nothing else does.
patch_sum="$(cd "$patch_dir" && sha256sum "${patches[@]}" | sha256sum | cut -d' ' -f1)"
options=(
  --prefix="$prefix"
  --enable-maxcpus=256
  --enable-maxbuffers="$maxbuffers"
)
if [ "$simgrid" = 1 ]; then
  # Simulation: tasks take the time of their performance models on SimGrid's hosts. StarPU-MPI under SimGrid
  # needs a static StarPU and SMPI (docs/simulation.md); FxT is not needed to predict times.
  options+=(--enable-simgrid --without-fxt --disable-mpi)
else
  options+=(--with-fxt --enable-mpi)
fi
options+=(
  # What dtnn does not use, left out to keep the build short (.ci/run builds it on a fresh machine):
  --disable-static
  --disable-opencl --disable-socl --disable-starpufft --disable-starpurm --disable-openmp
  --disable-fortran --disable-build-doc --disable-build-tests --disable-build-examples
  --disable-hdf5 --disable-glpk --disable-valgrind
  # -g, not StarPU's default -gdwarf-2 -g3 (macro information): backtraces keep their lines, the prefix takes
  # 11 MB instead of 18.
  --disable-full-gdb-information
)
if [ -n "$cuda_version" ]; then
  options+=(--with-cuda-dir="$cuda" --enable-maxcudadev=8)
else
  options+=(--disable-cuda)
fi
# One build of a prefix at a time (two set-ups on one machine wait for each other, then reuse).
mkdir -p "$(dirname "$prefix")" 2>/dev/null || $sudo_cmd mkdir -p "$(dirname "$prefix")"
exec 9>"$(dirname "$prefix")/.$(basename "$prefix").lock"
flock 9
stamp_text="starpu=$starpu_version cuda=${cuda_version:-none} patches=$patch_sum options=${options[*]}"
stamp="$prefix/.dtnn-stamp"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_text" ] && [ -f "$prefix/lib/pkgconfig/starpu-1.3.pc" ]; then
  echo "$me: reusing $prefix" >&2
  echo "$prefix"
  exit 0
fi
if [ -e "$prefix" ] && [ ! -f "$stamp" ] && [ -n "$(ls -A "$prefix" 2>/dev/null)" ]; then
  echo "$me: $prefix exists and holds no $me stamp, expected an empty or missing folder (or set DTNN_STARPU_PREFIX)" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
need=()
packages=(dpkg-dev build-essential pkg-config patch libhwloc-dev)
if [ "$simgrid" = 1 ]; then
  packages+=(libsimgrid-dev)
else
  packages+=(libfxt-dev libopenmpi-dev openmpi-bin)
fi
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
# deb-src lines for bookworm main, when none are enabled yet.
if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "$me: enabling Debian source packages (/etc/apt/sources.list.d/dtnn-deb-src.sources)" >&2
  $sudo_cmd tee /etc/apt/sources.list.d/dtnn-deb-src.sources >/dev/null <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  $sudo_cmd apt-get update -qq
elif [ "${#need[@]}" -gt 0 ]; then
  $sudo_cmd apt-get update -qq
fi
if [ "${#need[@]}" -gt 0 ]; then
  echo "$me: installing ${need[*]}" >&2
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/dtnn-starpu.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cd "$work"
apt-get source -qq --download-only "starpu=$starpu_version" >/dev/null 2>&1 || apt-get source -qq --download-only starpu
dpkg-source -x ./*.dsc src >/dev/null 2>&1 || { echo "$me: dpkg-source could not unpack the source package" >&2; exit 1; }
cd src

# --fuzz=0: a hunk whose context is not exactly there is an error, never a guess at a nearby place.
for p in "${patches[@]}"; do
  patch -p1 --forward --batch --fuzz=0 --no-backup-if-mismatch <"$patch_dir/$p" >"$work/patch.log" 2>&1 || {
    cat "$work/patch.log" >&2
    echo "$me: $patch_dir/$p did not apply to Debian's starpu $starpu_version (patch's output above)" >&2
    exit 1
  }
done

# Every feature asked for must be there: configure silently drops what it cannot find.
require_define() {
  grep -q "^#define $1 " src/common/config.h || {
    grep -iE "$2" configure.log | tail -20 >&2
    echo "$me: configure did not enable $1 ($3)" >&2
    exit 1
  }
}
jobs="$(nproc)"
start=$SECONDS
echo "$me: configuring StarPU $starpu_version${cuda_version:+ with CUDA $cuda_version} into $prefix" >&2
./configure -q "${options[@]}" CFLAGS="-O2" NVCCFLAGS="-O2" >configure.log 2>&1 || {
  tail -40 configure.log >&2
  echo "$me: configure failed (log above)" >&2
  exit 1
}
if [ "$simgrid" = 1 ]; then
  require_define STARPU_SIMGRID simgrid "Debian's libsimgrid-dev"
else
  require_define STARPU_USE_FXT fxt "Debian's libfxt-dev"
  require_define STARPU_USE_MPI mpi "Debian's libopenmpi-dev"
fi
[ -z "$cuda_version" ] || require_define STARPU_USE_CUDA cuda "CUDA at $cuda"
echo "$me: building with $jobs jobs (configure took $((SECONDS - start)) s)" >&2
make -s -j "$jobs" >make.log 2>&1 || {
  grep -E 'error|Error' make.log | head -40 >&2
  echo "$me: make failed (errors above)" >&2
  exit 1
}
# Installed into a staging folder and moved into place, so that an interrupted build never leaves a prefix
# that looks finished.
make -s install DESTDIR="$work/stage" >install.log 2>&1 || { tail -20 install.log >&2; exit 1; }
echo "$stamp_text" >"$work/stage$prefix/.dtnn-stamp"
$sudo_cmd mkdir -p "$(dirname "$prefix")"
$sudo_cmd rm -rf "$prefix"
$sudo_cmd mv "$work/stage$prefix" "$prefix"
echo "$me: installed $prefix in $((SECONDS - start)) s" >&2
echo "$prefix"
