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
  // Probes run on a schedule only while the team is reduced; at the full team a pass that lost
  // time to a descheduled thread asks for one (Report sets until_probe to 0).
  if (g.current != 0 || g.until_probe <= 0) --g.until_probe;
  if (g.until_probe <= 0) {
    if (g.next_probe == g.current) g.next_probe = (g.next_probe + 1) % static_cast<int>(sizes_.size());
    g.probing = g.next_probe;
    g.next_probe = (g.next_probe + 1) % static_cast<int>(sizes_.size());
    return sizes_[static_cast<size_t>(g.probing)];
  }
  return sizes_[static_cast<size_t>(g.current)];
}

void ThreadTuner::Report(int n_tokens, int team, double seconds, double slept_seconds) {
  if (sizes_.size() == 1 || seconds <= 0.0 || n_tokens <= 0) return;
  Group& g = GroupOf(n_tokens);
  const auto idx = std::find(sizes_.begin(), sizes_.end(), team) - sizes_.begin();
  if (idx >= static_cast<long>(sizes_.size())) return;
  const double rate = n_tokens / seconds;
  if (!g.warm) {
    // Cold: no average from it, but a reference for a probe it asks for by sleeping.
    g.warm = true;
    g.probing = -1;
    g.last = rate;
    if (team > 1 && slept_seconds > 0.25 * seconds) g.until_probe = 0;
    return;
  }
  double& cur = g.rate[static_cast<size_t>(g.current)];
  if (g.probing >= 0 && idx == g.probing) {
    g.rate[static_cast<size_t>(idx)] = rate;
    // Against the current size's average, or its last pass when that was slower (the pass that
    // asked for this probe: the average lags behind a neighbour that just arrived).
    const double ref = g.last > 0.0 ? std::min(cur, g.last) : cur;
    if (ref > 0.0 && rate > ref * 1.05) {
      g.current = static_cast<int>(idx);
      g.last = rate;
      // A reduced team was won under contention, which tends to last: check the full team again
      // after kSwitchInterval passes, then less and less often.
      g.interval = idx == 0 ? kMinInterval : kSwitchInterval;
    } else {
      g.interval = std::min(kMaxInterval, g.interval * 2);
    }
    g.until_probe = g.interval;
    g.probing = -1;
    return;
  }
  if (idx != g.current) return;
  cur = cur > 0.0 ? 0.75 * cur + 0.25 * rate : rate;
  g.last = rate;
  // The full team lost a quarter of one thread's time to a partner off the CPU: probe a smaller
  // team next, unless a probe lost within the interval (the backoff counts passes here too).
  if (g.current == 0 && team > 1 && slept_seconds > 0.25 * seconds) {
    if (g.cooldown > 0) {
      --g.cooldown;
    } else {
      g.until_probe = 0;
      g.cooldown = g.interval;
    }
  }
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
    g.last = 0.0;
    g.interval = kMinInterval;
    g.until_probe = g.interval;
  }
}

}  // namespace trine
