// SPDX-License-Identifier: Apache-2.0
#include "app/options.hpp"

#include "core/errors.hpp"
#include "io/text.hpp"
#include "runtime/cuda.hpp"
#include "runtime/host_memory.hpp"
#include "runtime/machine.hpp"

namespace dtnn::app {

const Names<ConvVariant>& conv_names() {
  static const Names<ConvVariant> names = {{"convgemm", ConvVariant::kConvgemm},
                                           {"im2col", ConvVariant::kIm2col},
                                           {"winograd", ConvVariant::kWinograd},
                                           {"auto", ConvVariant::kAuto},
                                           {"onednn", ConvVariant::kOneDnn}};
  return names;
}

const Names<codelets::Precision>& precision_names() {
  static const Names<codelets::Precision> names = {{"fp32", codelets::Precision::kFp32},
                                                   {"bf16", codelets::Precision::kBf16},
                                                   {"bf16-emulated", codelets::Precision::kBf16Emulated},
                                                   {"bf16-amx", codelets::Precision::kBf16Amx},
                                                   {"tf32", codelets::Precision::kTf32}};
  return names;
}

const Names<runtime::Priorities>& priority_names() {
  static const Names<runtime::Priorities> names = {{"on", runtime::Priorities::kOn},
                                                   {"off", runtime::Priorities::kOff}};
  return names;
}

void add_run_options(CLI::App* app, RunOptions& run, StepFields step) {
  app->add_option("--model", run.model.name, "model name (see `dtnn models`)")->capture_default_str();
  app->add_option("--dataset", run.data.dataset,
                  "fashion-mnist, mnist, cifar10, cifar100, h5, text (byte-level text for a model of token ids: "
                  "windows of its input length, 90/10 split by fortune or paragraph; docs/text.md) or synthetic")
      ->check(CLI::IsMember({"fashion-mnist", "mnist", "cifar10", "cifar100", "h5", "text", "synthetic"}))
      ->capture_default_str();
  app->add_option("--data-dir", run.data.dir,
                  fmt::format("folder of the IDX or CIFAR files (default for fashion-mnist: {}), or of the text files "
                              "of --dataset text (default: {})",
                              io::default_fashion_mnist_dir().string(), io::default_text_dir().string()));
  app->add_option("--data-file", run.data.file,
                  "HDF5 dataset of --dataset h5 (see `dtnn convert`), streamed; or the one text file of --dataset "
                  "text");
  app->add_option("--train-samples", run.data.train_samples,
                  "a seeded, class-balanced subset of the training set (text: a uniform draw of windows)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--test-samples", run.data.test_samples,
                  "a seeded, class-balanced subset of the test set (text: a uniform draw of windows)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--synthetic-samples", run.data.synthetic_samples, "training samples of --dataset synthetic")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_flag("--normalize", run.data.normalize, "per-channel normalisation with the training set's mean and std");
  add_named(app, "--conv", run.model.conv, conv_names(),
            "convolution algorithm: convgemm, im2col, winograd (Winograd F(2x2,3x3) for 3x3 stride-1 layers, "
            "convgemm for the rest), auto (times each that fits, per shape and pass) or onednn (oneDNN's bf16 "
            "convolutions: --precision bf16 or bf16-amx only)");
  add_named(app, "--precision", run.model.precision, precision_names(),
            "arithmetic of the convolutions: fp32; bf16 (inputs rounded to bf16, fp32 sums, AVX512-BF16 on CPU "
            "workers: every pass of convgemm, im2col and onednn layers, the weight gradients of Winograd's, whose "
            "other passes stay fp32; --conv auto picks per layer and pass); bf16-emulated (bf16's results bit for bit "
            "on any x86-64, slowly); bf16-amx (the same passes by AMX's TDPBF16PS on Intel Sapphire Rapids and later, "
            "sums of its own); tf32 (GPU workers: cuDNN's convolutions and cuBLAS's dense layers in TF32 tensor-core "
            "math; CPU workers compute in fp32)");
  add_named(app, "--fusion", run.model.fusion, {{"on", true}, {"off", false}},
            "on: a ReLU runs inside the convolution, dense layer, BatchNorm or residual Add before it, and a "
            "residual block's BatchNorm, Add and ReLU are one pass (same results, fewer tensors and passes); "
            "off: every layer's own tasks");
  app->add_option("--sequence", run.model.sequence,
                  "a language model's sequence length, at most its context (default: its context)")
      ->check(CLI::PositiveNumber);
  app->add_option("--batch-size", step.batch_size, "samples per step (per rank under mpirun)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_named(app, "--loss", step.loss,
            {{"cce", codelets::LossKind::kCategoricalCrossEntropy}, {"bce", codelets::LossKind::kBinaryCrossEntropy}},
            "cce (softmax + categorical cross-entropy) or bce (sigmoid + binary)");
  app->add_option("--tiles", step.tiles, "batch tiles: tasks per layer and pass")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app->add_option("--workers", run.engine.workers_,
                  "CPU workers (0: one per core, less one per GPU used; more than the cores: unbound)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--scheduler", run.engine.scheduler_,
                  "StarPU scheduler (lws, dmdas, prio, eager, ...; auto: lws on CPUs, dmdas with GPUs) or one of "
                  "dtnn's own (dtnn-uprank; see `dtnn schedulers`)")
      ->capture_default_str();
  add_named(app, "--host-allocator", run.engine.host_allocator_,
            {{"pool", runtime::HostAllocator::kPool},
             {"system", runtime::HostAllocator::kSystem},
             {"starpu", runtime::HostAllocator::kStarpu}},
            "host memory of the activations and gradients (released at their last use): pool (best-fit, kept "
            "for reuse), system (malloc and free) or starpu (StarPU's cache of equal sizes)");
  app->add_option("--device", run.device,
                  "where tasks run: cpu, cuda (GPUs; CPU-only tasks such as loading stay on CPUs), all (CPUs and "
                  "GPUs, placed by the scheduler's performance models) or auto (cuda when a GPU is found)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "all"}))
      ->capture_default_str();
  app->add_option("--gpus", run.gpus, "GPUs to use (-1: all; under mpirun one per rank)")
      ->check(CLI::Range(-1, 64))
      ->capture_default_str();
  app->add_option("--seed", step.seed, "seed of initialisation, shuffling, augmentation, dropout and subsets")
      ->capture_default_str();
  app->add_option("--report", run.report, "write a JSON summary of the run");
  app->add_flag("--quiet", run.quiet, "no summary table and no progress lines");
}

runtime::EngineOptions engine_options(const RunOptions& run, const runtime::Mpi* mpi) {
  runtime::EngineOptions options = run.engine;
  const bool want_gpu = run.device == "cuda" || run.device == "all";
  if (want_gpu && !runtime::built_with_cuda()) {
    throw InvalidArgument(fmt::format("--device {}: this build has no CUDA codelets, expected cpu (build the CUDA "
                                      "configuration with 'DTNN_CUDA=1 scripts/setup.sh build')",
                                      run.device));
  }
  if (run.device != "cpu" && runtime::built_with_cuda() && run.gpus != 0) {
    const int devices = runtime::cuda_device_count();
    if (mpi != nullptr && mpi->active() && devices > 0) {
      options.cuda(1).cuda_device(runtime::local_rank() % devices);
    } else {
      options.cuda(run.gpus);
    }
  }
  return options;
}

void select_device(const RunOptions& run, const runtime::Engine& engine) {
  using runtime::Device;
  const bool want_gpu = run.device == "cuda" || run.device == "all";
  if (want_gpu && engine.cuda_workers() == 0) {
    throw InvalidArgument(fmt::format("--device {}: no GPU found (no CUDA worker started), expected at least one",
                                      run.device));
  }
  runtime::set_task_device(run.device == "all"                                    ? Device::kAny
                           : run.device == "cpu" || engine.cuda_workers() == 0 ? Device::kCpu
                                                                                : Device::kCuda);
}

void require_real_build(const char* command) {
  if (runtime::simulated()) {
    throw InvalidArgument(fmt::format("{}: this is the simulation build (DTNN_SIMGRID), whose codelets never run, "
                                      "expected `dtnn simulate`, or the normal build (build/bin/dtnn {})",
                                      command, command));
  }
}

}  // namespace dtnn::app
