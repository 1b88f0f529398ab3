// Sampler implementation.
#include "sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace trine {

Status ValidateSamplerParams(const SamplerParams& p) {
  if (!(p.temp >= 0.0f) || !std::isfinite(p.temp)) return InvalidArgument("--temp must be >= 0");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return InvalidArgument("--top-p must be in (0, 1]");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return InvalidArgument("--min-p must be in [0, 1]");
  if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty)) {
    return InvalidArgument("--repeat-penalty must be > 0");
  }
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) {
    return InvalidArgument("--presence-penalty must be in [-2, 2]");
  }
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) {
    return InvalidArgument("--frequency-penalty must be in [-2, 2]");
  }
  if (p.repeat_last_n < 0) return InvalidArgument("--repeat-last-n must be >= 0");
  return Status::Ok();
}

int ArgmaxLowestId(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) {
    if (v[i] > v[best]) best = i;
  }
  return best;
}

std::vector<int> TopKLowestId(const float* v, int n, int k) {
  std::vector<int> idx(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = i;
  k = std::max(0, std::min(k, n));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int a, int b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

Sampler::Sampler(const SamplerParams& params) : p_(params), rng_(params.seed) {}

void Sampler::Reset() {
  history_.clear();
  rng_.seed(p_.seed);
}

void Sampler::Accept(int token) {
  if (p_.repeat_last_n <= 0) return;
  history_.push_back(token);
  while (static_cast<int>(history_.size()) > p_.repeat_last_n) history_.pop_front();
}

int Sampler::Sample(const float* logits, int n_vocab) {
  cand_.resize(static_cast<size_t>(n_vocab));
  for (int i = 0; i < n_vocab; ++i) cand_[static_cast<size_t>(i)] = {logits[i], i};
  // Repetition penalty (llama.cpp / CTRL style): divide positive logits, multiply negative ones,
  // once per distinct token in the window.
  // Then presence and frequency penalties from each distinct token's count in the window.
  const bool counted = p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f;
  if ((p_.repeat_penalty != 1.0f || counted) && !history_.empty()) {
    std::vector<int> seen(history_.begin(), history_.end());
    std::sort(seen.begin(), seen.end());
    for (size_t i = 0; i < seen.size();) {
      size_t j = i;
      while (j < seen.size() && seen[j] == seen[i]) ++j;
      const int id = seen[i];
      const float count = static_cast<float>(j - i);
      i = j;
      if (id < 0 || id >= n_vocab) continue;
      float& l = cand_[static_cast<size_t>(id)].first;
      if (p_.repeat_penalty != 1.0f) l = l > 0.0f ? l / p_.repeat_penalty : l * p_.repeat_penalty;
      if (counted) l -= count * p_.frequency_penalty + p_.presence_penalty;
    }
  }
  if (p_.temp <= 0.0f) {
    size_t best = 0;
    for (size_t i = 1; i < cand_.size(); ++i) {
      if (cand_[i].first > cand_[best].first) best = i;
    }
    return cand_[best].second;
  }
  // Sort descending by logit, ties by lower id, so results are deterministic.
  auto by_logit = [](const std::pair<float, int>& a, const std::pair<float, int>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = cand_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < keep) {
    keep = static_cast<size_t>(p_.top_k);
    std::partial_sort(cand_.begin(), cand_.begin() + static_cast<long>(keep), cand_.end(), by_logit);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  cand_.resize(keep);
  // Softmax over the survivors (at temperature 1, as llama.cpp's top-p/min-p see them).
  auto softmax = [&](float temp, std::vector<float>* probs) {
    probs->resize(cand_.size());
    const float max_l = cand_[0].first;
    double sum = 0.0;
    for (size_t i = 0; i < cand_.size(); ++i) {
      (*probs)[i] = std::exp((cand_[i].first - max_l) / temp);
      sum += (*probs)[i];
    }
    for (float& pr : *probs) pr = static_cast<float>(pr / sum);
  };
  std::vector<float> probs;
  if (p_.top_p < 1.0f) {
    softmax(1.0f, &probs);
    double cum = 0.0;
    size_t n = cand_.size();
    for (size_t i = 0; i < cand_.size(); ++i) {
      cum += probs[i];
      if (cum >= p_.top_p) {
        n = i + 1;
        break;
      }
    }
    cand_.resize(n);
  }
  if (p_.min_p > 0.0f && cand_.size() > 1) {
    // Keep tokens whose probability is at least min_p times the best one's.
    const float threshold = cand_[0].first + std::log(p_.min_p);
    size_t n = 1;
    while (n < cand_.size() && cand_[n].first >= threshold) ++n;
    cand_.resize(n);
  }
  softmax(p_.temp, &probs);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  const double r = uni(rng_);
  double cum = 0.0;
  for (size_t i = 0; i < cand_.size(); ++i) {
    cum += probs[i];
    if (r < cum) return cand_[i].second;
  }
  return cand_.back().second;
}

}  // namespace trine
