// SPDX-License-Identifier: Apache-2.0
// ShortcutPad (option-A residual shortcut): values against a direct reading of the definition, the numerical
// gradient checker, and the argument checks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layers/shortcut.hpp"
#include "core/errors.hpp"
#include "support/gradient_check.hpp"

namespace dtnn {
namespace {

using testing::check_layer_gradients;

template <class Fn>
void expect_invalid(Fn&& fn, const std::string& fragment) {
  try {
    fn();
    FAIL() << "expected InvalidArgument containing '" << fragment << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ShortcutPadTest, BackwardMatchesNumericalGradient) {
  ShortcutPad halving(ShortcutPadOptions(3, 7).stride(2));
  check_layer_gradients(halving, {3, 5, 6});
  ShortcutPad channels_only(ShortcutPadOptions(2, 6));
  check_layer_gradients(channels_only, {2, 3, 3});
  ShortcutPad stride3(ShortcutPadOptions(2, 2).stride(3));
  check_layer_gradients(stride3, {2, 7, 4});
}

// akamaster's LambdaLayer: F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, planes // 4, planes // 4)).
TEST(ShortcutPadTest, SubsamplesAndPadsTheChannelsOnBothSides) {
  const int n = 2, c = 2, h = 5, w = 3, k = 6, s = 2;
  ShortcutPad layer(ShortcutPadOptions(c, k).stride(s));
  ASSERT_EQ(layer.build({c, h, w}), (Shape{k, 3, 2}));
  std::vector<float> xs(n * c * h * w);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i + 1);
  Tensor x({n, c, h, w}, 2);
  x.copy_from(xs);
  Tensor y({n, k, 3, 2}, 2);
  layer.forward(x, y, PassContext{});
  const auto got = y.to_vector();
  for (int i = 0; i < n; ++i)
    for (int ch = 0; ch < k; ++ch)
      for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 2; ++q) {
          const int src = ch - (k - c) / 2;
          const float want = src < 0 || src >= c ? 0.0f : xs[((i * c + src) * h + s * r) * w + s * q];
          EXPECT_EQ(got[((i * k + ch) * 3 + r) * 2 + q], want) << "y[" << i << ", " << ch << ", " << r << ", " << q
                                                                << "]";
        }
}

TEST(ShortcutPadTest, HasNoParameters) {
  ShortcutPad layer(ShortcutPadOptions(16, 32).stride(2));
  layer.build({16, 32, 32});
  EXPECT_EQ(layer.parameter_count(), 0);
  EXPECT_EQ(layer.output_shape(), (Shape{32, 16, 16}));
}

TEST(ShortcutPadTest, RejectsBadOptionsAndInputs) {
  expect_invalid([] { ShortcutPad(ShortcutPadOptions(8, 4)); }, "in_channels=8 out_channels=4, expected 1 <= in");
  expect_invalid([] { ShortcutPad(ShortcutPadOptions(4, 7)); }, "with an even difference");
  expect_invalid([] { ShortcutPad(ShortcutPadOptions(0, 2)); }, "in_channels=0");
  expect_invalid([] { ShortcutPad(ShortcutPadOptions(4, 8).stride(0)); }, "ShortcutPad: stride 0, expected >= 1");
  ShortcutPad layer(ShortcutPadOptions(4, 8).stride(2));
  layer.set_name("shortcut");
  expect_invalid([&] { layer.build({3, 8, 8}); }, "ShortcutPad shortcut: input (3, 8, 8), expected (4, H, W)");
  expect_invalid([&] { layer.build({4, 8}); }, "expected (4, H, W)");
}

}  // namespace
}  // namespace dtnn
