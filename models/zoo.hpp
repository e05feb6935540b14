// SPDX-License-Identifier: Apache-2.0
// Model zoo: free functions returning an unbuilt model, and a registry by name.
//
// Every model reproduces a published definition, named next to it, down to its parameter count and, where that
// definition is a PyTorch module, its state_dict names ("layer1.0.conv1.weight", "features.denseblock1.denselayer1
// .norm1.running_mean"), which are also the checkpoint schema. Where the reference initialises its weights in its
// own way (torchvision's VGG, ResNet and DenseNet) the model does the same; elsewhere each layer keeps PyTorch's
// default initialisation.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "models/sequential.hpp"

namespace dtnn::models {

struct ModelOptions {
  // Outputs of the classifier; 0 keeps the model's own (10 for the MNIST and CIFAR-10 models, 1000 for ImageNet).
  ModelOptions& classes(int n) { classes_ = n; return *this; }
  int classes_ = 0;
};

// ---- MNIST, 1x28x28 ----
// 784-512-512-512-10 perceptron with ReLU (PyDTNN's simplemlp).
Sequential simplemlp(const ModelOptions& options = {});
// Two 3x3 convolutions (32 and 64 channels) each with ReLU and 2x2 max pooling, then Dense 128 + ReLU and
// Dense 10: the default CNN for (Fashion-)MNIST.
Sequential simplecnn(const ModelOptions& options = {});
// LeCun et al. 1998: conv 5x5 (6, padding 2: the paper's 32x32 input) + tanh + 2x2 average pooling, conv 5x5 (16)
// + tanh + pooling, then 120-84-classes with tanh; C3 fully connected, as every modern version.
Sequential lenet5(const ModelOptions& options = {});

// ---- AlexNet ----
// PyDTNN's alexnet_cifar10, 3x32x32.
Sequential alexnet_cifar10(const ModelOptions& options = {});
// torchvision's alexnet (the one-GPU variant of Krizhevsky 2014), 3x224x224.
Sequential alexnet_imagenet(const ModelOptions& options = {});

// ---- VGG (Simonyan and Zisserman 2015): configurations A (11), D (16) and E (19) ----
// CIFAR-10, 3x32x32: kuangliu/pytorch-cifar's VGG (512 features -> Dense classes); the non-bn models drop the
// BatchNorm layers. ImageNet, 3x224x224: torchvision's vgg11, vgg11_bn, ... Both use torchvision's initialisation.
Sequential vgg11_cifar10(const ModelOptions& options = {});
Sequential vgg11bn_cifar10(const ModelOptions& options = {});
Sequential vgg16_cifar10(const ModelOptions& options = {});
Sequential vgg16bn_cifar10(const ModelOptions& options = {});
Sequential vgg19_cifar10(const ModelOptions& options = {});
Sequential vgg19bn_cifar10(const ModelOptions& options = {});
Sequential vgg11_imagenet(const ModelOptions& options = {});
Sequential vgg11bn_imagenet(const ModelOptions& options = {});
Sequential vgg16_imagenet(const ModelOptions& options = {});
Sequential vgg16bn_imagenet(const ModelOptions& options = {});
Sequential vgg19_imagenet(const ModelOptions& options = {});
Sequential vgg19bn_imagenet(const ModelOptions& options = {});

// ---- ResNet (He et al. 2016) ----
// CIFAR-10, 3x32x32: kuangliu/pytorch-cifar's ResNet18 ... ResNet152 (3x3 stem, 64 to 512 channels, projection
// shortcuts; the bottleneck's stride on its 3x3 convolution).
Sequential resnet18_cifar10(const ModelOptions& options = {});
Sequential resnet34_cifar10(const ModelOptions& options = {});
Sequential resnet50_cifar10(const ModelOptions& options = {});
Sequential resnet101_cifar10(const ModelOptions& options = {});
Sequential resnet152_cifar10(const ModelOptions& options = {});
// CIFAR-10: the paper's 6n+2-layer networks (16, 32, 64 channels) with parameter-free option-A shortcuts
// (ShortcutPad), as akamaster/pytorch_resnet_cifar10.
Sequential resnet20_cifar10(const ModelOptions& options = {});
Sequential resnet32_cifar10(const ModelOptions& options = {});
Sequential resnet44_cifar10(const ModelOptions& options = {});
Sequential resnet56_cifar10(const ModelOptions& options = {});
Sequential resnet110_cifar10(const ModelOptions& options = {});
Sequential resnet1202_cifar10(const ModelOptions& options = {});
// ImageNet, 3x224x224: torchvision's resnet18 ... resnet152; resnet50 and deeper are v1.5 (stride on the 3x3).
Sequential resnet18_imagenet(const ModelOptions& options = {});
Sequential resnet34_imagenet(const ModelOptions& options = {});
Sequential resnet50_imagenet(const ModelOptions& options = {});
Sequential resnet101_imagenet(const ModelOptions& options = {});
Sequential resnet152_imagenet(const ModelOptions& options = {});

// ---- DenseNet-121 (Huang et al. 2017, growth 32, blocks 6-12-24-16, bottleneck 4x, compression 0.5) ----
// CIFAR-10: kuangliu/pytorch-cifar's DenseNet121 (3x3 stem of 64 channels, no stem pooling).
Sequential densenet121_cifar10(const ModelOptions& options = {});
// ImageNet, 3x224x224: torchvision's densenet121.
Sequential densenet121_imagenet(const ModelOptions& options = {});

// ---- Inception ----
// torchvision's googlenet (Szegedy et al. 2015 with BatchNorm) without the auxiliary classifiers, 3x224x224.
Sequential googlenet(const ModelOptions& options = {});
// torchvision's inception_v3 (Szegedy et al. 2016) without the auxiliary classifier, 3x299x299.
Sequential inceptionv3(const ModelOptions& options = {});

// ---- MobileNet v1 (Howard et al. 2017), width 1.0: depthwise 3x3 + pointwise 1x1, each with BatchNorm + ReLU ----
// 3x224x224.
Sequential mobilenetv1(const ModelOptions& options = {});
// kuangliu/pytorch-cifar's MobileNet: stride 1 stem and one stride fewer, 3x32x32.
Sequential mobilenetv1_cifar10(const ModelOptions& options = {});

// ---- Transformer language models (issue 38): int32 token ids (context) in, logits (context, vocabulary) out ----
// tools/gpt_reference.py is the PyTorch module of the same parameter names, shapes and count for each of them.
struct TransformerLmOptions {
  std::int64_t vocabulary = 256;
  std::int64_t context = 256;  // the learned positional table's length: the longest sequence the model takes
  std::int64_t d_model = 256;
  std::int64_t num_heads = 4;
  std::int64_t layers = 4;
  std::int64_t d_ff = 0;  // 0: 4 d_model
  double dropout = 0.0;   // embeddings, attention probabilities, residual branches
  bool tied = false;      // the head's weight is wte's (TiedLinear), else lm_head.weight [vocabulary, d_model]
  bool causal = true;
  bool norm_first = true;  // pre-LN with a final ln_f (GPT-2); false: post-LN with emb_ln after the embeddings (BERT)
  std::string activation = "gelu_tanh";
  double eps = 1e-5;
};
// wte (Embedding), wpe (learned PositionalEncoding), [emb_ln,] [drop,] h.0 ... h.{layers-1} (transformer_block),
// [ln_f,] lm_head. Initialised as GPT-2 (and BERT): every weight matrix and table N(0, 0.02), biases 0, LayerNorm 1
// and 0; with norm_first, the residual projections (attn.out_proj.weight, mlp.c_proj.weight) N(0, 0.02 / sqrt(2
// layers)) as GPT-2's paper. classes in ModelOptions replaces the vocabulary.
Sequential transformer_lm(const TransformerLmOptions& options);
// For the tests: 2 pre-LN layers, d_model 32, 2 heads, d_ff 128, context 16, vocabulary 256, tied head.
Sequential gpt_tiny(const ModelOptions& options = {});
// The character-level model: 4 pre-LN layers, d_model 256, 4 heads, d_ff 1024, context 256, vocabulary 256 (bytes),
// GELU (tanh), final LayerNorm, untied head, dropout 0 (so that it trains as PyTorch's module does, step for step).
Sequential gpt_char(const ModelOptions& options = {});
// GPT-2 small (Radford et al. 2019; HuggingFace's gpt2): 12 layers, 12 heads, d_model 768, d_ff 3072, context 1024,
// vocabulary 50257, tied head, dropout 0.1: 124,439,808 parameters.
Sequential gpt2_small(const ModelOptions& options = {});
// PyDTNN's BERT-medium encoder (pydtnn/models/bert.py: 8 encoders, d_model 512, 8 heads, d_ff 2048, dropout 0.1,
// sequences of 512, on inputs that are already embeddings) with BERT's input side and head (google-research/bert's
// BERT-Medium, uncased_L-8_H-512_A-8): WordPiece vocabulary 30522, learned positions 512, embedding LayerNorm
// (eps 1e-12 as BERT), post-LN blocks, exact GELU, no causal mask, head tied to the word embeddings. Neither token
// type embeddings nor the MLM head's transform.
Sequential bert_medium(const ModelOptions& options = {});

struct ModelInfo {
  std::string name;
  std::string description;
  Shape input;  // per sample: (C, H, W) of an image model; (context) token ids of a language model
  int classes;  // a language model's vocabulary
  std::function<Sequential()> make;
};

const std::vector<ModelInfo>& registry();
// Throws InvalidArgument listing the known names when `name` is not one of them.
const ModelInfo& find(std::string_view name);

}  // namespace dtnn::models
