// SPDX-License-Identifier: Apache-2.0
// Every model of the zoo builds as its reference does (classes, the published number of parameters, the reference's
// state_dict names), and one SGD step of it on the CPU, at its own input size (ImageNet's 224x224, Inception v3's
// 299x299): batch 2 in 2 tiles, so that each pass of each layer runs as two tasks and every parameter's tile sum
// runs. The loss is finite, every parameter tensor changed, and the weights are bitwise the same with one CPU worker
// and with two. The six VGG ImageNet models run a forward pass instead (kForwardOnly). The language models take int32
// token ids: gpt_tiny and gpt_char run a step through the layers' API (token cross-entropy against the next tokens,
// then SGD); gpt2_small and bert_medium, whose steps at their context of 1024 and 512 would take minutes on two
// cores, are built without drawing their weights and checked against their reference only (kBuildOnly). Each run
// starts an engine of its own (StarPU starts once per engine), so this binary has its own main and no engine of the
// process; the run on two workers is a child process that runs beside the one on one worker (RunInChild).
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

#include "codelets/loss.hpp"
#include "io/dataset.hpp"
#include "models/optimizers.hpp"
#include "models/training.hpp"
#include "models/zoo.hpp"
#include "runtime/engine.hpp"

namespace dtnn {
namespace {

constexpr std::uint64_t kSeed = 7;

struct Expected {
  const char* model;
  std::int64_t parameters;
  std::size_t state_dict_entries;  // parameter and buffer tensors
  std::vector<const char*> names;  // a few of the reference's state_dict names
};

// Sources: torchvision = sum(p.numel() for p in torchvision.models.<name>().parameters()), the figures of
// torchvision's documentation; kuangliu = github.com/kuangliu/pytorch-cifar models/*.py, where "no BN" is the same
// network without its BatchNorm layers; akamaster = github.com/akamaster/pytorch_resnet_cifar10 resnet.py (its README:
// 0.27M, 0.46M, 0.66M, 0.85M, 1.7M, 19.4M); PyDTNN = hpca-uji/PyDTNN pydtnn/models/<name>.py. Every figure was also
// recomputed from a plain torch.nn transcription of the reference, whose state_dict names all match.
const std::vector<Expected>& expected() {
  static const std::vector<Expected> table = {
      {"simplecnn", 421'642, 8, {"0.weight", "9.bias"}},  // by hand: 320 + 18,496 + 401,536 + 1,290
      {"simplemlp", 932'362, 8, {"1.weight", "7.bias"}},  // PyDTNN simplemlp: 401,920 + 2 x 262,656 + 5,130
      {"lenet5", 61'706, 10, {"0.weight", "11.bias"}},    // LeCun 1998, full C3: 156 + 2,416 + 48,120 + 10,164 + 850
      {"alexnet_cifar10", 23'272'266, 16, {"0.weight", "20.bias"}},                      // PyDTNN alexnet_cifar10
      {"alexnet_imagenet", 61'100'840, 16, {"features.0.weight", "classifier.6.bias"}},  // torchvision alexnet
      // kuangliu VGG('VGG11'), no BN
      {"vgg11_cifar10", 9'225'610, 18, {"features.0.weight", "features.18.bias", "classifier.weight"}},
      {"vgg11bn_cifar10", 9'231'114, 58, {"features.26.bias", "classifier.weight"}},  // kuangliu VGG('VGG11')
      {"vgg16_cifar10", 14'719'818, 28, {"features.28.weight", "classifier.bias"}},   // kuangliu VGG('VGG16'), no BN
      {"vgg16bn_cifar10", 14'728'266, 93, {"features.1.running_mean", "features.41.running_var"}},  // kuangliu
      {"vgg19_cifar10", 20'029'514, 34, {"features.34.weight"}},                  // kuangliu VGG('VGG19'), no BN
      {"vgg19bn_cifar10", 20'040'522, 114, {"features.50.num_batches_tracked"}},  // kuangliu VGG('VGG19')
      // torchvision vgg11, vgg11_bn, vgg16, vgg16_bn, vgg19, vgg19_bn
      {"vgg11_imagenet", 132'863'336, 22, {"features.18.weight", "classifier.0.weight", "classifier.6.bias"}},
      {"vgg11bn_imagenet", 132'868'840, 62, {"features.26.weight", "classifier.3.weight"}},
      {"vgg16_imagenet", 138'357'544, 32, {"features.28.weight", "classifier.6.weight"}},
      {"vgg16bn_imagenet", 138'365'992, 97, {"features.41.running_mean", "classifier.0.bias"}},
      {"vgg19_imagenet", 143'667'240, 38, {"features.34.bias"}},
      {"vgg19bn_imagenet", 143'678'248, 118, {"features.49.weight", "features.50.running_var"}},
      // kuangliu ResNet18, ResNet34, ResNet50, ResNet101, ResNet152
      {"resnet18_cifar10", 11'173'962, 122,
       {"layer2.0.shortcut.0.weight", "layer2.0.shortcut.1.running_mean", "linear.weight"}},
      {"resnet34_cifar10", 21'282'122, 218, {"layer4.2.bn2.bias"}},
      {"resnet50_cifar10", 23'520'842, 320, {"layer1.0.shortcut.0.weight", "layer4.2.conv3.weight"}},
      {"resnet101_cifar10", 42'512'970, 626, {"layer3.22.bn3.running_var"}},
      {"resnet152_cifar10", 58'156'618, 932, {"layer2.7.conv2.weight", "layer3.35.bn1.bias"}},
      // akamaster resnet20, resnet32, resnet44, resnet56, resnet110, resnet1202
      {"resnet20_cifar10", 269'722, 116, {"conv1.weight", "layer3.2.bn2.running_mean", "linear.bias"}},
      {"resnet32_cifar10", 464'154, 188, {"layer1.4.conv2.weight"}},
      {"resnet44_cifar10", 658'586, 260, {"layer2.6.conv1.weight"}},
      {"resnet56_cifar10", 853'018, 332, {"layer3.8.bn2.weight"}},
      {"resnet110_cifar10", 1'727'962, 656, {"layer2.17.conv2.weight"}},
      {"resnet1202_cifar10", 19'421'274, 7208, {"layer3.199.bn2.num_batches_tracked"}},
      // torchvision resnet18, resnet34, resnet50, resnet101, resnet152
      {"resnet18_imagenet", 11'689'512, 122,
       {"conv1.weight", "bn1.running_var", "layer1.0.conv1.weight", "layer1.0.bn1.running_mean",
        "layer2.0.downsample.0.weight", "layer2.0.downsample.1.weight", "layer4.1.bn2.num_batches_tracked",
        "fc.weight", "fc.bias"}},
      {"resnet34_imagenet", 21'797'672, 218, {"layer3.5.conv2.weight"}},
      {"resnet50_imagenet", 25'557'032, 320, {"layer1.0.downsample.0.weight", "layer4.2.bn3.running_mean"}},
      {"resnet101_imagenet", 44'549'160, 626, {"layer3.22.conv3.weight"}},
      {"resnet152_imagenet", 60'192'808, 932, {"layer3.35.conv2.weight"}},
      // kuangliu DenseNet121
      {"densenet121_cifar10", 6'956'298, 722,
       {"conv1.weight", "dense1.0.bn1.running_mean", "trans3.conv.weight", "dense4.15.conv2.weight", "bn.bias",
        "linear.weight"}},
      // torchvision densenet121
      {"densenet121_imagenet", 7'978'856, 727,
       {"features.conv0.weight", "features.denseblock1.denselayer1.norm1.weight", "features.transition3.conv.weight",
        "features.denseblock4.denselayer16.conv2.weight", "features.norm5.running_var", "classifier.bias"}},
      // torchvision googlenet(aux_logits=False); 13,004,888 with the two auxiliary classifiers.
      {"googlenet", 6'624'904, 344,
       {"conv1.conv.weight", "conv3.bn.running_mean", "inception3a.branch1.conv.weight",
        "inception4e.branch2.1.bn.bias", "inception5b.branch4.1.conv.weight", "fc.weight"}},
      // torchvision inception_v3(aux_logits=False): 27,161,264 minus AuxLogits' 3,326,696.
      {"inceptionv3", 23'834'568, 566,
       {"Conv2d_1a_3x3.conv.weight", "Mixed_5b.branch_pool.bn.running_var", "Mixed_6e.branch7x7dbl_5.conv.weight",
        "Mixed_7b.branch3x3_2a.conv.weight", "Mixed_7c.branch3x3dbl_3b.bn.weight", "fc.bias"}},
      // Howard et al. 2017 (the paper's 4.2M), e.g. wjc852456/pytorch-mobilenet-v1.
      {"mobilenetv1", 4'231'976, 164, {"model.0.0.weight", "model.1.0.weight", "model.13.4.running_var", "fc.weight"}},
      // kuangliu MobileNet
      {"mobilenetv1_cifar10", 3'217'226, 164, {"layers.0.conv1.weight", "layers.12.bn2.bias", "linear.weight"}},
      // tools/gpt_reference.py: TransformerLM(**CONFIGS[name]), the PyTorch module of the same names (tied heads hold
      // the table once, as wte.weight); gpt2_small is HuggingFace's gpt2 (124,439,808 with lm_head tied).
      {"gpt_tiny", 34'176, 28, {"wte.weight", "wpe.weight", "h.1.attn.in_proj_weight", "ln_f.bias"}},
      {"gpt_char", 3'356'160, 53, {"h.0.ln_1.weight", "h.3.mlp.c_proj.bias", "ln_f.weight", "lm_head.weight"}},
      {"gpt2_small", 124'439'808, 148,
       {"wte.weight", "h.11.attn.out_proj.weight", "h.11.mlp.c_fc.weight", "ln_f.bias"}},
      {"bert_medium", 41'109'504, 100, {"wte.weight", "emb_ln.weight", "h.7.ln_2.bias", "h.0.attn.in_proj_bias"}},
  };
  return table;
}

TEST(ZooTest, EveryRegisteredModelHasAnExpectedParameterCount) {
  std::set<std::string> registered;
  for (const auto& info : models::registry()) registered.insert(info.name);
  std::set<std::string> listed;
  for (const auto& e : expected()) listed.insert(e.model);
  EXPECT_EQ(registered, listed);
}

// A step of these takes ~10 s a worker count on the 2-core CI machine, ~2 of the suite's minutes for the six: the
// backward of the classifier's 25088 x 4096 dense layer at batch 2 in 2 tiles (two 411 MB tile gradients and their
// sum) and the draw of 133-144 M weights. Their forward runs (logits compared bitwise across worker counts); the
// steps of the same layers are those of vgg*_cifar10 (convolutions, BatchNorm, ReLU, max pooling) and of
// alexnet_imagenet (224 x 224 input, dropout, a 9216 x 4096 dense layer).
const std::set<std::string> kForwardOnly = {"vgg11_imagenet",   "vgg11bn_imagenet", "vgg16_imagenet",
                                            "vgg16bn_imagenet", "vgg19_imagenet",   "vgg19bn_imagenet"};

// Language models too large to step on the CI machine: built (their weights not drawn) and checked against the
// reference's count and names. Their layers step in gpt_tiny and gpt_char (tied and untied heads, pre-LN) and in
// tests/layers/test_transformer.cpp (post-LN blocks).
const std::set<std::string> kBuildOnly = {"gpt2_small", "bert_medium"};

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
  Shape output;                         // of a sample
  std::int64_t parameter_count = 0;
  std::set<std::string> state_names;    // parameters and buffers
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
// One SGD step of a language model (int32 token ids in) through the layers' API, as TrainStep runs one: batch 2 in 2
// tiles of random tokens, the token cross-entropy of each position against the next token (the last position's
// target ignored), backward, and each parameter's update once its layer's backward is submitted.
void token_step(const models::ModelInfo& info, Sequential& model, Outcome& out) {
  const std::int64_t n = 2;
  const std::int64_t context = info.input[0];
  std::vector<Tensor> acts, grads;
  model.allocate(n, 2, acts, &grads, Storage::kTransient);
  Rng rng(11);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n * context));
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(info.classes)));
  std::vector<std::int32_t> next(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    next[i] = (static_cast<std::int64_t>(i + 1) % context) == 0 ? -100 : ids[i + 1];
  }
  acts[0].copy_from_values<std::int32_t>(ids);
  Tensor targets({n, context}, TensorOptions().dtype(DType::kInt32).tiles(2));
  targets.copy_from_values<std::int32_t>(next);
  Tensor stats({2, kTokenLossStats}, 2);
  const PassContext ctx;
  model.forward(acts, ctx);
  const float scale = 1.0f / static_cast<float>(n * (context - 1));
  for (int t = 0; t < 2; ++t) {
    codelets::submit_token_xent_fwd_bwd({"loss", 0}, TokenXentParams{}, acts.back(), targets, scale, grads.back(),
                                        stats, t);
  }
  Sgd sgd(SgdOptions(1.0f).momentum(0.9f));
  model.backward(acts, grads, ctx, [&](Layer& layer) {
    for (const NamedParameter& p : named_parameters(layer)) sgd.submit_update(*p.parameter, p.name, 0);
  });
  const auto s = stats.to_vector();
  out.loss = (s[kLossSum] + s[kTokenLossStats + kLossSum]) / (s[kCounted] + s[kTokenLossStats + kCounted]);
}

Outcome run(const models::ModelInfo& info, int workers) {
  runtime::Engine engine(runtime::EngineOptions().workers(workers));  // outlives the model's tensors
  if (info.input.size() == 1) {
    Sequential model = info.make();
    // Built only: every parameter allocated, none drawn (a no-op initializer), for the names and the count.
    if (kBuildOnly.count(info.name) != 0) model.initializer([](Layer&, Rng&) {});
    model.build(info.input, kSeed);
    Outcome out;
    out.output = model.output_shape();
    out.parameter_count = model.parameter_count();
    for (const auto& p : model.named_parameters()) out.names.push_back(p.name);
    out.state_names.insert(out.names.begin(), out.names.end());
    if (kBuildOnly.count(info.name) != 0) return out;
    const std::vector<std::size_t> before = parameter_hashes(model);
    token_step(info, model, out);
    out.hashes = parameter_hashes(model);
    for (std::size_t i = 0; i < before.size(); ++i) {
      if (out.hashes[i] == before[i]) out.unchanged.push_back(out.names[i]);
    }
    return out;
  }
  const io::Dataset data =
      io::synthetic_dataset(2, static_cast<int>(info.input[0]), static_cast<int>(info.input[1]),
                            static_cast<int>(info.input[2]), info.classes, 11);
  Sequential model = info.make();
  model.build(info.input, kSeed);
  Outcome out;
  out.output = model.output_shape();
  out.parameter_count = model.parameter_count();
  for (const auto& p : model.named_parameters()) out.names.push_back(p.name);
  out.state_names.insert(out.names.begin(), out.names.end());
  for (const auto& b : model.named_buffers()) out.state_names.insert(b.name);
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

// The model as its reference builds it: outputs, parameter count, state_dict names (the table of expected()).
void expect_reference_structure(const models::ModelInfo& info, const Outcome& built) {
  const auto& table = expected();
  const auto e = std::find_if(table.begin(), table.end(), [&](const Expected& x) { return x.model == info.name; });
  ASSERT_NE(e, table.end()) << info.name << " is not in expected()";
  // An image classifier's output is its classes, a language model's the logits of each position.
  const Shape logits = info.input.size() == 1 ? Shape{info.input[0], info.classes} : Shape{info.classes};
  EXPECT_EQ(built.output, logits);
  EXPECT_EQ(built.parameter_count, e->parameters);
  EXPECT_EQ(built.state_names.size(), e->state_dict_entries);
  for (const char* name : e->names) {
    EXPECT_TRUE(built.state_names.count(name)) << info.name << " has no '" << name << "'";
  }
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

enum class Check { kStep, kForward, kBuild };

std::vector<std::string> model_names(Check check) {
  std::vector<std::string> names;
  for (const auto& info : models::registry()) {
    const Check c = kForwardOnly.count(info.name) != 0 ? Check::kForward
                    : kBuildOnly.count(info.name) != 0 ? Check::kBuild
                                                       : Check::kStep;
    if (c == check) names.push_back(info.name);
  }
  return names;
}

class ZooStepTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooStepTest, BuildsAsItsReferenceAndOneStepChangesEveryParameterAlikeOnOneAndTwoWorkers) {
  const models::ModelInfo& info = models::find(GetParam());
  RunInChild on_two(info, 2);
  const Outcome one = run(info, 1);
  expect_reference_structure(info, one);
  EXPECT_TRUE(std::isfinite(one.loss)) << one.loss;
  EXPECT_GT(one.loss, 0.0);
  // GPT-2's initialisation gives logits near 0: the mean token loss is near ln(vocabulary).
  if (info.input.size() == 1) {
    EXPECT_NEAR(one.loss, std::log(static_cast<double>(info.classes)), 0.05);
  }
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

INSTANTIATE_TEST_SUITE_P(Zoo, ZooStepTest, ::testing::ValuesIn(model_names(Check::kStep)),
                         [](const auto& name) { return name.param; });

class ZooForwardTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooForwardTest, BuildsAsItsReferenceAndItsLogitsAreFiniteAndAlikeOnOneAndTwoWorkers) {
  const models::ModelInfo& info = models::find(GetParam());
  RunInChild on_two(info, 2);
  const Outcome one = run(info, 1);
  expect_reference_structure(info, one);
  ASSERT_EQ(one.logits.size(), 2u * static_cast<std::size_t>(info.classes));
  EXPECT_TRUE(std::all_of(one.logits.begin(), one.logits.end(), [](float v) { return std::isfinite(v); }));
  EXPECT_TRUE(std::isfinite(one.loss)) << one.loss;
  EXPECT_GT(one.loss, 0.0);
  const Outcome two = on_two.wait();
  EXPECT_EQ(two.logits, one.logits) << "two workers against one";
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooForwardTest, ::testing::ValuesIn(model_names(Check::kForward)),
                         [](const auto& name) { return name.param; });

class ZooBuildTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooBuildTest, BuildsAsItsReference) {
  const models::ModelInfo& info = models::find(GetParam());
  const Outcome built = run(info, 1);
  expect_reference_structure(info, built);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooBuildTest, ::testing::ValuesIn(model_names(Check::kBuild)),
                         [](const auto& name) { return name.param; });

// Every model of kForwardOnly and kBuildOnly is one of the zoo's: a renamed model cannot leave both lists.
TEST(ZooStepsTest, ForwardOnlyModelsAreRegistered) {
  for (const std::string& name : kForwardOnly) EXPECT_NO_THROW((void)models::find(name)) << name;
  for (const std::string& name : kBuildOnly) EXPECT_NO_THROW((void)models::find(name)) << name;
}

}  // namespace
}  // namespace dtnn

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
