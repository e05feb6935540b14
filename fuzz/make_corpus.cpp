// SPDX-License-Identifier: Apache-2.0
// Writes the harnesses' seed corpora (fuzz/corpus/<harness>/): small valid files, made with the project's own
// writers where it has them (write_h5_dataset, save_checkpoint, write_machine_file, pack_machine_archive; IDX and
// CIFAR are a few header bytes and the data), and the command lines of the options harness. Run from the
// top of the clone after building it in the fuzz configuration:
//   build-fuzz/bin/make_fuzz_corpus fuzz/corpus
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "io/checkpoint.hpp"
#include "io/dataset.hpp"
#include "io/h5dataset.hpp"
#include "io/h5tokens.hpp"
#include "io/hdf5.hpp"
#include "runtime/machine.hpp"
#include "runtime/machine_archive.hpp"

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

void write_bytes(const fs::path& file, const Bytes& bytes) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw dtnn::DataError(file.string() + ": cannot be written");
}

void write_gz(const fs::path& file, const Bytes& bytes) {
  fs::create_directories(file.parent_path());
  gzFile gz = gzopen(file.c_str(), "wb9");
  if (gz == nullptr || gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size())) != static_cast<int>(bytes.size()) ||
      gzclose(gz) != Z_OK) {
    throw dtnn::DataError(file.string() + ": cannot be written");
  }
}

Bytes read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void put_u32(Bytes& b, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<std::uint8_t>(v >> shift));
}

// IDX: magic, big-endian extents, bytes.
void idx(const fs::path& out) {
  Bytes images;
  put_u32(images, 0x00000803);
  for (const std::uint32_t d : {3u, 4u, 5u}) put_u32(images, d);
  for (int i = 0; i < 3 * 4 * 5; ++i) images.push_back(static_cast<std::uint8_t>(i * 17));
  Bytes labels;
  put_u32(labels, 0x00000801);
  put_u32(labels, 3);
  for (const std::uint8_t l : {7, 0, 9}) labels.push_back(l);
  write_bytes(out / "images-idx3-ubyte", images);
  write_bytes(out / "labels-idx1-ubyte", labels);
  write_gz(out / "images-idx3-ubyte.gz", images);
  write_gz(out / "labels-idx1-ubyte.gz", labels);
}

// CIFAR: records of label byte(s) and 3x32x32 pixels.
void cifar(const fs::path& out) {
  Bytes ten;
  for (const std::uint8_t label : {3, 9}) {
    ten.push_back(label);
    for (int p = 0; p < 3072; ++p) ten.push_back(static_cast<std::uint8_t>(p * 7 + label));
  }
  Bytes hundred{5, 42};
  for (int p = 0; p < 3072; ++p) hundred.push_back(static_cast<std::uint8_t>(p * 3));
  write_bytes(out / "cifar10-2-records.bin", ten);
  write_bytes(out / "cifar100-1-record.bin", hundred);
}

// HDF5 datasets: dtnn's layout (write_h5_dataset), compressed and not, and the foreign layout the readers accept
// (gray [N, H, W] images, byte labels, only class names), as io/hdf5.hpp writes HDF5: in its newest format, whose
// metadata HDF5 checksums. Not in HDF5's oldest format (h5py's default, which the readers accept too): libhdf5
// 1.10's decoders of unchecked metadata crash on damaged files (docs/fuzzing.md), where a run would stop every time.
void h5dataset(const fs::path& out) {
  using dtnn::io::synthetic_dataset;
  fs::create_directories(out);
  const dtnn::io::TrainTest gray{synthetic_dataset(3, 1, 4, 4, 3, 1), synthetic_dataset(2, 1, 4, 4, 3, 2)};
  dtnn::io::H5DatasetOptions options;
  options.name = "tiny";
  dtnn::io::write_h5_dataset(out / "gray-deflate.h5", gray, options);
  options.deflate_level = 0;
  options.samples_per_chunk = 2;
  dtnn::io::write_h5_dataset(out / "gray-stored.h5", gray, options);
  const dtnn::io::Dataset rgb = synthetic_dataset(2, 3, 2, 2, 10, 3);
  options.class_names = {};
  options.name = "cifar10";
  dtnn::io::write_h5_dataset(out / "rgb-one-split.h5", {{"train", rgb}}, options);

  namespace h5 = dtnn::io::h5;
  h5::File f = h5::File::create(out / "foreign-layout.h5");
  const std::vector<std::string> names{"no", "yes"};
  f.set_strings("class_names", names);
  const h5::Group g = f.create_group("train");
  const std::vector<std::uint8_t> pixels{0, 255, 17, 34, 51, 68, 85, 102};
  const std::vector<std::int64_t> image_shape{2, 2, 2};
  g.create_dataset("images", h5::DType::kUInt8, image_shape).write(std::span<const std::uint8_t>(pixels));
  const std::vector<std::int64_t> label_shape{2};
  const std::vector<std::int32_t> labels{1, 0};
  g.create_dataset("labels", h5::DType::kUInt8, label_shape).write(std::span<const std::int32_t>(labels));
  f.close();
}

// Checkpoints (save_checkpoint): a small model with every section, and an empty one.
void checkpoint(const fs::path& out) {
  fs::create_directories(out);
  dtnn::io::Checkpoint c;
  c.model_name = "simplecnn";
  c.model_options = R"({"conv": "convgemm"})";
  c.epoch = 2;
  c.step = 40;
  c.samples_seen = 2560;
  c.parameters = {{"features.0.weight", {4, 1, 3, 3}, std::vector<float>(36, 0.25f)},
                  {"features.0.bias", {4}, {0.0f, 1.0f, -1.0f, 0.5f}}};
  c.buffers = {{"features.1.running_mean", {4}, {0.1f, 0.2f, 0.3f, 0.4f}},
               {"features.1.num_batches_tracked", {}, {40.0f}}};
  c.optimizer_state = {{"features.0.bias.momentum_buffer", {4}, {0.0f, 0.01f, 0.02f, 0.03f}}};
  c.optimizer = R"({"name": "sgd", "lr": 0.05, "momentum": 0.9})";
  c.schedule = R"({"name": "cosine"})";
  c.rng_states = {"mt19937_64 12345"};
  c.created = "2026-12-06T00:00:00Z";
  c.metric = 0.875;
  dtnn::io::save_checkpoint(out / "simplecnn.h5", c);
  dtnn::io::Checkpoint empty;
  empty.model_name = "none";
  empty.created = "2026-12-06T00:00:00Z";
  dtnn::io::save_checkpoint(out / "empty.h5", empty);
}

// The committed calibrations (a CPU one and a GPU one), extracted with the reader the harnesses fuzz.
fs::path extract(const fs::path& archive, const fs::path& scratch, const std::string& name) {
  const fs::path dir = scratch / name;
  dtnn::runtime::extract_machine_archive(archive, dir);
  return dir;
}

const char* const kBus = "starpu/.starpu/sampling/bus/dtnn-machine";

// The machine-folder harness's inputs: one byte choosing the file (fuzz_machine_folder.cpp's order), then it.
void machine_folder(const fs::path& out, const fs::path& gpu, const fs::path& cpu) {
  const auto seed = [&](const std::string& name, std::uint8_t which, const fs::path& file) {
    Bytes b{which};
    const Bytes text = read_bytes(file);
    b.insert(b.end(), text.begin(), text.end());
    write_bytes(out / name, b);
  };
  seed("machine-json-gpu", 0, gpu / "machine.json");
  seed("machine-json-cpu", 0, cpu / "machine.json");
  seed("platform-gpu", 1, gpu / (std::string(kBus) + ".platform.v4.xml"));
  seed("platform-cpu", 1, cpu / (std::string(kBus) + ".platform.v4.xml"));
  seed("bandwidth-gpu", 2, gpu / (std::string(kBus) + ".bandwidth"));
  seed("latency-gpu", 3, gpu / (std::string(kBus) + ".latency"));
  seed("model-gpu", 4, gpu / "starpu/.starpu/sampling/codelets/45/global_avgpool2d_fwd.dtnn-machine");
  seed("model-cpu", 4, cpu / "starpu/.starpu/sampling/codelets/45/dense_fwd.dtnn-machine");
}

// Machine archives (pack_machine_archive) of the GPU calibration cut to two models, in each compression.
void machine_archive(const fs::path& out, const fs::path& gpu) {
  const fs::path codelets = gpu / "starpu/.starpu/sampling/codelets/45";
  for (const auto& e : fs::directory_iterator(codelets)) {
    const std::string name = e.path().filename().string();
    if (name != "global_avgpool2d_fwd.dtnn-machine" && name != "copy.dtnn-machine") fs::remove(e.path());
  }
  nlohmann::json doc = dtnn::runtime::read_machine_file(gpu);
  doc["calibrations"] = nlohmann::json::array({doc["calibrations"][0]});
  doc["calibrations"][0].erase("step_ms_each");
  dtnn::runtime::write_machine_file(gpu, doc);
  fs::create_directories(out);
  for (const char* name : {"gpu.tar", "gpu.tar.gz", "gpu.tar.xz"}) dtnn::runtime::pack_machine_archive(gpu, out / name);
}

// Command lines of every command (the README's and docs' among them), arguments separated by NUL bytes.
void options(const fs::path& out) {
  const std::vector<std::vector<std::string>> lines = {
      {"train", "--model", "simplecnn", "--dataset", "fashion-mnist", "--epochs", "1", "--batch-size", "64"},
      {"train", "--model", "resnet18_cifar10", "--dataset", "synthetic", "--sync-bn", "--bucket-mb", "10",
       "--mpi-timeout", "60"},
      {"train", "--model", "simplecnn", "--optimizer", "adamw", "--lr", "0.001", "--beta1", "0.9", "--beta2", "0.999",
       "--eps", "1e-8", "--weight-decay", "0.01", "--warmup-epochs", "0.5", "--warmup-start", "0.1", "--lr-schedule",
       "constant", "--min-lr", "0", "--label-smoothing", "0.1", "--validation-split", "0.1"},
      {"train", "--model", "simplecnn", "--momentum", "0.9", "--nesterov", "1", "--lr-step-epochs", "2", "--lr-decay",
       "0.1", "--plateau-patience", "3", "--early-stopping", "5", "--monitor", "val_accuracy", "--stop-at-loss",
       "0.01", "--flip", "--crop-padding", "4", "--tiles", "4", "--workers", "2", "--seed", "18446744073709551615"},
      {"train", "--model", "simplecnn", "--steps-per-epoch", "20", "--no-test", "--dag", "step.json", "--dag-step",
       "5", "--checkpoint-dir", "ckpts", "--keep", "2", "--checkpoint-steps", "10", "--resume", "ckpts"},
      {"benchmark", "--model", "resnet20_cifar10", "--steps-per-epoch", "10", "--train-samples", "128",
       "--test-samples", "64", "--synthetic-samples", "640", "--gpus", "-1", "--tail-buckets", "0"},
      {"evaluate", "--model", "simplecnn", "--checkpoint", "ckpts/best.h5", "--conv", "im2col", "--fusion", "off"},
      {"summary", "resnet18_cifar10"},
      {"convert", "--dataset", "fashion-mnist", "--output", "fmnist.h5"},
      {"calibrate", "--model", "resnet18_cifar10", "--batch-size", "32", "--tiles", "2", "--workers", "2", "--steps",
       "12", "--warmup", "2", "--out", "machines/zen5"},
      {"simulate", "--model", "resnet18_cifar10", "--machine", "m.tar.xz", "--cpus", "32", "--cpu-speed", "1.5",
       "--device", "cuda", "--gpus", "4", "--gpu-speed", "2", "--bus-gbps", "256", "--bus-latency-us", "3"},
      {"simulate", "--model", "simplecnn", "--machine", "m", "--workers", "2", "--ranks", "8", "--link-gbps", "25",
       "--link-latency-us", "5", "--sums-on-cores", "--bucket-mb", "4", "--worker-speeds", "1,0.5",
       "--task-overhead-us", "12.5", "--scatter"},
      // Numbers as CLI11 reads them too: exponents, hexadecimal, leading zeros and dots.
      {"train", "--dataset", "synthetic", "--lr", "5e-2", "--bucket-mb", "2.5e1", "--mpi-timeout", "0x3c",
       "--crop-padding", "04", "--warmup-epochs", ".5", "--momentum", "9E-1", "--label-smoothing", "0.0e0", "--seed",
       "0x10"},
      {"models"},
      {"--help-all"},
  };
  int i = 0;
  for (const auto& line : lines) {
    Bytes b;
    for (std::size_t k = 0; k < line.size(); ++k) {
      if (k > 0) b.push_back(0);
      b.insert(b.end(), line[k].begin(), line[k].end());
    }
    write_bytes(out / ("line-" + std::to_string(i++)), b);
  }
}

// Text corpora: a fortune file (a "%%" line that is text, CRLF lines, UTF-8 bytes, an empty fortune) and a file of
// paragraphs, each with the 10 records a split needs.
void text(const fs::path& out) {
  std::string fortunes;
  for (int k = 0; k < 11; ++k) fortunes += "fortune " + std::to_string(k) + (k % 3 == 0 ? "\r\n%%\r\n" : "\n") + "%\n";
  fortunes += "%\ncaf\xc3\xa9\n%\n";
  std::string paragraphs;
  for (int k = 0; k < 12; ++k) paragraphs += "paragraph " + std::to_string(k) + "\nsecond line\n\n";
  write_bytes(out / "fortunes", Bytes(fortunes.begin(), fortunes.end()));
  write_bytes(out / "paragraphs", Bytes(paragraphs.begin(), paragraphs.end()));
}

// Token files (write_h5_tokens): a byte-level corpus of two splits (uint8) and a vocabulary above 256 (int32).
void h5tokens(const fs::path& out) {
  fs::create_directories(out);
  std::vector<std::int32_t> train, test, wide;
  for (int i = 0; i < 40; ++i) train.push_back((i * 37 + 11) % 256);
  for (int i = 0; i < 12; ++i) test.push_back((i * 91 + 3) % 256);
  for (int i = 0; i < 20; ++i) wide.push_back((i * 4099 + 7) % 50257);
  dtnn::io::write_h5_tokens(out / "bytes.h5", "fortunes", 256, {{"train", train, 3}, {"test", test, 1}});
  dtnn::io::write_h5_tokens(out / "wide.h5", "wide", 50257, {{"train", wide, 0}});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (the folder of one folder per harness: fuzz/corpus)\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];
  const fs::path source = DTNN_SOURCE_DIR;
  const fs::path scratch = fs::temp_directory_path() / "dtnn-make-corpus";
  try {
    fs::remove_all(scratch);
    idx(out / "idx");
    cifar(out / "cifar");
    text(out / "text");
    h5dataset(out / "h5dataset");
    h5tokens(out / "h5tokens");
    checkpoint(out / "checkpoint");
    const fs::path gpu = extract(source / "bench/results/machines/h200_xeon16.tar.xz", scratch, "gpu");
    const fs::path cpu = extract(source / "tests/data/machine-zen5.tar.xz", scratch, "cpu");
    machine_folder(out / "machine_folder", gpu, cpu);
    machine_archive(out / "machine_archive", gpu);
    options(out / "options");
    fs::remove_all(scratch);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_fuzz_corpus: %s\n", e.what());
    return 1;
  }
  return 0;
}
