// ThreadTuner: the team size of each forward pass, chosen from measured throughput.
//
// Why: a team waits for any thread that holds unfinished work. When other processes take cores
// (a busy neighbour, a second context, a browser), a thread of the team is descheduled for whole
// scheduler slices, and the team ends up waiting for it at every step: on a 2-core machine with
// one busy process, 2 threads decoded at 0.15-0.25x the speed of 1 thread. The work split
// (core/team.h) lets the running threads take a descheduled thread's items, but a team still
// cannot finish a step while one of its threads is off the CPU with an item in hand. Running
// fewer threads than configured is then faster, and the tuner finds that out by measuring.
//
// How: passes are grouped by token count (1, 2-3, 4-7, 8-15, 16-63, 64+): a batch of 8 decodes
// per token faster than a single decode, so their rates are not compared. Within a group the
// current size's rate (tokens/s) is a moving average. A pass at the full team whose threads slept
// for more than a quarter of the time one thread had (Team::Wait sleeps only when a partner with
// an item in hand has not finished it for 20 us: it is off the CPU) makes the next pass a probe at
// a smaller size; on an idle machine nothing sleeps that long, so nothing is probed and the team
// stays whole. A probe faster by 5 % takes over. While the team is reduced, a probe at another
// size (the full one first) runs every `interval` passes (32 after a switch to a smaller team),
// doubled by each losing probe (up to 128 passes), so a neighbour that stays costs at most one slow pass in 128 and one that leaves is
// noticed within that. A current size that falls below another size's last measured rate by 10 %
// gives way at once. The first pass of a group is not measured (cold caches, first page touches).
#pragma once

#include <vector>

namespace trine {

class ThreadTuner {
 public:
  // n_threads: the configured team size; adapt false keeps it always.
  ThreadTuner(int n_threads, bool adapt);

  // The team size for the next pass of n_tokens tokens.
  int Pick(int n_tokens);
  // The wall time of the pass just run with Pick's size, and how long its threads slept waiting
  // for a descheduled partner (TeamSleepNanos over the pass).
  void Report(int n_tokens, int team, double seconds, double slept_seconds = 0.0);

  // The sizes it chooses among (the configured one first).
  const std::vector<int>& candidates() const { return sizes_; }

  static constexpr int kMinInterval = 8;
  static constexpr int kMaxInterval = 128;
  static constexpr int kSwitchInterval = 32;

 private:
  struct Group {
    std::vector<double> rate;  // tokens/s per candidate; 0: not measured
    int current = 0;           // candidate index
    int until_probe = kMinInterval;
    int interval = kMinInterval;
    int next_probe = 1;        // candidate the next probe tries
    int probing = -1;          // candidate of the pass in flight when it is a probe
    double last = 0.0;         // rate of the current size's last pass
    int cooldown = 0;          // full team: slow passes to let go by before probing again
    bool warm = false;         // the group's first pass (cold caches, first touches) is not counted
  };
  Group& GroupOf(int n_tokens);

  std::vector<int> sizes_;
  std::vector<Group> groups_;
};

}  // namespace trine
