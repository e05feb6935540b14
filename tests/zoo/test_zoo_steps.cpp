// SPDX-License-Identifier: Apache-2.0
// One SGD step of every model of the zoo on the CPU, at its own input size (ImageNet's 224x224, Inception v3's
// 299x299): batch 2 in 2 tiles, so that each pass of each layer runs as two tasks and every parameter's tile sum
// runs. The loss is finite, every parameter tensor changed, and the weights are bitwise the same with one CPU worker
// and with two. The six VGG ImageNet models run a forward pass instead (kForwardOnly). Each run starts an engine of
// its own (StarPU starts once per engine), so this binary has its own main and no engine of the process; the run
// on two workers is a child process that runs beside the one on one worker (RunInChild).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "io/dataset.hpp"
#include "models/optimizers.hpp"
#include "models/training.hpp"
#include "models/zoo.hpp"
#include "runtime/engine.hpp"

namespace dtnn {
namespace {

constexpr std::uint64_t kSeed = 7;

// A step of these takes ~10 s a worker count on the 2-core CI machine, ~2 of the suite's minutes for the six: the
// backward of the classifier's 25088 x 4096 dense layer at batch 2 in 2 tiles (two 411 MB tile gradients and their
// sum) and the draw of 133-144 M weights. Their forward runs (logits compared bitwise across worker counts); the
// steps of the same layers are those of vgg*_cifar10 (convolutions, BatchNorm, ReLU, max pooling) and of
// alexnet_imagenet (224 x 224 input, dropout, a 9216 x 4096 dense layer).
const std::set<std::string> kForwardOnly = {"vgg11_imagenet",   "vgg11bn_imagenet", "vgg16_imagenet",
                                            "vgg16bn_imagenet", "vgg19_imagenet",   "vgg19bn_imagenet"};

// A hash of a tensor's bytes: a parameter whose hash did not change in the step did not change (a collision of
// 64-bit hashes aside), and equal hashes of every tensor mean bitwise equal weights.
std::size_t bytes_hash(Tensor& t) {
  auto values = t.read();
  const std::span<const float> data = values.data();
  return std::hash<std::string_view>{}(
      std::string_view(reinterpret_cast<const char*>(data.data()), data.size_bytes()));
}

std::vector<std::size_t> parameter_hashes(Sequential& model) {
  std::vector<std::size_t> hashes;
  for (const auto& p : model.named_parameters()) hashes.push_back(bytes_hash(p.parameter->value));
  return hashes;
}

struct Outcome {
  double loss = 0.0;
  std::vector<std::string> names;       // the parameter tensors
  std::vector<std::size_t> hashes;      // of the parameters after the step
  std::vector<std::string> unchanged;   // the parameter tensors the step left as they were
  std::vector<float> logits;            // kForwardOnly
};

// One step of the model (a forward pass for kForwardOnly), its weights drawn from kSeed, on an engine of `workers`
// CPU workers. SGD at rate 1: one step moves every parameter whose gradient is not zero, however small (BatchNorm's
// scales of 1.0 in DenseNet's stem and MobileNet's last blocks get gradients under 6e-6, which a rate of 0.01 cannot
// move by half a unit in the last place).
Outcome run(const models::ModelInfo& info, int workers) {
  runtime::Engine engine(runtime::EngineOptions().workers(workers));  // outlives the model's tensors
  const io::Dataset data =
      io::synthetic_dataset(2, static_cast<int>(info.input[0]), static_cast<int>(info.input[1]),
                            static_cast<int>(info.input[2]), info.classes, 11);
  Sequential model = info.make();
  model.build(info.input, kSeed);
  Outcome out;
  for (const auto& p : model.named_parameters()) out.names.push_back(p.name);
  if (kForwardOnly.count(info.name) != 0) {
    out.logits = predict(model, data, EvalOptions().batch_size(2).tiles(2).logits(true));
    // Softmax cross-entropy of the logits, in double.
    for (std::size_t row = 0; row < 2; ++row) {
      const float* z = out.logits.data() + row * static_cast<std::size_t>(info.classes);
      const double top = *std::max_element(z, z + info.classes);
      double sum = 0.0;
      for (int c = 0; c < info.classes; ++c) sum += std::exp(double(z[c]) - top);
      out.loss += (top + std::log(sum) - z[data.labels[row]]) / 2.0;
    }
    return out;
  }
  const std::vector<std::size_t> before = parameter_hashes(model);
  Sgd sgd(SgdOptions(1.0f).momentum(0.9f));
  const History h =
      fit(model, sgd, data, FitOptions().batch_size(2).tiles(2).steps_per_epoch(1).seed(kSeed).verbose(false));
  out.loss = h.epochs.at(0).loss;
  out.hashes = parameter_hashes(model);
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (out.hashes[i] == before[i]) out.unchanged.push_back(out.names[i]);
  }
  return out;
}

// Bytes through a pipe, whole.
bool write_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::read(fd, p, size);
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

template <typename T>
bool write_vector(int fd, const std::vector<T>& v) {
  const std::uint64_t n = v.size();
  return write_all(fd, &n, sizeof(n)) && write_all(fd, v.data(), n * sizeof(T));
}

template <typename T>
bool read_vector(int fd, std::vector<T>& v) {
  std::uint64_t n = 0;
  if (!read_all(fd, &n, sizeof(n)) || n > (std::uint64_t{1} << 32)) return false;
  v.resize(n);
  return read_all(fd, v.data(), n * sizeof(T));
}

// run(info, workers) in a child process forked when no engine runs, beside the parent's own run: the draw of a
// large model's weights is single-threaded and most of its time, so the two runs of a model share the two cores.
// The child sends the loss, the parameters' hashes and the logits, or the message of what it threw.
class RunInChild {
 public:
  RunInChild(const models::ModelInfo& info, int workers) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(fds[0]);
      std::string error;
      Outcome out;
      try {
        out = run(info, workers);
      } catch (const std::exception& e) {
        error = e.what();
      }
      const bool sent = write_vector(fds[1], std::vector<char>(error.begin(), error.end())) &&
                        write_all(fds[1], &out.loss, sizeof(out.loss)) && write_vector(fds[1], out.hashes) &&
                        write_vector(fds[1], out.logits);
      ::_exit(sent ? 0 : 1);
    }
    ::close(fds[1]);
    fd_ = fds[0];
  }
  RunInChild(const RunInChild&) = delete;
  RunInChild& operator=(const RunInChild&) = delete;
  ~RunInChild() {
    if (fd_ >= 0) ::close(fd_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }

  // The child's outcome; throws std::runtime_error naming what went wrong.
  Outcome wait() {
    if (pid_ <= 0 || fd_ < 0) throw std::runtime_error("the child process could not be started");
    std::vector<char> error;
    Outcome out;
    const bool received = read_vector(fd_, error) && read_all(fd_, &out.loss, sizeof(out.loss)) &&
                          read_vector(fd_, out.hashes) && read_vector(fd_, out.logits);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    if (!received || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      throw std::runtime_error(fmt::format("the child process ended without its outcome (wait status {})", status));
    }
    if (!error.empty()) throw std::runtime_error("the child process threw: " + std::string(error.begin(), error.end()));
    return out;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
};

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::vector<std::string> model_names(bool forward_only) {
  std::vector<std::string> names;
  for (const auto& info : models::registry()) {
    if ((kForwardOnly.count(info.name) != 0) == forward_only) names.push_back(info.name);
  }
  return names;
}

class ZooStepTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooStepTest, OneStepChangesEveryParameterAndIsTheSameOnOneAndTwoWorkers) {
  const models::ModelInfo& info = models::find(GetParam());
  RunInChild on_two(info, 2);
  const Outcome one = run(info, 1);
  EXPECT_TRUE(std::isfinite(one.loss)) << one.loss;
  EXPECT_GT(one.loss, 0.0);
  ASSERT_FALSE(one.names.empty());
  EXPECT_TRUE(one.unchanged.empty()) << one.unchanged.size() << " of " << one.names.size()
                                     << " parameter tensors unchanged: " << joined(one.unchanged);
  const Outcome two = on_two.wait();
  EXPECT_EQ(two.loss, one.loss) << "two workers against one";
  ASSERT_EQ(two.hashes.size(), one.hashes.size());
  for (std::size_t i = 0; i < one.hashes.size(); ++i) {
    EXPECT_EQ(two.hashes[i], one.hashes[i]) << one.names[i] << " differs, two workers against one";
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooStepTest, ::testing::ValuesIn(model_names(false)),
                         [](const auto& name) { return name.param; });

class ZooForwardTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooForwardTest, LogitsAreFiniteAndTheSameOnOneAndTwoWorkers) {
  const models::ModelInfo& info = models::find(GetParam());
  RunInChild on_two(info, 2);
  const Outcome one = run(info, 1);
  ASSERT_EQ(one.logits.size(), 2u * static_cast<std::size_t>(info.classes));
  EXPECT_TRUE(std::all_of(one.logits.begin(), one.logits.end(), [](float v) { return std::isfinite(v); }));
  EXPECT_TRUE(std::isfinite(one.loss)) << one.loss;
  EXPECT_GT(one.loss, 0.0);
  const Outcome two = on_two.wait();
  EXPECT_EQ(two.logits, one.logits) << "two workers against one";
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooForwardTest, ::testing::ValuesIn(model_names(true)),
                         [](const auto& name) { return name.param; });

// Every model of kForwardOnly is one of the zoo's: a renamed model cannot leave both lists.
TEST(ZooStepsTest, ForwardOnlyModelsAreRegistered) {
  for (const std::string& name : kForwardOnly) EXPECT_NO_THROW((void)models::find(name)) << name;
}

}  // namespace
}  // namespace dtnn

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
