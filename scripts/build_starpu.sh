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
#   --maxbuffers N STARPU_NMAXBUFS, the buffers one task may name (Debian's 8; default 8, see docs/design.md)
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
# The two CUDA 13 incompatibilities of StarPU 1.3.10 are patched (see patch_cuda13 below), and the start-up
# warning about FxT is printed only when a trace is recorded (patch_fxt_warning).
set -euo pipefail

me="build_starpu.sh"
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

# Everything that changes the result goes into the stamp: a prefix is reused only when it matches.
# (Bump patch_level when a patch changes; the simulation variant's own patch has its own number.)
patch_level=2
[ "$simgrid" = 1 ] && patch_level="$patch_level+sim4"
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
stamp_text="starpu=$starpu_version cuda=${cuda_version:-none} patch=$patch_level options=${options[*]}"
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
packages=(dpkg-dev build-essential pkg-config python3 libhwloc-dev)
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

patch_cuda13() {
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
        sys.exit(f"build_starpu.sh: could not patch {legacy} out of {path}")
open(path, "w").write(s)
PY
}
[ -z "$cuda_version" ] || patch_cuda13

# StarPU warns at every start that FxT "slows down a bit" when it is compiled in; dtnn records no trace unless
# asked (--fxt) and measures no cost then (bench/fxt_overhead.py), so the warning is kept for traced runs only.
patch_fxt_warning() {
  sed -i 's/^\t_STARPU_DISP("Warning: StarPU was configured with --with-fxt, /\tif (starpu_fxt_is_enabled()) _STARPU_DISP("Warning: StarPU was configured with --with-fxt, /' \
    src/core/workers.c
  grep -q 'if (starpu_fxt_is_enabled()) _STARPU_DISP("Warning: StarPU was configured with --with-fxt' src/core/workers.c
}
patch_fxt_warning

# The simulation variant only: dm, dmda, dmdar and dmdas make one placement decision at a time, from the
# prediction to the update of the chosen worker's expected end (StarPU does not lock across the two). In a real
# run two workers are hardly ever in that window at once; in SimGrid, tasks of equal predicted length end at the
# same simulated instant and the performance model's lock is a simcall, so both decisions read both workers as
# idle, the tie goes to the first worker, and the second sat idle (docs/simulation.md, Validation).
patch_dmda_decisions() {
  python3 - src/sched_policies/deque_modeling_policy_data_aware.c <<'PY'
import sys
path = sys.argv[1]
s = open(path).read()
def sub(old, new):
    global s
    if s.count(old) != 1:
        sys.exit(f"build_starpu.sh: dmda patch: expected one '{old[:60]}' in {path}, found {s.count(old)}")
    s = s.replace(old, new)
sub("""	int num_priorities;
};""", """	int num_priorities;
	starpu_pthread_mutex_t dtnn_decision; /* dtnn: one placement decision at a time */
};""")
sub("""	double fitness[nworkers_ctx][STARPU_MAXIMPLEMENTATIONS];


	compute_all_performance_predictions(task,""", """	double fitness[nworkers_ctx][STARPU_MAXIMPLEMENTATIONS];

	/* relaxed while waiting: the decision under way may have to lock this worker */
	starpu_worker_relax_on();
	STARPU_PTHREAD_MUTEX_LOCK(&dt->dtnn_decision);
	starpu_worker_relax_off();
	compute_all_performance_predictions(task,""")
sub("""		/* we should now have the best worker in variable "best" */
		return push_task_on_best_worker(task, best, model_best, transfer_model_best, prio, sched_ctx_id);
	}
	else
	{
		return exp_end[best_in_ctx][selected_impl] ;
	}""", """		/* we should now have the best worker in variable "best" */
		int ret = push_task_on_best_worker(task, best, model_best, transfer_model_best, prio, sched_ctx_id);
		STARPU_PTHREAD_MUTEX_UNLOCK(&dt->dtnn_decision);
		return ret;
	}
	else
	{
		STARPU_PTHREAD_MUTEX_UNLOCK(&dt->dtnn_decision);
		return exp_end[best_in_ctx][selected_impl] ;
	}""")
sub("""	_STARPU_MALLOC(dt->queue_array, STARPU_NMAXWORKERS*sizeof(struct _starpu_fifo_taskq*));""",
    """	_STARPU_MALLOC(dt->queue_array, STARPU_NMAXWORKERS*sizeof(struct _starpu_fifo_taskq*));
	STARPU_PTHREAD_MUTEX_INIT(&dt->dtnn_decision, NULL);""")
sub("""	free(dt);""", """	STARPU_PTHREAD_MUTEX_DESTROY(&dt->dtnn_decision);
	free(dt);""")
open(path, "w").write(s)
PY
}

# The simulation variant only: `dtnn simulate --scatter` draws each task's simulated duration around its model's
# mean (StarPU 1.3.10 leaves this as a TODO in _starpu_simgrid_submit_job; docs/simulation.md, Validation).
patch_duration_scatter() {
  python3 - src/core/simgrid.c src/core/perfmodel/perfmodel_history.c <<'PY'
import sys
sim, hist = sys.argv[1], sys.argv[2]
def patch(path, old, new):
    s = open(path).read()
    if s.count(old) != 1:
        sys.exit(f"build_starpu.sh: scatter patch: expected one '{old[:60]}' in {path}, found {s.count(old)}")
    open(path, "w").write(s.replace(old, new))
patch(hist, "int starpu_perfmodel_set_per_devices_size_base(", """/* dtnn: the standard deviation of a job's history entry, NAN where it has none (the simulation's duration scatter) */
double _dtnn_history_based_job_deviation(struct starpu_perfmodel *model, struct starpu_perfmodel_arch *arch, struct _starpu_job *j, unsigned nimpl);
double _dtnn_history_based_job_deviation(struct starpu_perfmodel *model, struct starpu_perfmodel_arch *arch, struct _starpu_job *j, unsigned nimpl)
{
	double deviation = NAN;
	struct starpu_perfmodel_history_table *elt;
	int comb = starpu_perfmodel_arch_comb_get(arch->ndevices, arch->devices);
	uint32_t key = _starpu_compute_buffers_footprint(model, arch, nimpl, j);
	if (comb == -1)
		return NAN;
	STARPU_PTHREAD_RWLOCK_RDLOCK(&model->state->model_rwlock);
	if (model->state->per_arch[comb] != NULL)
	{
		struct starpu_perfmodel_history_table *history = model->state->per_arch[comb][nimpl].history;
		HASH_FIND_UINT32_T(history, &key, elt);
		if (elt != NULL && elt->history_entry != NULL && elt->history_entry->nsample)
			deviation = elt->history_entry->deviation;
	}
	STARPU_PTHREAD_RWLOCK_UNLOCK(&model->state->model_rwlock);
	return deviation;
}

int starpu_perfmodel_set_per_devices_size_base(""")
patch(sim, "/* Task execution submitted by StarPU */\n", """#include <math.h>
/* dtnn: with DTNN_SIMGRID_SCATTER=1 a task lasts a draw from the log-normal distribution of its history entry's
 * mean and deviation, not the mean, from one deterministic generator (DTNN_SIMGRID_SEED): real durations scatter
 * around their means, which the schedulers that plan by the means (dm*) suffer from and the stealing ones absorb. */
double _dtnn_history_based_job_deviation(struct starpu_perfmodel *model, struct starpu_perfmodel_arch *arch, struct _starpu_job *j, unsigned nimpl);
static double _dtnn_scatter_length(struct _starpu_job *j, struct starpu_perfmodel_arch *arch, double mean)
{
	static int scatter = -1;
	static unsigned long long state;
	if (scatter == -1)
	{
		scatter = starpu_get_env_number_default("DTNN_SIMGRID_SCATTER", 0);
		state = 0x9E3779B97F4A7C15ULL ^ (unsigned long long) starpu_get_env_number_default("DTNN_SIMGRID_SEED", 1);
	}
	struct starpu_perfmodel *model = j->task->cl ? j->task->cl->model : NULL;
	if (scatter <= 0 || model == NULL || model->type != STARPU_HISTORY_BASED || !(mean > 0.0))
		return mean;
	double deviation = _dtnn_history_based_job_deviation(model, arch, j, j->nimpl);
	if (!(deviation > 0.0))
		return mean;
	double u[2];
	int i;
	for (i = 0; i < 2; i++)
	{
		/* xorshift64*, 53 bits in (0, 1) */
		state ^= state >> 12;
		state ^= state << 25;
		state ^= state >> 27;
		u[i] = ((double) ((state * 0x2545F4914F6CDD1DULL) >> 11) + 0.5) / 9007199254740992.0;
	}
	double z = sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
	double cv = deviation / mean;
	double sigma2 = log(1.0 + cv * cv);
	return mean * exp(sqrt(sigma2) * z - sigma2 / 2.0);
}

/* Task execution submitted by StarPU */
""")
patch(sim, """                /* TODO: option to add variance according to performance model,
                 * to be able to easily check scheduling robustness */
""", """		length = _dtnn_scatter_length(j, perf_arch, length);
""")
PY
}
# The simulation variant only: `dtnn simulate --worker-speeds` gives each simulated CPU worker a speed of its own
# against the models' means (StarPU's CPU models are one per architecture, its simulated cores all alike); a real
# machine's cores need not be (docs/simulation.md, "Cores of unequal speed").
patch_worker_speeds() {
  python3 - src/core/simgrid.c <<'PY'
import sys
sim = sys.argv[1]
s = open(sim).read()
anchor = "/* Task execution submitted by StarPU */\n"
call = "\t\tlength = _dtnn_scatter_length(j, perf_arch, length);\n"
if s.count(anchor) != 1 or s.count(call) != 1:
    sys.exit(f"build_starpu.sh: worker speed patch: expected the scatter patch in {sim}")
s = s.replace(anchor, """/* dtnn: DTNN_SIMGRID_WORKER_SPEEDS, comma-separated speeds of the CPU workers in the order of their devid (StarPU's
 * CPU index), divide the durations of the tasks each runs; workers past the list, and the other kinds, keep 1. */
#define DTNN_MAX_WORKER_SPEEDS 1024
double _dtnn_worker_length(int workerid, double length);
double _dtnn_worker_length(int workerid, double length)
{
	static int parsed = 0;
	static int count = 0;
	static double speeds[DTNN_MAX_WORKER_SPEEDS];
	if (!parsed)
	{
		const char *list = starpu_getenv("DTNN_SIMGRID_WORKER_SPEEDS");
		while (list && *list && count < DTNN_MAX_WORKER_SPEEDS)
		{
			char *end;
			double v = strtod(list, &end);
			STARPU_ASSERT_MSG(end != list && v > 0.0, "DTNN_SIMGRID_WORKER_SPEEDS: '%s' is not a positive number", list);
			speeds[count++] = v;
			list = *end == ',' ? end + 1 : end;
		}
		parsed = 1;
	}
	if (count == 0 || starpu_worker_get_type(workerid) != STARPU_CPU_WORKER)
		return length;
	int devid = starpu_worker_get_devid(workerid);
	return devid >= 0 && devid < count ? length / speeds[devid] : length;
}

""" + anchor)
s = s.replace(call, call + "\t\tlength = _dtnn_worker_length(workerid, length);\n")
open(sim, "w").write(s)
PY
}
# The simulation variant only: DTNN_SIMGRID_TASK_OVERHEAD_US, the time a real CPU worker spends between two of its
# tasks (StarPU's pop, the previous task's termination and its successors' pushes, the callbacks), charged to the
# simulated worker before each task, where StarPU 1.3.10 charges 1 us per buffer (STARPU_SIMGRID_FETCHING_INPUT_COST);
# `dtnn calibrate` measures it (docs/simulation.md, "Time between tasks").
patch_task_overhead() {
  python3 - src/drivers/cpu/driver_cpu.c <<'PY'
import sys
path = sys.argv[1]
s = open(path).read()
fetch = "\t\tres = _starpu_fetch_task_input(task, j, 1);\n"
head = "int _starpu_cpu_driver_run_once(struct _starpu_worker *cpu_worker)\n"
if s.count(fetch) != 1 or s.count(head) != 1:
    sys.exit(f"build_starpu.sh: task overhead patch: expected one fetch and one run_once in {path}")
s = s.replace(head, """#ifdef STARPU_SIMGRID
/* dtnn: the simulated worker's time between two tasks, DTNN_SIMGRID_TASK_OVERHEAD_US (0 or unset: none) */
double _dtnn_task_overhead_s(void);
double _dtnn_task_overhead_s(void)
{
	static double overhead = -1.0;
	if (overhead < 0.0)
	{
		const char *v = starpu_getenv("DTNN_SIMGRID_TASK_OVERHEAD_US");
		char *end = NULL;
		overhead = v ? strtod(v, &end) * 1e-6 : 0.0;
		STARPU_ASSERT_MSG(!v || (end != v && overhead >= 0.0), "DTNN_SIMGRID_TASK_OVERHEAD_US: '%s' is not a non-negative number", v);
	}
	return overhead;
}
#endif

""" + head)
s = s.replace(fetch, """#ifdef STARPU_SIMGRID
		if (_dtnn_task_overhead_s() > 0.0)
			starpu_sleep(_dtnn_task_overhead_s());
#endif
""" + fetch)
open(path, "w").write(s)
PY
}
[ "$simgrid" = 0 ] || { patch_dmda_decisions; patch_duration_scatter; patch_worker_speeds; patch_task_overhead; }

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
