// SPDX-License-Identifier: Apache-2.0
// The task graph of a training step against a plain sequential reference, and training to accuracy.
#include <gtest/gtest.h>

#include <unistd.h>

#include <climits>
#include <cmath>
#include <filesystem>
#include <map>

#include "io/dataset.hpp"
#include "io/h5dataset.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/pooling.hpp"
#include "layers/simple.hpp"
#include "models/optimizers.hpp"
#include "models/training.hpp"
#include "models/zoo.hpp"
#include "runtime/engine.hpp"
#include "core/errors.hpp"
#include "runtime/trace.hpp"
#include "support/environment.hpp"

namespace dtnn {
namespace {

using Vec = std::vector<double>;

// A plain, single-threaded, double-precision implementation of the same layers: the oracle.
struct Reference {
  Sequential& model;
  std::map<std::string, Vec> weights;  // by parameter name
  std::map<std::string, Vec> velocity;

  explicit Reference(Sequential& m) : model(m) {
    for (const auto& np : m.named_parameters()) {
      const auto v = np.parameter->value.to_vector();
      weights[np.name] = Vec(v.begin(), v.end());
      velocity[np.name] = Vec(v.size(), 0.0);
    }
  }

  Vec& w(Layer& l, const char* p) { return weights.at(l.name() + "." + p); }
  bool has(Layer& l, const char* p) { return weights.count(l.name() + "." + p) > 0; }

  Vec forward(Layer& l, const Vec& x, std::int64_t n) {
    if (auto* c = dynamic_cast<Conv2d*>(&l)) {
      const auto& g = c->geometry();
      const int oh = g.out_h(), ow = g.out_w(), cg = g.c / g.groups, kg = g.k / g.groups;
      Vec y(static_cast<std::size_t>(n * g.k * oh * ow));
      const Vec& W = w(l, "weight");
      for (std::int64_t b = 0; b < n; ++b)
        for (int k = 0; k < g.k; ++k)
          for (int i = 0; i < oh; ++i)
            for (int j = 0; j < ow; ++j) {
              double s = has(l, "bias") ? w(l, "bias")[k] : 0.0;
              const int grp = k / kg;
              for (int ci = 0; ci < cg; ++ci)
                for (int r = 0; r < g.r; ++r)
                  for (int q = 0; q < g.s; ++q) {
                    const int hi = i * g.stride_h - g.pad_top + r * g.dil_h;
                    const int wi = j * g.stride_w - g.pad_left + q * g.dil_w;
                    if (hi < 0 || hi >= g.h || wi < 0 || wi >= g.w) continue;
                    const int cin = grp * cg + ci;
                    s += W[((k * cg + ci) * g.r + r) * g.s + q] * x[((b * g.c + cin) * g.h + hi) * g.w + wi];
                  }
              y[((b * g.k + k) * oh + i) * ow + j] = s;
            }
      return y;
    }
    if (auto* d = dynamic_cast<Dense*>(&l)) {
      const auto in = d->options().in_, out = d->options().out_;
      Vec y(static_cast<std::size_t>(n * out));
      for (std::int64_t b = 0; b < n; ++b)
        for (std::int64_t o = 0; o < out; ++o) {
          double s = has(l, "bias") ? w(l, "bias")[o] : 0.0;
          for (std::int64_t i = 0; i < in; ++i) s += w(l, "weight")[o * in + i] * x[b * in + i];
          y[b * out + o] = s;
        }
      return y;
    }
    if (dynamic_cast<ReLU*>(&l)) {
      Vec y = x;
      for (double& v : y) v = std::max(v, 0.0);
      return y;
    }
    if (auto* p = dynamic_cast<MaxPool2d*>(&l)) {
      const auto& g = p->geometry();
      Vec y(static_cast<std::size_t>(n * g.c * g.out_h() * g.out_w()));
      for (std::int64_t b = 0; b < n; ++b)
        for (int c = 0; c < g.c; ++c)
          for (int i = 0; i < g.out_h(); ++i)
            for (int j = 0; j < g.out_w(); ++j) {
              double m = -1e300;
              for (int r = 0; r < g.kh; ++r)
                for (int q = 0; q < g.kw; ++q) {
                  const int hi = i * g.stride_h - g.pad_h + r, wi = j * g.stride_w - g.pad_w + q;
                  if (hi >= 0 && hi < g.h && wi >= 0 && wi < g.w) m = std::max(m, x[((b * g.c + c) * g.h + hi) * g.w + wi]);
                }
              y[((b * g.c + c) * g.out_h() + i) * g.out_w() + j] = m;
            }
      return y;
    }
    return x;  // Flatten
  }

  // Returns dx; accumulates parameter gradients into grads.
  Vec backward(Layer& l, const Vec& x, const Vec& dy, std::int64_t n, std::map<std::string, Vec>& grads) {
    Vec dx(x.size(), 0.0);
    if (auto* c = dynamic_cast<Conv2d*>(&l)) {
      const auto& g = c->geometry();
      const int oh = g.out_h(), ow = g.out_w(), cg = g.c / g.groups, kg = g.k / g.groups;
      const Vec& W = w(l, "weight");
      Vec& dW = grads[l.name() + ".weight"];
      dW.assign(W.size(), 0.0);
      Vec* db = nullptr;
      if (has(l, "bias")) {
        db = &grads[l.name() + ".bias"];
        db->assign(static_cast<std::size_t>(g.k), 0.0);
      }
      for (std::int64_t b = 0; b < n; ++b)
        for (int k = 0; k < g.k; ++k)
          for (int i = 0; i < oh; ++i)
            for (int j = 0; j < ow; ++j) {
              const double e = dy[((b * g.k + k) * oh + i) * ow + j];
              if (db) (*db)[k] += e;
              const int grp = k / kg;
              for (int ci = 0; ci < cg; ++ci)
                for (int r = 0; r < g.r; ++r)
                  for (int q = 0; q < g.s; ++q) {
                    const int hi = i * g.stride_h - g.pad_top + r * g.dil_h;
                    const int wi = j * g.stride_w - g.pad_left + q * g.dil_w;
                    if (hi < 0 || hi >= g.h || wi < 0 || wi >= g.w) continue;
                    const std::size_t xi = ((b * g.c + grp * cg + ci) * g.h + hi) * g.w + wi;
                    const std::size_t wi_ = ((k * cg + ci) * g.r + r) * g.s + q;
                    dW[wi_] += e * x[xi];
                    dx[xi] += e * W[wi_];
                  }
            }
      return dx;
    }
    if (auto* d = dynamic_cast<Dense*>(&l)) {
      const auto in = d->options().in_, out = d->options().out_;
      Vec& dW = grads[l.name() + ".weight"];
      dW.assign(static_cast<std::size_t>(in * out), 0.0);
      Vec* db = nullptr;
      if (has(l, "bias")) {
        db = &grads[l.name() + ".bias"];
        db->assign(static_cast<std::size_t>(out), 0.0);
      }
      for (std::int64_t b = 0; b < n; ++b)
        for (std::int64_t o = 0; o < out; ++o) {
          const double e = dy[b * out + o];
          if (db) (*db)[o] += e;
          for (std::int64_t i = 0; i < in; ++i) {
            dW[o * in + i] += e * x[b * in + i];
            dx[b * in + i] += e * w(l, "weight")[o * in + i];
          }
        }
      return dx;
    }
    if (dynamic_cast<ReLU*>(&l)) {
      for (std::size_t i = 0; i < x.size(); ++i) dx[i] = x[i] > 0 ? dy[i] : 0.0;
      return dx;
    }
    if (auto* p = dynamic_cast<MaxPool2d*>(&l)) {
      const auto& g = p->geometry();
      for (std::int64_t b = 0; b < n; ++b)
        for (int c = 0; c < g.c; ++c)
          for (int i = 0; i < g.out_h(); ++i)
            for (int j = 0; j < g.out_w(); ++j) {
              double m = -1e300;
              std::size_t arg = 0;
              for (int r = 0; r < g.kh; ++r)
                for (int q = 0; q < g.kw; ++q) {
                  const int hi = i * g.stride_h - g.pad_h + r, wi = j * g.stride_w - g.pad_w + q;
                  if (hi < 0 || hi >= g.h || wi < 0 || wi >= g.w) continue;
                  const std::size_t xi = ((b * g.c + c) * g.h + hi) * g.w + wi;
                  if (x[xi] > m) { m = x[xi]; arg = xi; }
                }
              dx[arg] += dy[((b * g.c + c) * g.out_h() + i) * g.out_w() + j];
            }
      return dx;
    }
    return dy;  // Flatten
  }

  // One SGD step (PyTorch's momentum formula) on the samples `rows` of data.
  void step(const io::Dataset& data, std::int64_t first, std::int64_t n, double lr, double momentum) {
    std::vector<Vec> acts(1);
    const auto se = data.sample_elements();
    acts[0].assign(data.images.begin() + first * se, data.images.begin() + (first + n) * se);
    for (std::size_t i = 0; i < model.size(); ++i) acts.push_back(forward(model.layer(i), acts[i], n));
    const Vec& z = acts.back();
    const int classes = data.classes;
    Vec dz(z.size());
    for (std::int64_t b = 0; b < n; ++b) {
      double m = -1e300, s = 0.0;
      for (int c = 0; c < classes; ++c) m = std::max(m, z[b * classes + c]);
      for (int c = 0; c < classes; ++c) s += std::exp(z[b * classes + c] - m);
      for (int c = 0; c < classes; ++c) {
        const double p = std::exp(z[b * classes + c] - m) / s;
        dz[b * classes + c] = (p - (data.labels[first + b] == c ? 1.0 : 0.0)) / static_cast<double>(n);
      }
    }
    std::map<std::string, Vec> grads;
    Vec dy = dz;
    for (std::size_t i = model.size(); i-- > 0;) dy = backward(model.layer(i), acts[i], dy, n, grads);
    for (auto& [name, g] : grads) {
      Vec& v = velocity.at(name);
      Vec& p = weights.at(name);
      for (std::size_t i = 0; i < g.size(); ++i) {
        v[i] = momentum * v[i] + g[i];
        p[i] -= lr * v[i];
      }
    }
  }
};

Sequential small_cnn() {
  Sequential m;
  m.add<Conv2d>(Conv2dOptions(2, 4, 3).padding(1))
      .add<ReLU>()
      .add<MaxPool2d>(MaxPool2dOptions(2))
      .add<Conv2d>(Conv2dOptions(4, 4, 3).stride(2).groups(2))
      .add<ReLU>()
      .add<Flatten>()
      .add<Dense>(DenseOptions(4 * 2 * 2, 6))
      .add<ReLU>()
      .add<Dense>(DenseOptions(6, 3));
  return m;
}

struct StepCase {
  std::int64_t batch;
  int tiles;
};

class TaskGraphStepTest : public ::testing::TestWithParam<StepCase> {};

TEST_P(TaskGraphStepTest, EqualsThePlainSequentialReference) {
  const auto [batch, tiles] = GetParam();
  const io::Dataset data = io::synthetic_dataset(static_cast<int>(3 * batch), 2, 10, 10, 3, 11);
  Sequential model = small_cnn();
  model.build({2, 10, 10}, 5);
  Reference ref(model);
  const double lr = 0.1, momentum = 0.9;
  for (int s = 0; s < 3; ++s) ref.step(data, s * batch, batch, lr, momentum);

  Sgd sgd(SgdOptions(static_cast<float>(lr)).momentum(static_cast<float>(momentum)));
  fit(model, sgd, data, FitOptions().batch_size(batch).tiles(tiles).shuffle(false).steps_per_epoch(3).verbose(false));
  for (const auto& np : model.named_parameters()) {
    const auto got = np.parameter->value.to_vector();
    const Vec& want = ref.weights.at(np.name);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-5) << np.name << "[" << i << "] batch " << batch << " tiles " << tiles;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TilesAndBatches, TaskGraphStepTest,
                         ::testing::Values(StepCase{8, 1}, StepCase{8, 2}, StepCase{8, 3}, StepCase{7, 2},
                                           StepCase{7, 3}, StepCase{2, 3}),
                         [](const auto& info) {
                           return "batch" + std::to_string(info.param.batch) + "_tiles" +
                                  std::to_string(info.param.tiles);
                         });

// Data-parallel training orders the backward pass layer by layer (PassContext::layer_priority_stride): the
// weight gradients and tile sums of a layer outrank every data gradient of the layers below it, so each gradient is
// final, and its reduction across ranks can start, while the backward pass goes on.
TEST(BackwardPriorityTest, LayerStrideRanksWeightGradientsAboveTheDataGradientsBelow) {
  Sequential model = small_cnn();
  model.build({2, 10, 10}, 3);
  std::vector<Tensor> acts;
  std::vector<Tensor> grads;
  model.allocate(4, 2, acts, &grads);
  std::vector<float> x(static_cast<std::size_t>(acts[0].numel()));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  acts[0].copy_from(x);
  grads.back().fill(0.25f);
  runtime::Tracer::start();
  PassContext ctx{1, 0, 0};
  ctx.layer_priority_stride = 2;
  model.forward(acts, ctx);
  model.backward(acts, grads, ctx, nullptr);
  runtime::Engine::current()->wait_all();
  runtime::Tracer::stop();

  // Per layer index: the lowest priority of its weight-gradient tasks and the highest of its data-gradient tasks.
  std::map<int, int> weights_min;
  std::map<int, int> data_max;
  for (const runtime::TraceEvent& e : runtime::Tracer::events()) {
    const auto colon = e.name.find(':');
    const std::string pass = e.name.substr(colon + 1);
    const int layer = std::stoi(e.name.substr(0, e.name.find_first_of(".:")));
    if (pass == "bwd_weights" || pass == "tile_sum") {
      weights_min[layer] = std::min(weights_min.count(layer) ? weights_min[layer] : INT_MAX, e.priority);
    } else if (pass == "bwd_data") {
      data_max[layer] = std::max(data_max.count(layer) ? data_max[layer] : INT_MIN, e.priority);
    }
  }
  EXPECT_EQ(weights_min.size(), 4U);  // two convolutions, two dense layers
  EXPECT_GE(data_max.size(), 6U);
  for (const auto& [layer, low] : weights_min) {
    for (const auto& [below, high] : data_max) {
      if (below < layer) {
        EXPECT_GT(low, high) << "weight gradient of layer " << layer << " against data gradient of layer " << below;
      }
    }
  }
  // The data gradient still goes before the weight gradient of its own layer (the critical path).
  for (const auto& [layer, low] : weights_min) {
    if (data_max.count(layer)) {
      EXPECT_GT(data_max[layer], low) << layer;
    }
  }
}

TEST(FitTest, ShortLastBatchAndTwoEpochsAreCounted) {
  const io::Dataset data = io::synthetic_dataset(21, 2, 10, 10, 3, 3);
  Sequential model = small_cnn();
  model.build({2, 10, 10}, 1);
  Sgd sgd(SgdOptions(0.01f));
  const History h = fit(model, sgd, data, FitOptions().epochs(2).batch_size(8).tiles(3).verbose(false));
  ASSERT_EQ(h.epochs.size(), 2u);
  EXPECT_EQ(h.epochs[0].images, 21);
  EXPECT_EQ(h.images(), 42);
  EXPECT_TRUE(std::isfinite(h.epochs[1].loss));
}

TEST(FitTest, AugmentationIsSeededAndChangesTraining) {
  const io::Dataset data = io::synthetic_dataset(32, 2, 10, 10, 3, 5);
  auto run = [&](AugmentOptions augment, std::uint64_t seed) {
    Sequential model = small_cnn();
    model.build({2, 10, 10}, 1);
    Sgd sgd(SgdOptions(0.05f));
    fit(model, sgd, data, FitOptions().batch_size(8).tiles(2).seed(seed).verbose(false).augment(augment));
    return model.weights_checksum();
  };
  const AugmentOptions flip_crop{true, 2};
  EXPECT_EQ(run(flip_crop, 3), run(flip_crop, 3));
  EXPECT_NE(run(flip_crop, 3), run(AugmentOptions{}, 3));
  EXPECT_THROW(run(AugmentOptions{false, -1}, 3), InvalidArgument);
}

TEST(FitTest, StreamingFromHdf5EqualsTrainingInMemory) {
  const auto file = std::filesystem::temp_directory_path() / ("dtnn-stream-" + std::to_string(::getpid()) + ".h5");
  io::write_h5_dataset(file, io::TrainTest{io::synthetic_dataset(40, 2, 10, 10, 3, 8),
                                           io::synthetic_dataset(8, 2, 10, 10, 3, 9)});
  const io::Dataset in_memory = io::read_h5_dataset(file, "train");
  const io::Dataset streamed = io::open_h5_dataset(file, "train", 8);
  ASSERT_TRUE(streamed.images.empty());
  auto run = [](const io::Dataset& data, AugmentOptions augment) {
    Sequential model = small_cnn();
    model.build({2, 10, 10}, 1);
    Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
    fit(model, sgd, data, FitOptions().epochs(2).batch_size(8).tiles(3).seed(2).verbose(false).augment(augment));
    return model.weights_checksum();
  };
  EXPECT_EQ(run(streamed, {}), run(in_memory, {}));
  EXPECT_EQ(run(streamed, {1, 2}), run(in_memory, {1, 2}));
  EXPECT_THROW((void)streamed.subset(0, 4), InvalidArgument);
  std::filesystem::remove(file);
}

TEST(FitTest, RejectsAModelThatDoesNotFitTheData) {
  const io::Dataset data = io::synthetic_dataset(8, 1, 28, 28, 10, 3);
  Sequential model = small_cnn();
  model.build({2, 10, 10}, 1);
  Sgd sgd(SgdOptions(0.01f));
  try {
    fit(model, sgd, data, FitOptions().verbose(false));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("has samples of shape (1, 28, 28), the model expects (2, 10, 10)"),
              std::string::npos)
        << e.what();
  }
}

TEST(PredictTest, ProbabilitiesSumToOneAndAgreeWithEvaluate) {
  const io::Dataset data = io::synthetic_dataset(10, 2, 10, 10, 3, 9);
  Sequential model = small_cnn();
  model.build({2, 10, 10}, 2);
  const auto p = predict(model, data, EvalOptions().batch_size(4).tiles(2));
  ASSERT_EQ(p.size(), 30u);
  int correct = 0;
  for (int i = 0; i < 10; ++i) {
    double s = 0.0;
    int arg = 0;
    for (int c = 0; c < 3; ++c) {
      s += p[i * 3 + c];
      if (p[i * 3 + c] > p[i * 3 + arg]) arg = c;
    }
    EXPECT_NEAR(s, 1.0, 1e-5);
    correct += arg == data.labels[i];
  }
  EXPECT_NEAR(evaluate(model, data, EvalOptions().batch_size(4)).accuracy, correct / 10.0, 1e-12);
}

// The acceptance run, shortened: a fixed 6,000-image subset of Fashion-MNIST.
TEST(FashionMnistTest, SubsetReachesEightyPercent) {
  const auto dir = io::default_fashion_mnist_dir();
  if (!std::filesystem::exists(dir)) {
    DTNN_SKIP_UNLESS_STRICT(dir << " is absent (apt-get install dataset-fashion-mnist)");
  }
  io::TrainTest data = io::load_mnist_like(dir, "fashion-mnist");
  const io::Dataset train = data.train.stratified_subset(6000, 1);
  const io::Dataset test = data.test.stratified_subset(2000, 2);
  Sequential model = models::simplecnn();
  model.build({1, 28, 28}, 1);
  Sgd sgd(SgdOptions(0.05f).momentum(0.9f));
  fit(model, sgd, train, FitOptions().epochs(3).batch_size(64).tiles(2).seed(1).verbose(false));
  const EvalResult r = evaluate(model, test);
  EXPECT_GE(r.accuracy, 0.80) << "loss " << r.loss;
}

}  // namespace
}  // namespace dtnn
