// `trine bench -npp ... -ntg ... -npl ...`: llama-batched-bench's measurement for trine.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "model/model.h"

namespace trine::cli {

// Prompt tokens as llama-bench makes them: random ids, the first BOS (when the vocabulary adds
// one) where they start the context (n_past 0). Both bench modes use it (tools/bench.cc).
std::vector<int32_t> RandomTokens(const Model& m, int n, int n_past, std::mt19937& rng);

struct BatchedBenchArgs {
  std::vector<int> npp, ntg, npl;  // prompt tokens, generated tokens, parallel sequences
  std::vector<int> threads;
  int n_batch = 2048;              // tokens per forward pass (a longer prompt batch is split)
  bool pp_shared = false;          // one prompt, computed once and forked to every sequence
  bool json = false;               // rows as JSON (llama-batched-bench's jsonl field names)
  bool warmup = true;
  bool fixed_threads = false;      // ContextParams::fixed_threads
};

// For each thread count and each (pp, tg, pl): pl sequences of pp prompt tokens evaluated as one
// batch (T_PP), then tg steps that each decode one token of every sequence in one batch (T_TG).
// Prints llama-batched-bench's table (PP TG B N_KV T_PP S_PP T_TG S_TG T S) or JSON rows.
int RunBatchedBench(const Model& model, const std::string& path, const BatchedBenchArgs& args);

}  // namespace trine::cli
