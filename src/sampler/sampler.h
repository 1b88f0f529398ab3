// Sampler: picks the next token from logits. The chain follows llama.cpp's default order:
// penalties (repetition, presence, frequency) -> top-k -> top-p -> min-p -> temperature -> seeded draw. temp <= 0 is greedy
// (argmax, lowest id wins ties). A pure function of (logits, history, RNG state).
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "core/status.h"

namespace trine {

struct SamplerParams {
  float temp = 0.8f;
  int top_k = 40;             // <= 0: disabled
  float top_p = 0.95f;        // >= 1: disabled
  float min_p = 0.05f;        // <= 0: disabled
  float repeat_penalty = 1.0f;  // 1: disabled
  // OpenAI's penalties, as llama.cpp applies them after the repetition penalty: a token seen c > 0
  // times in the window loses c * frequency_penalty + presence_penalty. 0: disabled.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int repeat_last_n = 64;     // history window of the penalties
  uint64_t seed = 0xC0FFEE;
};

// Checks ranges (temp >= 0, top_p in (0, 1], min_p in [0, 1], penalty > 0, ...).
Status ValidateSamplerParams(const SamplerParams& p);

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);

  // Returns the chosen token id in [0, n_vocab).
  int Sample(const float* logits, int n_vocab);
  // Records a token (prompt or generated) for the repetition penalty.
  void Accept(int token);
  void Reset();

 private:
  SamplerParams p_;
  std::mt19937_64 rng_;
  std::deque<int> history_;
  std::vector<std::pair<float, int>> cand_;  // (logit, id) scratch
};

// Index of the largest value; the lowest index wins ties.
int ArgmaxLowestId(const float* v, int n);
// Indices of the k largest values (k clamped to n), largest first, the lowest index first on ties.
std::vector<int> TopKLowestId(const float* v, int n, int k);

}  // namespace trine
