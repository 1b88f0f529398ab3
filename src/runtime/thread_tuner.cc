#include "runtime/thread_tuner.h"

#include <algorithm>

namespace trine {

ThreadTuner::ThreadTuner(int n_threads, bool adapt) {
  sizes_.push_back(std::max(1, n_threads));
  if (adapt) {
    for (int s : {n_threads - 1, n_threads / 2, 1}) {
      if (s >= 1 && std::find(sizes_.begin(), sizes_.end(), s) == sizes_.end()) sizes_.push_back(s);
    }
  }
  Group g;
  g.rate.assign(sizes_.size(), 0.0);
  groups_.assign(6, g);
}

ThreadTuner::Group& ThreadTuner::GroupOf(int n_tokens) {
  const int i = n_tokens <= 1 ? 0 : n_tokens < 4 ? 1 : n_tokens < 8 ? 2 : n_tokens < 16 ? 3 : n_tokens < 64 ? 4 : 5;
  return groups_[static_cast<size_t>(i)];
}

int ThreadTuner::Pick(int n_tokens) {
  if (sizes_.size() == 1) return sizes_[0];
  Group& g = GroupOf(n_tokens);
  g.probing = -1;
  if (--g.until_probe <= 0) {
    if (g.next_probe == g.current) g.next_probe = (g.next_probe + 1) % static_cast<int>(sizes_.size());
    g.probing = g.next_probe;
    g.next_probe = (g.next_probe + 1) % static_cast<int>(sizes_.size());
    return sizes_[static_cast<size_t>(g.probing)];
  }
  return sizes_[static_cast<size_t>(g.current)];
}

void ThreadTuner::Report(int n_tokens, int team, double seconds) {
  if (sizes_.size() == 1 || seconds <= 0.0 || n_tokens <= 0) return;
  Group& g = GroupOf(n_tokens);
  const auto idx = std::find(sizes_.begin(), sizes_.end(), team) - sizes_.begin();
  if (idx >= static_cast<long>(sizes_.size())) return;
  const double rate = n_tokens / seconds;
  double& cur = g.rate[static_cast<size_t>(g.current)];
  if (g.probing >= 0 && idx == g.probing) {
    g.rate[static_cast<size_t>(idx)] = rate;
    if (cur > 0.0 && rate > cur * 1.05) {
      g.current = static_cast<int>(idx);
      g.interval = kMinInterval;
    } else {
      g.interval = std::min(kMaxInterval, g.interval * 2);
    }
    g.until_probe = g.interval;
    g.probing = -1;
    return;
  }
  if (idx != g.current) return;
  cur = cur > 0.0 ? 0.75 * cur + 0.25 * rate : rate;
  // The current size fell well below what another size was measured at: switch now.
  int best = g.current;
  double best_rate = cur * 1.10;
  for (size_t j = 0; j < sizes_.size(); ++j) {
    if (static_cast<int>(j) != g.current && g.rate[j] > best_rate) {
      best = static_cast<int>(j);
      best_rate = g.rate[j];
    }
  }
  if (best != g.current) {
    g.current = best;
    g.interval = kMinInterval;
    g.until_probe = g.interval;
  }
}

}  // namespace trine
