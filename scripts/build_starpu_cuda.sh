#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds a CUDA-enabled StarPU from Debian's source package into a prefix outside the clone and prints the
# prefix on its last line. Debian's libstarpu-dev is built without CUDA and caps StarPU at 4 CPU workers.
#
#   scripts/build_starpu_cuda.sh [PREFIX]
#
# PREFIX defaults to $DTNN_STARPU_PREFIX, else /opt/dtnn/starpu-<version>-cuda<cuda version>. A prefix whose
# stamp file records the same StarPU version, CUDA version, options and patch is reused as it is.
# Needs: deb-src access to Debian's archive (enabled here if missing), CUDA at $CUDA_HOME or /usr/local/cuda.
# The two CUDA 13 incompatibilities of StarPU 1.3.10 are patched (see patch_source below).
set -euo pipefail

cuda="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -x "$cuda/bin/nvcc" ]; then
  echo "build_starpu_cuda.sh: no nvcc at $cuda/bin/nvcc (set CUDA_HOME), cannot build a CUDA-enabled StarPU" >&2
  exit 2
fi
cuda_version="$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
starpu_version="$(dpkg-query -W -f='${Version}' libstarpu-dev 2>/dev/null || true)"
[ -n "$starpu_version" ] || starpu_version="1.3.10+dfsg-2"
upstream="${starpu_version%%+*}"
prefix="${1:-${DTNN_STARPU_PREFIX:-/opt/dtnn/starpu-${upstream}-cuda${cuda_version}}}"

# Everything that changes the result goes into the stamp: a prefix is reused only when it matches.
# (Bump patch_level when patch_source changes.)
patch_level=1
options=(
  --prefix="$prefix"
  --with-cuda-dir="$cuda"
  --enable-maxcpus=128
  --enable-maxcudadev=8
  --disable-opencl --disable-socl --disable-starpufft --disable-starpurm
  --disable-fortran --disable-build-doc --disable-build-tests --disable-build-examples
  --disable-hdf5 --disable-glpk --without-fxt
)
stamp_text="starpu=$starpu_version cuda=$cuda_version patch=$patch_level options=${options[*]}"
stamp="$prefix/.dtnn-stamp"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_text" ] && [ -f "$prefix/lib/pkgconfig/starpu-1.3.pc" ]; then
  echo "build_starpu_cuda.sh: reusing $prefix ($stamp_text)" >&2
  echo "$prefix"
  exit 0
fi

sudo_cmd=""
[ "$(id -u)" = 0 ] || sudo_cmd="sudo"
export DEBIAN_FRONTEND=noninteractive
need=()
for p in dpkg-dev build-essential pkg-config libhwloc-dev libopenmpi-dev openmpi-bin; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
# deb-src lines for bookworm main, when none are enabled yet.
if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "build_starpu_cuda.sh: enabling Debian source packages (/etc/apt/sources.list.d/dtnn-deb-src.sources)" >&2
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
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/dtnn-starpu.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cd "$work"
apt-get source -qq --download-only "starpu=$starpu_version" >/dev/null 2>&1 || apt-get source -qq --download-only starpu
dpkg-source -x ./*.dsc src >/dev/null
cd src

patch_source() {
  # 1. CUDA 13 removed cudaDeviceProp::computeMode: ask cudaDeviceGetAttribute instead.
  sed -i 's/if (props\[devid\]\.computeMode == cudaComputeModeExclusive)/int dtnn_compute_mode = 0; cudaDeviceGetAttribute(\&dtnn_compute_mode, cudaDevAttrComputeMode, devid); if (dtnn_compute_mode == cudaComputeModeExclusive)/' \
    src/drivers/cuda/driver_cuda.c
  grep -q dtnn_compute_mode src/drivers/cuda/driver_cuda.c
  # 2. CUDA 13's cublas.h (legacy API) and cublas_v2.h cannot both be included: StarPU's driver uses the
  #    legacy API only to initialise and to set the stream, which the v2 handles it already keeps do.
  sed -i 's/#include <cublas.h>/#include <cublas_v2.h>/' src/drivers/cuda/driver_cuda.h
  python3 - src/drivers/cuda/starpu_cublas.c <<'PY'
import sys
path = sys.argv[1]
s = open(path).read()
s = s.replace("#include <cublas.h>\n", "")
s = s.replace("""	if (!(cublas_initialized[idx]++))
	{
		cublasStatus cublasst = cublasInit();
		if (STARPU_UNLIKELY(cublasst))
			STARPU_CUBLAS_REPORT_ERROR(cublasst);
	}
""", "	cublas_initialized[idx]++;\n")
s = s.replace("""	cublasSetKernelStream(starpu_cuda_get_local_stream());
}

static void shutdown""", """	cublasSetStream(cublas_handles[starpu_worker_get_id_check()], starpu_cuda_get_local_stream());
}

static void shutdown""")
s = s.replace("""	if (!--cublas_initialized[idx])
		cublasShutdown();
""", "	--cublas_initialized[idx];\n")
s = s.replace("""		cublasSetKernelStream(starpu_cuda_get_local_stream());
#endif
}""", """		cublasSetStream(cublas_handles[starpu_worker_get_id_check()], starpu_cuda_get_local_stream());
#endif
}""")
for legacy in ("cublasInit", "cublasShutdown", "cublasSetKernelStream", "<cublas.h>"):
    if legacy in s:
        sys.exit(f"build_starpu_cuda.sh: could not patch {legacy} out of {path}")
open(path, "w").write(s)
PY
}
patch_source

jobs="$(nproc)"
echo "build_starpu_cuda.sh: configuring StarPU $starpu_version with CUDA $cuda_version into $prefix" >&2
./configure -q "${options[@]}" CFLAGS="-O2" NVCCFLAGS="-O2" >configure.log 2>&1 || {
  tail -40 configure.log >&2
  echo "build_starpu_cuda.sh: configure failed (log above)" >&2
  exit 1
}
grep -q '^#define STARPU_USE_CUDA 1' src/common/config.h || {
  grep -i cuda configure.log | tail -20 >&2
  echo "build_starpu_cuda.sh: configure did not enable CUDA" >&2
  exit 1
}
echo "build_starpu_cuda.sh: building with $jobs jobs" >&2
make -s -j "$jobs" >make.log 2>&1 || {
  grep -E 'error|Error' make.log | head -40 >&2
  echo "build_starpu_cuda.sh: make failed (errors above)" >&2
  exit 1
}
$sudo_cmd mkdir -p "$prefix"
$sudo_cmd make -s install >install.log 2>&1 || { tail -20 install.log >&2; exit 1; }
echo "$stamp_text" | $sudo_cmd tee "$stamp" >/dev/null
echo "build_starpu_cuda.sh: installed $prefix" >&2
echo "$prefix"
