// SPDX-License-Identifier: Apache-2.0
#include "models/diagnosis.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "codelets/cpu/bf16.hpp"
#include "codelets/gather_batch.hpp"
#include "models/train_step.hpp"
#include "core/errors.hpp"
#include "runtime/engine.hpp"

namespace dtnn {
namespace {

// The values of t as floats: a bf16 tensor's (an activation between a convolution and its BatchNorm) widened.
std::vector<float> float_values(const Tensor& t) {
  if (t.dtype() != DType::kBFloat16) return t.to_vector();
  const std::vector<bfloat16> h = t.values_as<bfloat16>();
  std::vector<float> v(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) v[i] = kernels::cpu::bf16_to_float(h[i].bits);
  return v;
}

// The first value of t that is not finite, as text; empty when all are.
std::string first_nonfinite_value(const Tensor& t) {
  const std::vector<float> v = float_values(t);
  const auto bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
  return bad == v.end() ? std::string() : fmt::format("{}", *bad);
}

}  // namespace

std::string NonFiniteSite::describe() const {
  if (!found()) return "every layer's output and gradient is finite";
  return fmt::format("layer {} ({}): {} holds {}", layer, type, gradient ? "the gradient of its input" : "output", value);
}

NonFiniteSite first_nonfinite(Sequential& model, const io::Dataset& data, std::span<const std::int64_t> rows,
                              std::int64_t step, std::int64_t epoch, const FitOptions& o) {
  runtime::Engine* engine = runtime::Engine::current();
  if (engine == nullptr) throw InvalidArgument("first_nonfinite: no runtime::Engine is running");
  StepSlots slots(model, o.tiles_, 1, Storage::kOwned);
  StepSlot& s = slots.slot(static_cast<std::int64_t>(rows.size()), step);
  const PassContext ctx{1, 0, step};
  const bool augmenting = o.augment_.flip || o.augment_.crop_padding > 0;
  const codelets::Augmentation augmentation{o.augment_, o.seed_, epoch, data.channels, data.height, data.width};
  submit_batch_load(s, data, rows, o.label_smoothing_, augmenting ? &augmentation : nullptr);
  model.forward(s.acts, ctx);
  submit_batch_loss(s, o.loss_, o.label_smoothing_, 1.0f / static_cast<float>(rows.size()), s.grads.back());
  model.backward(s.acts, s.grads, ctx, [](Layer&) {});
  engine->wait_all();
  // A layer whose ReLU is fused into it has no output of its own: the ReLU's (absorbed) output is the pair's.
  const auto site = [&](std::size_t i, bool gradient, std::string value) {
    const std::size_t at = model.layer(i).absorbed() && i > 0 ? i - 1 : i;
    const std::string type = at == i ? model.layer(i).type()
                                     : fmt::format("{} with its {} fused", model.layer(at).type(), model.layer(i).type());
    return NonFiniteSite{model.layer(at).name(), type, gradient, std::move(value)};
  };
  for (std::size_t i = 0; i < model.size(); ++i) {
    if (!s.acts[i + 1].defined()) continue;
    std::string value = first_nonfinite_value(s.acts[i + 1]);
    if (!value.empty()) return site(i, false, std::move(value));
  }
  for (std::size_t i = model.size(); i-- > 1;) {
    if (!s.grads[i].defined()) continue;
    std::string value = first_nonfinite_value(s.grads[i]);
    if (!value.empty()) return site(i, true, std::move(value));
  }
  return {};
}

}  // namespace dtnn
