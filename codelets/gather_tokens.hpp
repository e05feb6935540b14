// SPDX-License-Identifier: Apache-2.0
// Loading a batch of token windows is a task, as loading images is (codelets/gather_batch.hpp): it copies the chosen
// windows of a token stream into the input tile and their next tokens into the targets tile.
#pragma once

#include <cstdint>
#include <span>

#include "codelets/common.hpp"
#include "core/sample_reader.hpp"

namespace dtnn::codelets {

// Windows in memory; the caller keeps them alive until the tasks that read them have run.
struct TokenSource {
  const std::int32_t* tokens = nullptr;   // the stream; null when reader is set
  TokenReader* reader = nullptr;          // streams the tokens of a corpus larger than memory
  const std::int64_t* windows = nullptr;  // where each sample's window starts in it
  std::int64_t sequence = 0;              // ids a sample feeds the model; its window holds one more
};

// For each row i of the tile (window w = windows[indices[i]]): x[i] = tokens[w, w + sequence), targets[i] =
// tokens[w + 1, w + sequence + 1). x and targets: int32 [n, sequence]; indices has the tile's row count.
void submit_gather_tokens(const TaskTag& tag, const TokenSource& source, std::span<const std::int64_t> indices,
                          Tensor& x, Tensor& targets, int tile);

}  // namespace dtnn::codelets
