// WeightStreamer: the weights of a model's streamed layers (Placement::kStreamed), read with pread
// into a ring of layer-sized buffers by a read-ahead thread while the current layer computes. The
// ring is the only memory streamed layers use; their file pages are never mapped.
//
// The forward pass visits the streamed layers in ascending order, again for every batch, so the
// loader reads them in that cyclic order: position j of the sequence (layer S[j % m] of the m
// streamed layers) goes to slot j % n_slots once position j - n_slots has been released. With
// n_slots >= 2 the next streamed layer is read while the current one computes. When every streamed
// layer fits in the ring (m <= n_slots) each is read once and kept. A visit out of order (a failed
// or partial pass) resynchronises the sequence at that layer. Reads go matrix by matrix, claimed by
// whichever thread gets there first: when the forward pass reaches a layer whose reads the loader
// has not started (a busy machine, where the loader competes with the compute threads for cores),
// the forward pass reads the rest itself instead of waiting for the loader to be scheduled.
//
// Layers stored in TQ1_0 / I2_S are repacked to TQ2_0 after each read (as Model::Load does for
// mapped layers), on the loader thread; that costs a staging buffer per slot and is much slower
// than streaming a TQ2_0 file, where the bytes are used as read.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/status.h"
#include "model/model.h"

namespace trine {

class WeightStreamer {
 public:
  // Streams `model`'s kStreamed layers through `n_slots` (>= 1) buffers. The model must outlive
  // the streamer. Opens the file(s) and starts the read-ahead thread (none without streamed layers).
  static Status Create(const Model& model, int n_slots, std::unique_ptr<WeightStreamer>* out);
  ~WeightStreamer();
  WeightStreamer(const WeightStreamer&) = delete;
  WeightStreamer& operator=(const WeightStreamer&) = delete;

  bool streams(int layer) const {
    return layer >= 0 && static_cast<size_t>(layer) < index_.size() && index_[static_cast<size_t>(layer)] >= 0;
  }
  // Waits for `layer`'s weights and returns them (valid until Release(layer)); the views are the
  // model's (kernels, activation precision) with data in the ring. Errors: read failures.
  Status Acquire(int layer, const LayerWeights** out);
  // Done with the layer acquired last: its slot may be refilled.
  void Release(int layer);

  uint64_t epoch() const { return epoch_; }  // the model's placement_epoch at creation
  uint64_t ring_bytes() const { return ring_bytes_; }
  int n_slots() const { return static_cast<int>(slots_.size()); }
  struct Stats {
    uint64_t layers_read = 0, bytes_read = 0;
    double read_ms = 0;  // on the loader thread
    double wait_ms = 0;  // the forward pass waiting for a read
  };
  Stats stats() const;

 private:
  struct Slot {
    std::vector<uint8_t> storage;       // the layer's matrices (buf: 64-byte aligned inside)
    uint8_t* buf = nullptr;
    std::vector<std::vector<uint8_t>> staging;   // raw bytes of matrices to repack
    std::vector<PageBuffer> repacked;            // their TQ2_0 copies
    std::vector<const uint8_t*> data;   // per matrix: where its bytes are
    LayerWeights lw;                    // built on Acquire
    // The sequence position the slot holds (-1: none), its layer, and the read progress: matrices
    // < next are claimed by a reader (the loader thread or the consumer), `done` are finished.
    int64_t pos = -1;
    int layer = -1;
    int next = 0, done = 0;
    Status status;
  };

  WeightStreamer() = default;
  void Loop();
  // Under mu_: points the slot of `pos` at it (reads not started).
  void Open(uint64_t pos);
  Slot& SlotOf(uint64_t pos) { return slots_[static_cast<size_t>(pos % slots_.size())]; }
  // Under `lock`: claims and reads the slot's unclaimed matrices one at a time.
  void ReadClaimed(Slot* slot, std::unique_lock<std::mutex>& lock);
  Status ReadMatrix(int layer, int i, Slot* slot);
  Status ReadAt(int split, uint64_t offset, uint64_t n, uint8_t* dst);

  const Model* model_ = nullptr;
  uint64_t epoch_ = 0;
  std::vector<int> order_;  // streamed layers, ascending
  std::vector<int> index_;  // layer -> position in order_, or -1
  std::vector<int> fds_;
  std::vector<Slot> slots_;
  uint64_t ring_bytes_ = 0;
  bool permanent_ = false;  // m <= n_slots: every streamed layer has its own slot, read once

  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_load_ = 0;  // the next sequence position to open
  uint64_t released_ = 0;   // positions < released_ are released by the consumer
  uint64_t next_use_ = 0;   // position the consumer acquires next
  int inflight_ = 0;        // matrix reads in progress
  bool stop_ = false;
  Stats stats_;
  std::thread thread_;
};

}  // namespace trine
