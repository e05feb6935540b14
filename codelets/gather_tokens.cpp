// SPDX-License-Identifier: Apache-2.0
#include "codelets/gather_tokens.hpp"

#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "runtime/failure.hpp"

namespace dtnn::codelets {
namespace {

// Followed in the argument bytes by `count` sample indices.
struct TokenHeader {
  TokenSource source;
  std::int64_t count;
};

void gather_tokens_cpu(void** buffers, void* cl_arg) {
  TokenHeader h;
  std::memcpy(&h, cl_arg, sizeof(h));
  const auto* indices = reinterpret_cast<const std::int64_t*>(static_cast<const char*>(cl_arg) + sizeof(h));
  auto* x = runtime::vector_ptr_as<std::int32_t>(buffers[0]);
  auto* targets = runtime::vector_ptr_as<std::int32_t>(buffers[1]);
  const auto row = static_cast<std::size_t>(h.source.sequence);
  thread_local std::vector<std::int32_t> staging;
  for (std::int64_t i = 0; i < h.count; ++i) {
    const std::int64_t start = h.source.windows[indices[i]];
    const std::int32_t* window = h.source.tokens + start;
    if (h.source.reader != nullptr) {
      staging.resize(row + 1);
      h.source.reader->read(start, h.source.sequence + 1, staging.data());
      window = staging.data();
    }
    std::memcpy(x + static_cast<std::size_t>(i) * row, window, row * sizeof(std::int32_t));
    std::memcpy(targets + static_cast<std::size_t>(i) * row, window + 1, row * sizeof(std::int32_t));
  }
}

runtime::Codelet cl_gather_tokens("gather_tokens", runtime::guarded<gather_tokens_cpu>, {STARPU_W, STARPU_W},
                                  runtime::Footprint::kData);

}  // namespace

void submit_gather_tokens(const TaskTag& tag, const TokenSource& source, std::span<const std::int64_t> indices,
                          Tensor& x, Tensor& targets, int tile) {
  check_same_tiling(tag, x, targets);
  check_dtype(tag, x, DType::kInt32, "token batch");
  check_dtype(tag, targets, DType::kInt32, "token targets");
  const std::int64_t rows = x.tile_range(tile).count;
  if (static_cast<std::int64_t>(indices.size()) != rows || x.row_elements() != source.sequence ||
      targets.row_elements() != source.sequence || (source.tokens == nullptr && source.reader == nullptr) ||
      source.windows == nullptr) {
    throw InvalidArgument(fmt::format("{}: gather of {} windows of {} tokens into tile {} of {} and targets {}, "
                                      "expected matching sizes and a token stream",
                                      tag.layer, indices.size(), source.sequence, tile, to_string(x.shape()),
                                      to_string(targets.shape())));
  }
  TokenHeader header{source, rows};
  std::vector<char> bytes(sizeof(header) + indices.size_bytes());
  std::memcpy(bytes.data(), &header, sizeof(header));
  std::memcpy(bytes.data() + sizeof(header), indices.data(), indices.size_bytes());
  std::string name;
  const std::vector<runtime::Access> data{wr(x.tile(tile)), wr(targets.tile(tile))};
  runtime::submit_task(cl_gather_tokens, task_info(tag, "load", tile, 0.0, name), data, bytes.data(), bytes.size());
}

}  // namespace dtnn::codelets
