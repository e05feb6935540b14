// SPDX-License-Identifier: Apache-2.0
// ResNets: torchvision's for ImageNet, kuangliu/pytorch-cifar's and He et al. 2016's (akamaster's) for CIFAR-10.
// One builder serves all three; they differ in the stem, the widths, the shortcut and the names.
//
// A residual block is an Add Block whose first path holds the residual branch under the block's own name
// ("layer1.0.conv1") and whose second path is the shortcut: identity, projection ("layer1.0.downsample.0") or
// ShortcutPad. The ReLU after the sum is the next layer of the model, named "<block>.relu" as torchvision's.
// Convolutions are initialised as torchvision's ResNet: He normal with fan_out; BatchNorm weight 1, bias 0.
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "layers/batch_norm.hpp"
#include "layers/block.hpp"
#include "layers/pooling.hpp"
#include "layers/shortcut.hpp"
#include "layers/simple.hpp"
#include "models/zoo.hpp"
#include "models/zoo_common.hpp"

namespace dtnn::models {
namespace {

using detail::classes_or;
using detail::FanMode;
using detail::KaimingConv2d;

enum class Unit { kBasic, kBottleneck };           // two 3x3 convolutions, or 1x1 - 3x3 - 1x1 (4x wider out)
enum class Stem { kImageNet, kCifar };             // 7x7/2 conv + 3x3/2 max pooling, or one 3x3/1 conv
enum class Shortcut { kProjection, kZeroPad };     // 1x1 conv + BatchNorm, or ShortcutPad (option A)

struct ResNetSpec {
  Unit unit;
  std::vector<int> blocks;  // per stage; stage s has width << s channels and stride 2 except the first
  int width;                // channels of the first stage (and of the stem)
  Stem stem;
  Shortcut shortcut;
  const char* shortcut_name;    // "downsample" (torchvision) or "shortcut" (kuangliu, akamaster)
  const char* classifier_name;  // "fc" (torchvision) or "linear"
};

Conv2dOptions conv(int in, int out, int kernel, int stride) {
  return Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false);
}

std::unique_ptr<KaimingConv2d> he_conv(Conv2dOptions options) {
  return std::make_unique<KaimingConv2d>(options, FanMode::kFanOut);
}

std::unique_ptr<BatchNorm2d> bn(int channels) { return std::make_unique<BatchNorm2d>(BatchNorm2dOptions(channels)); }

std::unique_ptr<Block> residual_block(const ResNetSpec& spec, int in, int planes, int stride) {
  Path branch("");
  int out = planes;
  if (spec.unit == Unit::kBasic) {
    branch.add("conv1", he_conv(conv(in, planes, 3, stride)))
        .add("bn1", bn(planes))
        .add("relu1", std::make_unique<ReLU>())
        .add("conv2", he_conv(conv(planes, planes, 3, 1)))
        .add("bn2", bn(planes));
  } else {
    out = 4 * planes;
    branch.add("conv1", he_conv(conv(in, planes, 1, 1)))
        .add("bn1", bn(planes))
        .add("relu1", std::make_unique<ReLU>())
        .add("conv2", he_conv(conv(planes, planes, 3, stride)))
        .add("bn2", bn(planes))
        .add("relu2", std::make_unique<ReLU>())
        .add("conv3", he_conv(conv(planes, out, 1, 1)))
        .add("bn3", bn(out));
  }
  auto block = std::make_unique<Block>(Merge::kAdd);
  block->add_path(std::move(branch));
  if (stride == 1 && in == out) {
    block->add_path(Path());
  } else if (spec.shortcut == Shortcut::kProjection) {
    block->add_path(Path(spec.shortcut_name).add(he_conv(conv(in, out, 1, stride))).add(bn(out)));
  } else {
    block->add_path(Path("").add(spec.shortcut_name,
                                 std::make_unique<ShortcutPad>(ShortcutPadOptions(in, out).stride(stride))));
  }
  return block;
}

Sequential resnet(const ResNetSpec& spec, int classes) {
  Sequential m;
  if (spec.stem == Stem::kImageNet) {
    m.add("conv1", he_conv(conv(3, spec.width, 7, 2)))
        .add("bn1", bn(spec.width))
        .add_as<ReLU>("relu")
        .add_as<MaxPool2d>("maxpool", MaxPool2dOptions(3).stride(2).padding(1));
  } else {
    m.add("conv1", he_conv(conv(3, spec.width, 3, 1))).add("bn1", bn(spec.width)).add_as<ReLU>("relu");
  }
  int channels = spec.width;
  for (std::size_t s = 0; s < spec.blocks.size(); ++s) {
    const int planes = spec.width << s;
    for (int b = 0; b < spec.blocks[s]; ++b) {
      const std::string name = fmt::format("layer{}.{}", s + 1, b);
      const int stride = s > 0 && b == 0 ? 2 : 1;
      m.add(name, residual_block(spec, channels, planes, stride)).add_as<ReLU>(name + ".relu");
      channels = spec.unit == Unit::kBasic ? planes : 4 * planes;
    }
  }
  // The Dense layer reads the (C, 1, 1) pooled maps as flattened: no Flatten copy.
  m.add_as<GlobalAvgPool2d>("avgpool").add_as<Dense>(spec.classifier_name, DenseOptions(channels, classes));
  return m;
}

ResNetSpec torchvision(Unit unit, std::vector<int> blocks) {
  return {unit, std::move(blocks), 64, Stem::kImageNet, Shortcut::kProjection, "downsample", "fc"};
}

ResNetSpec kuangliu(Unit unit, std::vector<int> blocks) {
  return {unit, std::move(blocks), 64, Stem::kCifar, Shortcut::kProjection, "shortcut", "linear"};
}

// 6n + 2 layers: three stages of n basic blocks, 16, 32 and 64 channels.
ResNetSpec he_cifar(int n) {
  return {Unit::kBasic, {n, n, n}, 16, Stem::kCifar, Shortcut::kZeroPad, "shortcut", "linear"};
}

}  // namespace

Sequential resnet18_cifar10(const ModelOptions& o) {
  return resnet(kuangliu(Unit::kBasic, {2, 2, 2, 2}), classes_or(o, 10, "resnet18_cifar10"));
}
Sequential resnet34_cifar10(const ModelOptions& o) {
  return resnet(kuangliu(Unit::kBasic, {3, 4, 6, 3}), classes_or(o, 10, "resnet34_cifar10"));
}
Sequential resnet50_cifar10(const ModelOptions& o) {
  return resnet(kuangliu(Unit::kBottleneck, {3, 4, 6, 3}), classes_or(o, 10, "resnet50_cifar10"));
}
Sequential resnet101_cifar10(const ModelOptions& o) {
  return resnet(kuangliu(Unit::kBottleneck, {3, 4, 23, 3}), classes_or(o, 10, "resnet101_cifar10"));
}
Sequential resnet152_cifar10(const ModelOptions& o) {
  return resnet(kuangliu(Unit::kBottleneck, {3, 8, 36, 3}), classes_or(o, 10, "resnet152_cifar10"));
}

Sequential resnet20_cifar10(const ModelOptions& o) {
  return resnet(he_cifar(3), classes_or(o, 10, "resnet20_cifar10"));
}
Sequential resnet32_cifar10(const ModelOptions& o) {
  return resnet(he_cifar(5), classes_or(o, 10, "resnet32_cifar10"));
}
Sequential resnet44_cifar10(const ModelOptions& o) {
  return resnet(he_cifar(7), classes_or(o, 10, "resnet44_cifar10"));
}
Sequential resnet56_cifar10(const ModelOptions& o) {
  return resnet(he_cifar(9), classes_or(o, 10, "resnet56_cifar10"));
}
Sequential resnet110_cifar10(const ModelOptions& o) {
  return resnet(he_cifar(18), classes_or(o, 10, "resnet110_cifar10"));
}
Sequential resnet1202_cifar10(const ModelOptions& o) {
  return resnet(he_cifar(200), classes_or(o, 10, "resnet1202_cifar10"));
}

Sequential resnet18_imagenet(const ModelOptions& o) {
  return resnet(torchvision(Unit::kBasic, {2, 2, 2, 2}), classes_or(o, 1000, "resnet18_imagenet"));
}
Sequential resnet34_imagenet(const ModelOptions& o) {
  return resnet(torchvision(Unit::kBasic, {3, 4, 6, 3}), classes_or(o, 1000, "resnet34_imagenet"));
}
Sequential resnet50_imagenet(const ModelOptions& o) {
  return resnet(torchvision(Unit::kBottleneck, {3, 4, 6, 3}), classes_or(o, 1000, "resnet50_imagenet"));
}
Sequential resnet101_imagenet(const ModelOptions& o) {
  return resnet(torchvision(Unit::kBottleneck, {3, 4, 23, 3}), classes_or(o, 1000, "resnet101_imagenet"));
}
Sequential resnet152_imagenet(const ModelOptions& o) {
  return resnet(torchvision(Unit::kBottleneck, {3, 8, 36, 3}), classes_or(o, 1000, "resnet152_imagenet"));
}

}  // namespace dtnn::models
