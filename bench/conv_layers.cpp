// SPDX-License-Identifier: Apache-2.0
// conv_layers: every distinct convolution of VGG16-CIFAR and ResNet-18-CIFAR at batch 64, on one core, for the
// forward, backward-data and backward-weights passes: GFLOP/s of convgemm, of explicit im2col + BLIS sgemm (the
// im2col kernels), of oneDNN (when built with it) and of plain bli_sgemm on the same M, N, K; the working memory
// of convgemm and im2col; and the medians over the layers of the ratios convgemm/im2col, convgemm/oneDNN and
// convgemm/sgemm, per pass. Every pass also in bf16 (convgemm's vdpbf16ps kernel, or its emulation with --bf16
// emulated; codelets/cpu/bf16.hpp): its GFLOP/s (the fp32 pass's flops over its time), bf16/fp32 convgemm and
// bf16/Winograd (fp32) per layer and of the totals, and its distance from the fp32 result (largest |bf16 - fp32|
// over largest |fp32| of the pass's output).
//
//   taskset -c 1 conv_layers [--quick] [--layer TEXT...] [--pass P...] [--ukernel NAME] [--runs N] [--batch N]
//                            [--clock cpu|wall] [--bf16 native|amx|emulated|off] [--json FILE]
//
// Each figure is the median of --runs timed calls after one warm-up call, the implementations taking turns run
// after run; time is the thread's CPU time unless --clock wall. Everything runs on the calling thread: BLIS and
// oneDNN (an OpenMP build on Debian) are both limited to one thread.
#include <blis.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "codelets/cpu/convgemm.hpp"
#include "codelets/cpu/onednn_conv.hpp"
#include "codelets/cpu/winograd.hpp"
#include "codelets/cpu/kernels.hpp"
#include "core/blis_arch.hpp"
#include "core/cpu_features.hpp"
#include "core/errors.hpp"

#if DTNN_HAVE_ONEDNN
#include <dnnl.hpp>
#endif
#if DTNN_HAVE_OPENMP
#include <omp.h>
#endif

namespace {

using dtnn::Conv2dShape;
namespace k = dtnn::kernels::cpu;

// Same choice as dtnn::runtime::configure_blis (this program links only the kernels): core/blis_arch.hpp, skx on
// AVX-512 CPUs unless the user set BLIS_ARCH_TYPE, or the configuration of the level DTNN_MAX_CPU_ISA caps the CPU
// to; oneDNN capped likewise (DNNL_MAX_CPU_ISA, unless set). Must run before BLIS's and oneDNN's first use.
std::string configure_single_core() {
  const std::string reason = dtnn::configure_blis_arch().reason;
#if DTNN_HAVE_ONEDNN
  const dtnn::CpuIsaSetting& isa = dtnn::cpu_isa_setting();
  if (isa.capped()) {
    setenv("DNNL_MAX_CPU_ISA", isa.effective == dtnn::CpuIsa::kAvx2 ? "AVX2" : "SSE41", 0);
  }
#endif
  bli_thread_set_num_threads(1);
#if DTNN_HAVE_OPENMP
  // OMP_NUM_THREADS is read when the OpenMP runtime loads, before main; the call is what takes effect here.
  omp_set_num_threads(1);
#endif
  return reason;
}

struct Layer {
  std::string name;
  std::string nets;  // networks using it, with counts
  int multiplicity;  // uses over both networks
  Conv2dShape shape;
};

Conv2dShape square(int n, int c, int hw, int kout, int rs, int stride, int pad) {
  Conv2dShape sh;
  sh.n = n;
  sh.c = c;
  sh.h = sh.w = hw;
  sh.k = kout;
  sh.r = sh.s = rs;
  sh.stride_h = sh.stride_w = stride;
  sh.pad_top = sh.pad_bottom = sh.pad_left = sh.pad_right = pad;
  return sh;
}

// VGG16-CIFAR: 13 3x3 convolutions, 2x2 max-pools between stages (32, 16, 8, 4, 2). ResNet-18-CIFAR: 3x3 stem,
// four stages of two basic blocks (32, 16, 8, 4), the first block of stages 2-4 with stride 2 and a 1x1 stride-2
// projection.
std::vector<Layer> all_layers(int n) {
  return {
      {"conv3x3 3->64 @32", "VGG x1, ResNet-18 x1", 2, square(n, 3, 32, 64, 3, 1, 1)},
      {"conv3x3 64->64 @32", "VGG x1, ResNet-18 x4", 5, square(n, 64, 32, 64, 3, 1, 1)},
      {"conv3x3 64->128 @16", "VGG x1", 1, square(n, 64, 16, 128, 3, 1, 1)},
      {"conv3x3 128->128 @16", "VGG x1, ResNet-18 x3", 4, square(n, 128, 16, 128, 3, 1, 1)},
      {"conv3x3 128->256 @8", "VGG x1", 1, square(n, 128, 8, 256, 3, 1, 1)},
      {"conv3x3 256->256 @8", "VGG x2, ResNet-18 x3", 5, square(n, 256, 8, 256, 3, 1, 1)},
      {"conv3x3 256->512 @4", "VGG x1", 1, square(n, 256, 4, 512, 3, 1, 1)},
      {"conv3x3 512->512 @4", "VGG x2, ResNet-18 x3", 5, square(n, 512, 4, 512, 3, 1, 1)},
      {"conv3x3 512->512 @2", "VGG x3", 3, square(n, 512, 2, 512, 3, 1, 1)},
      {"conv3x3/2 64->128 @32", "ResNet-18 x1", 1, square(n, 64, 32, 128, 3, 2, 1)},
      {"conv1x1/2 64->128 @32", "ResNet-18 x1", 1, square(n, 64, 32, 128, 1, 2, 0)},
      {"conv3x3/2 128->256 @16", "ResNet-18 x1", 1, square(n, 128, 16, 256, 3, 2, 1)},
      {"conv1x1/2 128->256 @16", "ResNet-18 x1", 1, square(n, 128, 16, 256, 1, 2, 0)},
      {"conv3x3/2 256->512 @8", "ResNet-18 x1", 1, square(n, 256, 8, 512, 3, 2, 1)},
      {"conv1x1/2 256->512 @8", "ResNet-18 x1", 1, square(n, 256, 8, 512, 1, 2, 0)},
  };
}

enum Pass { kFwd, kBwdData, kBwdWeights, kPasses };
const char* const kPassNames[kPasses] = {"fwd", "bwd_data", "bwd_weights"};

// winograd: forward and backward-data of the 3x3 stride-1 layers only (codelets/cpu/winograd.hpp).
// onednn_bf16: dtnn's oneDNN codelets (--conv onednn: fp32 NCHW in and out, reordered to oneDNN's blocked bf16).
enum Impl { kConvgemm, kIm2col, kOneDnn, kSgemm, kWinograd, kConvgemmBf16, kOneDnnBf16, kImpls };
const char* const kImplNames[kImpls] = {"convgemm", "im2col", "onednn", "sgemm", "winograd", "convgemm_bf16",
                                        "onednn_bf16"};

struct GemmDims {
  dim_t m, n, k;
};

// The GEMM each pass amounts to (groups = 1): forward W[K, CRS] x col[CRS, NPQ]; backward-data
// W^T[CRS, K] x dY[K, NPQ]; backward-weights dY[K, NPQ] x col^T[NPQ, CRS].
GemmDims gemm_dims(const Conv2dShape& sh, Pass pass) {
  const dim_t crs = static_cast<dim_t>(sh.c) * sh.r * sh.s;
  const dim_t npq = static_cast<dim_t>(sh.n) * sh.out_h() * sh.out_w();
  switch (pass) {
    case kFwd:
      return {sh.k, npq, crs};
    case kBwdData:
      return {crs, npq, sh.k};
    default:
      return {sh.k, crs, npq};
  }
}

std::vector<float> random_floats(std::size_t count, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (auto& e : v) {
    e = dist(gen);
  }
  return v;
}

// Thread CPU time by default: everything runs on the calling thread, and on a shared machine it leaves out the
// time the thread waits for a core (it still includes cache and memory contention). --clock wall measures elapsed
// time instead.
bool g_wall_clock = false;

double now_seconds() {
  if (g_wall_clock) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  if (v.empty()) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

struct Tensors {
  std::vector<float> x, w, b, y, dy, dx, dw, db;
  explicit Tensors(const Conv2dShape& sh)
      : x(random_floats(static_cast<std::size_t>(sh.n) * sh.c * sh.h * sh.w, 1)),
        w(random_floats(static_cast<std::size_t>(sh.k) * sh.c / sh.groups * sh.r * sh.s, 2)),
        b(random_floats(static_cast<std::size_t>(sh.k), 3)),
        y(static_cast<std::size_t>(sh.n) * sh.k * sh.out_h() * sh.out_w()),
        dy(random_floats(y.size(), 4)),
        dx(x.size()),
        dw(w.size()),
        db(b.size()) {}
};

#if DTNN_HAVE_ONEDNN
// The three oneDNN convolution primitives on plain NCHW / OIHW fp32 tensors, with bias, as a framework would
// create them for this layer.
class OneDnnConv {
 public:
  OneDnnConv(const Conv2dShape& sh, Tensors& t) : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
    using dnnl::memory;
    using tag = memory::format_tag;
    const auto f32 = memory::data_type::f32;
    const memory::desc src({sh.n, sh.c, sh.h, sh.w}, f32, tag::nchw);
    const memory::desc wei({sh.k, sh.c, sh.r, sh.s}, f32, tag::oihw);
    const memory::desc bias({sh.k}, f32, tag::x);
    const memory::desc dst({sh.n, sh.k, sh.out_h(), sh.out_w()}, f32, tag::nchw);
    const memory::dims strides{sh.stride_h, sh.stride_w};
    const memory::dims dilates{sh.dil_h - 1, sh.dil_w - 1};
    const memory::dims pad_l{sh.pad_top, sh.pad_left};
    const memory::dims pad_r{sh.pad_bottom, sh.pad_right};
    const auto algo = dnnl::algorithm::convolution_direct;

    const dnnl::convolution_forward::primitive_desc fwd_pd(
        {dnnl::prop_kind::forward_training, algo, src, wei, bias, dst, strides, dilates, pad_l, pad_r}, engine_);
    const dnnl::convolution_backward_data::primitive_desc bwd_data_pd(
        {algo, src, wei, dst, strides, dilates, pad_l, pad_r}, engine_, fwd_pd);
    const dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd(
        {algo, src, wei, bias, dst, strides, dilates, pad_l, pad_r}, engine_, fwd_pd);
    impl_[kFwd] = fwd_pd.impl_info_str();
    impl_[kBwdData] = bwd_data_pd.impl_info_str();
    impl_[kBwdWeights] = bwd_weights_pd.impl_info_str();

    const auto mem = [&](const memory::desc& d, std::vector<float>& v) { return memory(d, engine_, v.data()); };
    fwd_ = dnnl::convolution_forward(fwd_pd);
    fwd_args_ = {{DNNL_ARG_SRC, mem(src, t.x)},
                 {DNNL_ARG_WEIGHTS, mem(wei, t.w)},
                 {DNNL_ARG_BIAS, mem(bias, t.b)},
                 {DNNL_ARG_DST, mem(dst, t.y)}};
    bwd_data_ = dnnl::convolution_backward_data(bwd_data_pd);
    bwd_data_args_ = {
        {DNNL_ARG_DIFF_DST, mem(dst, t.dy)}, {DNNL_ARG_WEIGHTS, mem(wei, t.w)}, {DNNL_ARG_DIFF_SRC, mem(src, t.dx)}};
    bwd_weights_ = dnnl::convolution_backward_weights(bwd_weights_pd);
    bwd_weights_args_ = {{DNNL_ARG_SRC, mem(src, t.x)},
                         {DNNL_ARG_DIFF_DST, mem(dst, t.dy)},
                         {DNNL_ARG_DIFF_WEIGHTS, mem(wei, t.dw)},
                         {DNNL_ARG_DIFF_BIAS, mem(bias, t.db)}};
  }

  void run(Pass pass) {
    switch (pass) {
      case kFwd:
        fwd_.execute(stream_, fwd_args_);
        break;
      case kBwdData:
        bwd_data_.execute(stream_, bwd_data_args_);
        break;
      default:
        bwd_weights_.execute(stream_, bwd_weights_args_);
        break;
    }
    stream_.wait();
  }
  [[nodiscard]] const std::string& impl(Pass pass) const { return impl_[pass]; }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::primitive fwd_, bwd_data_, bwd_weights_;
  std::unordered_map<int, dnnl::memory> fwd_args_, bwd_data_args_, bwd_weights_args_;
  std::string impl_[kPasses];
};
#endif

// C[m, n] = A[m, k] B[k, n], all row-major, beta = 0.
void plain_sgemm(const GemmDims& d, float* a, float* b, float* c) {
  float alpha = 1.0f;
  float beta = 0.0f;
  bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, d.m, d.n, d.k, &alpha, a, d.k, 1, b, d.n, 1, &beta, c, d.n, 1);
}

k::Bf16Math bf16_math(const std::string& bf16) {
  return bf16 == "native" ? k::Bf16Math::kAvx512Bf16 : bf16 == "amx" ? k::Bf16Math::kAmx : k::Bf16Math::kEmulated;
}

// Median seconds of each implementation for one pass; NaN where an implementation is absent (onednn is empty
// when the program was built without oneDNN). After one warm-up call each, the implementations take turns, run
// after run, so that a change in the machine's load affects them all alike.
std::vector<double> measure(const Conv2dShape& sh, Pass pass, Tensors& t, int runs,
                            const std::function<void()>& onednn, const std::string& bf16) {
  std::vector<std::function<void()>> impl(kImpls);
  switch (pass) {
    case kFwd:
      impl[kConvgemm] = [&] { k::conv2d_fwd_convgemm(sh, t.x.data(), t.w.data(), t.b.data(), 0, t.y.data()); };
      impl[kIm2col] = [&] { k::conv2d_fwd_im2col(sh, t.x.data(), t.w.data(), t.b.data(), t.y.data()); };
      if (k::winograd_fits(sh)) {
        impl[kWinograd] = [&] { k::conv2d_fwd_winograd(sh, t.x.data(), t.w.data(), t.b.data(), 0, t.y.data()); };
      }
      if (bf16 != "off") {
        impl[kConvgemmBf16] = [&, math = bf16_math(bf16)] {
          k::conv2d_fwd_convgemm_bf16(sh, t.x.data(), t.w.data(), t.b.data(), 0, t.y.data(), math);
        };
      }
      break;
    case kBwdData:
      impl[kConvgemm] = [&] { k::conv2d_bwd_data_convgemm(sh, t.dy.data(), t.w.data(), t.dx.data()); };
      impl[kIm2col] = [&] { k::conv2d_bwd_data_im2col(sh, t.dy.data(), t.w.data(), t.dx.data()); };
      if (k::winograd_fits(sh)) {
        impl[kWinograd] = [&] { k::conv2d_bwd_data_winograd(sh, t.dy.data(), t.w.data(), t.dx.data()); };
      }
      if (bf16 != "off") {
        impl[kConvgemmBf16] = [&, math = bf16_math(bf16)] {
          k::conv2d_bwd_data_convgemm_bf16(sh, t.dy.data(), t.w.data(), t.dx.data(), math);
        };
      }
      break;
    default:
      impl[kConvgemm] = [&] { k::conv2d_bwd_weights_convgemm(sh, t.x.data(), t.dy.data(), t.dw.data(), t.db.data()); };
      impl[kIm2col] = [&] { k::conv2d_bwd_weights_im2col(sh, t.x.data(), t.dy.data(), t.dw.data(), t.db.data()); };
      if (bf16 != "off") {
        impl[kConvgemmBf16] = [&, math = bf16_math(bf16)] {
          k::conv2d_bwd_weights_convgemm_bf16(sh, t.x.data(), t.dy.data(), t.dw.data(), t.db.data(), math);
        };
      }
      break;
  }
  if (bf16 != "off" && k::onednn_bf16_fits(sh)) {
    switch (pass) {
      case kFwd:
        impl[kOneDnnBf16] = [&] { k::conv2d_fwd_onednn_bf16(sh, t.x.data(), t.w.data(), t.b.data(), 0, t.y.data()); };
        break;
      case kBwdData:
        impl[kOneDnnBf16] = [&] { k::conv2d_bwd_data_onednn_bf16(sh, t.dy.data(), t.w.data(), t.dx.data()); };
        break;
      default:
        impl[kOneDnnBf16] = [&] {
          k::conv2d_bwd_weights_onednn_bf16(sh, t.x.data(), t.dy.data(), t.dw.data(), t.db.data());
        };
        break;
    }
  }
  impl[kOneDnn] = onednn;
  const GemmDims d = gemm_dims(sh, pass);
  auto a = random_floats(static_cast<std::size_t>(d.m * d.k), 5);
  auto b = random_floats(static_cast<std::size_t>(d.k * d.n), 6);
  std::vector<float> c(static_cast<std::size_t>(d.m * d.n));
  impl[kSgemm] = [&] { plain_sgemm(d, a.data(), b.data(), c.data()); };

  std::vector<std::vector<double>> times(kImpls);
  for (int run = -1; run < runs; ++run) {
    for (int i = 0; i < kImpls; ++i) {
      if (!impl[i]) {
        continue;
      }
      const double start = now_seconds();
      impl[i]();
      if (run >= 0) {
        times[i].push_back(now_seconds() - start);
      }
    }
  }
  std::vector<double> seconds(kImpls);
  for (int i = 0; i < kImpls; ++i) {
    seconds[i] = median(times[i]);
  }
  return seconds;
}

struct Args {
  bool quick = false;
  int runs = 5;
  int batch = 64;
  std::string json_file;
  std::string clock = "cpu";
  std::vector<std::string> only_passes;
  std::vector<std::string> only_layers;
  std::string ukernel = "auto";
  std::string bf16 = dtnn::cpu_has_avx512_bf16() ? "native" : "off";
};

void add_options(CLI::App& app, Args& a) {
  app.add_option("--bf16", a.bf16,
                 "every pass in bf16 too: native (vdpbf16ps; the default where the CPU has it), amx (TDPBF16PS), "
                 "emulated, or off (the default elsewhere)")
      ->check(CLI::IsMember({"native", "amx", "emulated", "off"}));
  app.add_option("--clock", a.clock, "cpu: CPU time of the thread (default); wall: elapsed time")
      ->check(CLI::IsMember({"cpu", "wall"}));
  app.add_option("--pass", a.only_passes, "measure only these passes (fwd, bwd_data, bwd_weights)")
      ->check(CLI::IsMember({"fwd", "bwd_data", "bwd_weights"}));
  app.add_option("--layer", a.only_layers, "measure only the layers whose name contains this text (repeatable)");
  app.add_option("--ukernel", a.ukernel,
                 "convgemm's micro-kernel: auto (its selection), blis, or one of its own this CPU runs");
  app.add_flag("--quick", a.quick, "three layers at batch 8, for smoke-testing");
  app.add_option("--runs", a.runs, "timed runs per measurement (median reported)")->check(CLI::PositiveNumber);
  app.add_option("--batch", a.batch, "samples per call")->check(CLI::PositiveNumber);
  app.add_option("--json", a.json_file, "also write every number to this file");
}

// Prints what runs the measurements (BLIS and its blocking, oneDNN) and returns it as the JSON document's header.
nlohmann::json describe_libraries(const std::string& blis_reason, const Args& a) {
  const k::GemmBlocking blk = k::convgemm_blocking();
  const std::string arch = bli_arch_string(bli_arch_query_id());
  fmt::print("BLIS {}: {} ({}), sgemm micro-kernel {}x{}, KC {} MC {} NC {}, 1 thread\n", bli_info_get_version_str(),
             arch, blis_reason, blk.mr, blk.nr, blk.kc, blk.mc, blk.nc);
  std::string onednn_version;
#if DTNN_HAVE_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  onednn_version = fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
  fmt::print("oneDNN {} ({} CPU runtime threads)\n", onednn_version,
#if DTNN_HAVE_OPENMP
             omp_get_max_threads()
#else
             "OpenMP not linked: unknown number of"
#endif
  );
#else
  fmt::print("oneDNN: not found\n");
#endif
  nlohmann::json doc;
  doc["blis"] = {{"version", bli_info_get_version_str()},
                 {"arch", arch},
                 {"reason", blis_reason},
                 {"blocking", {{"mr", blk.mr}, {"nr", blk.nr}, {"kc", blk.kc}, {"mc", blk.mc}, {"nc", blk.nc}}}};
  doc["onednn"] = onednn_version.empty() ? nlohmann::json(nullptr) : nlohmann::json(onednn_version);
  doc["runs"] = a.runs;
  doc["bf16_math"] = a.bf16;
  doc["clock"] = a.clock;
  doc["layers"] = nlohmann::json::array();
  return doc;
}

// The layers to measure: all of them, the three of --quick, or those --layer names.
std::vector<Layer> selected_layers(Args& a) {
  std::vector<Layer> layers = all_layers(a.quick ? 8 : a.batch);
  if (a.quick) {
    layers = {layers[1], layers[11], layers[8]};
    a.batch = 8;
  }
  if (!a.only_layers.empty()) {
    std::erase_if(layers, [&](const Layer& l) {
      return std::none_of(a.only_layers.begin(), a.only_layers.end(),
                          [&](const std::string& part) { return l.name.find(part) != std::string::npos; });
    });
  }
  return layers;
}

// What the layers' measurements add up to.
struct Totals {
  std::vector<double> ratios[kPasses][3];            // per layer: convgemm over im2col, oneDNN, sgemm
  std::vector<double> bf16_ratios[kPasses];          // per pass and layer: convgemm's bf16 over fp32 GFLOP/s
  double bf16_best_fp32_seconds[kPasses] = {};       // per pass: the faster of fp32 convgemm and Winograd, weighted
  double best_bf16_seconds[kPasses] = {};            // per pass: the faster of convgemm's and oneDNN's bf16, weighted
  double weighted_seconds[kPasses][kImpls] = {};     // each layer's time x its multiplicity
  double variant_seconds[kPasses] = {};              // the same for --conv winograd (convgemm where it does not serve)
};

nlohmann::json layer_json(const Layer& layer) {
  const Conv2dShape& sh = layer.shape;
  return {{"name", layer.name},
          {"networks", layer.nets},
          {"multiplicity", layer.multiplicity},
          {"shape",
           {{"n", sh.n},
            {"c", sh.c},
            {"h", sh.h},
            {"w", sh.w},
            {"k", sh.k},
            {"r", sh.r},
            {"s", sh.s},
            {"stride", sh.stride_h},
            {"pad", sh.pad_top}}},
          {"gflop", sh.flops() * 1e-9},
          {"workspace_bytes",
           {{"convgemm", k::convgemm_workspace_bytes(sh)},
            {"im2col", k::im2col_workspace_bytes(sh)},
            {"convgemm_bf16", k::convgemm_bf16_workspace_bytes(sh)}}}};
}

// Largest |bf16 - fp32| over largest |fp32| of the pass's output: how far bf16 inputs move the result.
double bf16_error(const Conv2dShape& sh, Pass pass, Tensors& t, const std::string& bf16) {
  const std::size_t count = pass == kFwd ? t.y.size() : pass == kBwdData ? t.dx.size() : t.dw.size();
  std::vector<float> fp32(count);
  std::vector<float> half(count);
  const k::Bf16Math math = bf16_math(bf16);
  if (pass == kFwd) {
    k::conv2d_fwd_convgemm(sh, t.x.data(), t.w.data(), nullptr, 0, fp32.data());
    k::conv2d_fwd_convgemm_bf16(sh, t.x.data(), t.w.data(), nullptr, 0, half.data(), math);
  } else if (pass == kBwdData) {
    k::conv2d_bwd_data_convgemm(sh, t.dy.data(), t.w.data(), fp32.data());
    k::conv2d_bwd_data_convgemm_bf16(sh, t.dy.data(), t.w.data(), half.data(), math);
  } else {
    k::conv2d_bwd_weights_convgemm(sh, t.x.data(), t.dy.data(), fp32.data(), nullptr);
    k::conv2d_bwd_weights_convgemm_bf16(sh, t.x.data(), t.dy.data(), half.data(), nullptr, math);
  }
  double err = 0.0;
  double scale = 0.0;
  for (std::size_t i = 0; i < fp32.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(half[i]) - fp32[i]));
    scale = std::max(scale, std::abs(static_cast<double>(fp32[i])));
  }
  return scale > 0.0 ? err / scale : err;
}

// Measures every pass of one layer asked for: prints a row each, adds them to the totals, returns the layer's JSON.
nlohmann::json measure_layer(const Layer& layer, const Args& a, Totals& totals) {
  const Conv2dShape& sh = layer.shape;
  Tensors t(sh);
#if DTNN_HAVE_ONEDNN
  OneDnnConv dnn(sh, t);
#endif
  nlohmann::json jl = layer_json(layer);
  for (int p = 0; p < kPasses; ++p) {
    if (!a.only_passes.empty() &&
        std::find(a.only_passes.begin(), a.only_passes.end(), kPassNames[p]) == a.only_passes.end()) {
      continue;
    }
    const auto pass = static_cast<Pass>(p);
    std::function<void()> onednn;
    std::string onednn_impl;
#if DTNN_HAVE_ONEDNN
    onednn = [&] { dnn.run(pass); };
    onednn_impl = dnn.impl(pass);
#endif
    const std::vector<double> seconds = measure(sh, pass, t, a.runs, onednn, a.bf16);
    double gflops[kImpls];
    nlohmann::json jp;
    for (int i = 0; i < kImpls; ++i) {
      gflops[i] = sh.flops() / seconds[i] * 1e-9;
      totals.weighted_seconds[p][i] += layer.multiplicity * seconds[i];
      jp["seconds"][kImplNames[i]] = std::isfinite(seconds[i]) ? nlohmann::json(seconds[i]) : nullptr;
      jp["gflops"][kImplNames[i]] = std::isfinite(gflops[i]) ? nlohmann::json(gflops[i]) : nullptr;
    }
    const double r[3] = {gflops[kConvgemm] / gflops[kIm2col], gflops[kConvgemm] / gflops[kOneDnn],
                         gflops[kConvgemm] / gflops[kSgemm]};
    for (int j = 0; j < 3; ++j) {
      totals.ratios[p][j].push_back(r[j]);
    }
    const GemmDims d = gemm_dims(sh, pass);
    jp["gemm"] = {{"m", d.m}, {"n", d.n}, {"k", d.k}};
    jp["onednn_impl"] = onednn_impl;
    const std::string used = k::convgemm_ukernel(sh, static_cast<k::ConvPass>(p));
    jp["ukernel"] = used;
    std::string bf16_cell;
    if (std::isfinite(seconds[kConvgemmBf16])) {
      const double ratio = gflops[kConvgemmBf16] / gflops[kConvgemm];
      const double error = bf16_error(sh, pass, t, a.bf16);
      totals.bf16_ratios[p].push_back(ratio);
      // Against what a --conv winograd layer runs in fp32: Winograd where it serves, convgemm elsewhere.
      const double fp32_best = std::isfinite(seconds[kWinograd]) ? std::min(seconds[kWinograd], seconds[kConvgemm])
                                                                 : seconds[kConvgemm];
      totals.bf16_best_fp32_seconds[p] += layer.multiplicity * fp32_best;
      jp["bf16_over_fp32"] = ratio;
      jp["bf16_over_best_fp32"] = fp32_best / seconds[kConvgemmBf16];
      jp["bf16_error"] = error;
      bf16_cell = fmt::format("  bf16 {:.1f} GFLOP/s, {:.2f}x fp32, {:.2f}x best fp32, error {:.1e}",
                              gflops[kConvgemmBf16], ratio, fp32_best / seconds[kConvgemmBf16], error);
      double best_bf16 = seconds[kConvgemmBf16];
      if (std::isfinite(seconds[kOneDnnBf16])) {
        best_bf16 = std::min(best_bf16, seconds[kOneDnnBf16]);
        jp["onednn_bf16_impl"] = k::onednn_bf16_impl(sh, static_cast<k::ConvPass>(p));
        jp["onednn_bf16_over_convgemm_bf16"] = seconds[kConvgemmBf16] / seconds[kOneDnnBf16];
        bf16_cell += fmt::format("; oneDNN bf16 {:.1f} GFLOP/s ({:.2f}x convgemm's, {})", gflops[kOneDnnBf16],
                                 seconds[kConvgemmBf16] / seconds[kOneDnnBf16],
                                 k::onednn_bf16_impl(sh, static_cast<k::ConvPass>(p)));
      }
      totals.best_bf16_seconds[p] += layer.multiplicity * best_bf16;
    }
    jl["passes"][kPassNames[p]] = jp;
    // Winograd's GFLOP/s are effective: the direct convolution's flops over its time.
    fmt::print("{:<24} {:>3} {:<11} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>7.2f} {:>7.2f} {:>7.2f} {:>9.1f} {:>7.2f} "
               "{:>9} {:>9}  {:<13} {}{}\n",
               layer.name, layer.multiplicity, kPassNames[p], gflops[kConvgemm], gflops[kIm2col], gflops[kOneDnn],
               gflops[kSgemm], r[0], r[1], r[2], gflops[kWinograd], gflops[kWinograd] / gflops[kOneDnn],
               k::convgemm_workspace_bytes(sh) / 1024, k::im2col_workspace_bytes(sh) / 1024, used, onednn_impl,
               bf16_cell);
    // The winograd variant of a network: Winograd where it serves, convgemm elsewhere.
    totals.variant_seconds[p] +=
        layer.multiplicity * (std::isfinite(seconds[kWinograd]) ? seconds[kWinograd] : seconds[kConvgemm]);
    std::fflush(stdout);
  }
  return jl;
}

// The goals of the convgemm issue (>= 0.95x im2col, >= 1.0x oneDNN, >= 0.70x sgemm, medians of per-layer ratios)
// and the network totals of --conv winograd, printed and added to the document.
void summarize(const Totals& totals, std::size_t layers, nlohmann::json& doc) {
  const double goal[3] = {0.95, 1.0, 0.70};
  const char* const goal_names[3] = {"convgemm/im2col", "convgemm/oneDNN", "convgemm/sgemm"};
  fmt::print(
      "\nmedian over the {} layers of the per-layer ratio (goal), and the ratio of network totals "
      "(each layer weighted by its multiplicity)\n",
      layers);
  fmt::print("{:<12} {:>22} {:>22} {:>22}\n", "pass", goal_names[0], goal_names[1], goal_names[2]);
  const int versus[3] = {kIm2col, kOneDnn, kSgemm};
  for (int p = 0; p < kPasses; ++p) {
    if (totals.ratios[p][0].empty()) {
      continue;
    }
    std::string row = fmt::format("{:<12}", kPassNames[p]);
    for (int j = 0; j < 3; ++j) {
      const double med = median(totals.ratios[p][j]);
      const double total = totals.weighted_seconds[p][versus[j]] / totals.weighted_seconds[p][kConvgemm];
      const char* verdict = std::isnan(med) ? "n/a" : med >= goal[j] ? "met" : "MISSED";
      row += fmt::format(" {:>5.2f} ({:.2f}) {:<6} {:>5.2f}", med, goal[j], verdict, total);
      doc["medians"][kPassNames[p]][goal_names[j]] = {
          {"median", std::isfinite(med) ? nlohmann::json(med) : nullptr},
          {"goal", goal[j]},
          {"met", std::isfinite(med) && med >= goal[j]},
          {"ratio_of_totals", std::isfinite(total) ? nlohmann::json(total) : nullptr}};
    }
    fmt::print("{}\n", row);
  }
  for (int p = 0; p < kPasses; ++p) {
    if (totals.bf16_ratios[p].empty()) {
      continue;
    }
    const double med = median(totals.bf16_ratios[p]);
    const double total = totals.weighted_seconds[p][kConvgemm] / totals.weighted_seconds[p][kConvgemmBf16];
    const double best = totals.bf16_best_fp32_seconds[p] / totals.weighted_seconds[p][kConvgemmBf16];
    fmt::print("{}{:<12} in bf16 against fp32 convgemm: median over the layers {:.2f}, ratio of totals {:.2f}; "
               "against the faster of fp32 convgemm and Winograd per layer, ratio of totals {:.2f}\n",
               p == 0 || totals.bf16_ratios[p - 1].empty() ? "\n" : "", kPassNames[p], med, total, best);
    doc["bf16"][kPassNames[p]] = {
        {"median_bf16_over_fp32", med}, {"ratio_of_totals", total}, {"ratio_of_totals_over_best_fp32", best}};
    if (totals.weighted_seconds[p][kOneDnnBf16] > 0.0) {
      const double dnn = totals.weighted_seconds[p][kConvgemmBf16] / totals.weighted_seconds[p][kOneDnnBf16];
      const double best_bf16 = totals.bf16_best_fp32_seconds[p] / totals.best_bf16_seconds[p];
      fmt::print("{:<12} oneDNN's bf16 against convgemm's, ratio of totals {:.2f}; the faster bf16 per layer against "
                 "the faster fp32 per layer, ratio of totals {:.2f}\n",
                 "", dnn, best_bf16);
      doc["bf16"][kPassNames[p]]["onednn_over_convgemm_bf16"] = dnn;
      doc["bf16"][kPassNames[p]]["best_bf16_over_best_fp32"] = best_bf16;
    }
  }
  fmt::print("\nnetwork totals of --conv winograd (Winograd where it serves, convgemm elsewhere): oneDNN / winograd, "
             "convgemm / winograd\n");
  for (int p = 0; p < kPasses; ++p) {
    if (totals.variant_seconds[p] <= 0.0) {
      continue;
    }
    const double vs_dnn = totals.weighted_seconds[p][kOneDnn] / totals.variant_seconds[p];
    const double vs_cg = totals.weighted_seconds[p][kConvgemm] / totals.variant_seconds[p];
    fmt::print("{:<12} {:>5.2f} {:>5.2f}\n", kPassNames[p], vs_dnn, vs_cg);
    doc["winograd_variant"][kPassNames[p]] = {
        {"onednn_over_variant", std::isfinite(vs_dnn) ? nlohmann::json(vs_dnn) : nullptr},
        {"convgemm_over_variant", vs_cg}};
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "conv_layers: convgemm against im2col + sgemm, oneDNN and plain sgemm on the convolutions of "
      "VGG16-CIFAR and ResNet-18-CIFAR, one core"};
  Args a;
  add_options(app, a);
  CLI11_PARSE(app, argc, argv);
  g_wall_clock = a.clock == "wall";

  const std::string blis_reason = configure_single_core();
  try {
    k::convgemm_force_ukernel(a.ukernel);
  } catch (const dtnn::InvalidArgument& e) {
    fmt::print(stderr, "conv_layers: --ukernel: {}\n", e.what());
    return 2;
  }
  if (a.bf16 == "native" && !dtnn::cpu_has_avx512_bf16()) {
    fmt::print(stderr, "conv_layers: --bf16 native: this CPU has no AVX512-BF16 (or DTNN_MAX_CPU_ISA caps it), "
               "expected --bf16 emulated or off\n");
    return 2;
  }
  if (a.bf16 == "amx" && !dtnn::cpu_has_amx_bf16()) {
    fmt::print(stderr, "conv_layers: --bf16 amx: this CPU has no AMX-BF16 (or DTNN_MAX_CPU_ISA caps it, or Linux did "
               "not grant its tile state), expected --bf16 native, emulated or off\n");
    return 2;
  }
  nlohmann::json doc = describe_libraries(blis_reason, a);
  const std::vector<Layer> layers = selected_layers(a);
  doc["batch"] = a.batch;  // --quick's 8
  fmt::print("batch {}, median of {} runs after a warm-up, {} time; GFLOP/s (2 x multiply-adds of the pass)\n\n",
             a.batch, a.runs, g_wall_clock ? "elapsed" : "thread CPU");
  fmt::print("{:<24} {:>3} {:<11} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>9} {:>7} {:>9} {:>9}  {:<13} {}\n",
             "layer", "x", "pass", "convgemm", "im2col", "oneDNN", "sgemm", "cg/i2c", "cg/dnn", "cg/gemm", "winograd",
             "wg/dnn", "ws cg KiB", "ws i2c KiB", "ukernel", "oneDNN impl");
  Totals totals;
  for (const Layer& layer : layers) doc["layers"].push_back(measure_layer(layer, a, totals));
  summarize(totals, layers.size(), doc);
  if (!a.json_file.empty()) {
    std::ofstream out(a.json_file);
    out << doc.dump(2) << '\n';
    if (!out) {
      fmt::print(stderr, "conv_layers: cannot write {}\n", a.json_file);
      return 1;
    }
    fmt::print("\nwrote {}\n", a.json_file);
  }
  return 0;
}
