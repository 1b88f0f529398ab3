// WeightStreamer: pread of streamed layers into a ring of buffers, with a read-ahead thread.
#include "runtime/weight_streamer.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "repack.h"

namespace trine {
namespace {

constexpr size_t kAlign = 64;
size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

Status WeightStreamer::Create(const Model& model, int n_slots, std::unique_ptr<WeightStreamer>* out) {
  if (n_slots < 1) return InvalidArgument("the weight streamer needs at least 1 slot, got " + std::to_string(n_slots));
  std::unique_ptr<WeightStreamer> s(new WeightStreamer());
  s->model_ = &model;
  s->epoch_ = model.placement_epoch();
  const int n_layer = model.config().n_layer;
  s->index_.assign(static_cast<size_t>(n_layer), -1);
  size_t buf_bytes = 0, staging_bytes = 0;
  for (int l = 0; l < n_layer; ++l) {
    if (model.placement(l) != Placement::kStreamed) continue;
    s->index_[static_cast<size_t>(l)] = static_cast<int>(s->order_.size());
    s->order_.push_back(l);
    size_t layer_bytes = 0, layer_staging = 0;
    for (const StreamMatrix& sm : model.stream_matrices(l)) {
      if (sm.repack) {
        layer_staging += static_cast<size_t>(sm.n_bytes);
      } else {
        layer_bytes += AlignUp(static_cast<size_t>(sm.n_bytes));
      }
    }
    buf_bytes = std::max(buf_bytes, layer_bytes);
    staging_bytes = std::max(staging_bytes, layer_staging);
  }
  if (s->order_.empty()) {
    *out = std::move(s);
    return Status::Ok();
  }
  const GgufFile& f = model.file();
  for (int i = 0; i < f.n_splits(); ++i) {
    const std::string& path = f.split_file(i).path();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return IoError("cannot open " + path + " to stream weights: " + std::strerror(errno));
    s->fds_.push_back(fd);
  }
  const size_t m = s->order_.size();
  s->permanent_ = m <= static_cast<size_t>(n_slots);
  s->slots_.resize(s->permanent_ ? m : static_cast<size_t>(n_slots));
  for (Slot& slot : s->slots_) {
    slot.storage.assign(buf_bytes + kAlign, 0);
    const uintptr_t a = reinterpret_cast<uintptr_t>(slot.storage.data());
    slot.buf = slot.storage.data() + (AlignUp(a) - a);
    slot.repacked.resize(LayerWeights::kMatrices);
    slot.staging.resize(LayerWeights::kMatrices);
    slot.data.assign(LayerWeights::kMatrices, nullptr);
    s->ring_bytes_ += buf_bytes + staging_bytes;
  }
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  *out = std::move(s);
  return Status::Ok();
}

WeightStreamer::~WeightStreamer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (int fd : fds_) ::close(fd);
}

Status WeightStreamer::ReadAt(int split, uint64_t offset, uint64_t n, uint8_t* dst) {
  if (split < 0 || static_cast<size_t>(split) >= fds_.size()) {
    return Status(StatusCode::kInternal, "weight streamer: bad split index " + std::to_string(split));
  }
  uint64_t done = 0;
  while (done < n) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n - done, 1ull << 30));
    const ssize_t r = ::pread(fds_[static_cast<size_t>(split)], dst + done, chunk, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return IoError(model_->file().split_file(split).path() + ": pread of streamed weights at byte " +
                     std::to_string(offset + done) + " failed: " + std::strerror(errno));
    }
    if (r == 0) {
      return IoError(model_->file().split_file(split).path() + ": unexpected end of file at byte " +
                     std::to_string(offset + done) + " while streaming weights");
    }
    done += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

Status WeightStreamer::ReadMatrix(int layer, int i, Slot* slot) {
  const std::vector<StreamMatrix>& sms = model_->stream_matrices(layer);
  const StreamMatrix& sm = sms[static_cast<size_t>(i)];
  if (!sm.repack) {
    size_t off = 0;
    for (int j = 0; j < i; ++j) {
      if (!sms[static_cast<size_t>(j)].repack) off += AlignUp(static_cast<size_t>(sms[static_cast<size_t>(j)].n_bytes));
    }
    uint8_t* dst = slot->buf + off;
    TRINE_RETURN_IF_ERROR(ReadAt(sm.split, sm.file_offset, sm.n_bytes, dst));
    slot->data[static_cast<size_t>(i)] = dst;
    return Status::Ok();
  }
  std::vector<uint8_t>& staging = slot->staging[static_cast<size_t>(i)];
  staging.resize(static_cast<size_t>(sm.n_bytes));
  TRINE_RETURN_IF_ERROR(ReadAt(sm.split, sm.file_offset, sm.n_bytes, staging.data()));
  kernels::WeightView src = sm.file_view, dst;
  src.data = staging.data();
  TRINE_RETURN_IF_ERROR(kernels::RepackToTq2(src, &slot->repacked[static_cast<size_t>(i)], &dst));
  slot->data[static_cast<size_t>(i)] = dst.data;
  return Status::Ok();
}

void WeightStreamer::Open(uint64_t pos) {
  Slot& slot = SlotOf(pos);
  slot.pos = static_cast<int64_t>(pos);
  slot.layer = order_[static_cast<size_t>(pos % order_.size())];
  slot.next = slot.done = 0;
  slot.status = Status::Ok();
}

void WeightStreamer::ReadClaimed(Slot* slot, std::unique_lock<std::mutex>& lock) {
  while (slot->next < LayerWeights::kMatrices) {
    const int i = slot->next++;
    const int layer = slot->layer;
    ++inflight_;
    lock.unlock();
    const auto t0 = Clock::now();
    Status st = ReadMatrix(layer, i, slot);
    const double ms = MsSince(t0);
    lock.lock();
    --inflight_;
    stats_.read_ms += ms;
    if (st.ok()) {
      stats_.bytes_read += model_->stream_matrices(layer)[static_cast<size_t>(i)].n_bytes;
    } else if (slot->status.ok()) {
      slot->status = st;
    }
    if (++slot->done == LayerWeights::kMatrices && slot->status.ok()) ++stats_.layers_read;
    cv_.notify_all();
  }
}

void WeightStreamer::Loop() {
  // Lowest priority (Linux: per thread): on a machine whose cores all compute, the loader must not
  // preempt the compute threads (OpenMP teams stall at every barrier when one member is
  // descheduled); the forward pass then reads what the loader has not claimed itself. Idle cores
  // still run the loader, and reads blocked on the disk overlap the compute either way.
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
  const uint64_t m = order_.size(), k = slots_.size();
  std::unique_lock<std::mutex> lock(mu_);
  auto open_slot_with_work = [&]() -> Slot* {
    Slot* best = nullptr;
    for (Slot& s : slots_) {
      if (s.pos >= 0 && s.next < LayerWeights::kMatrices && (best == nullptr || s.pos < best->pos)) best = &s;
    }
    return best;
  };
  for (;;) {
    cv_.wait(lock, [&] {
      return stop_ || (permanent_ ? next_load_ < m : next_load_ < released_ + k) || open_slot_with_work() != nullptr;
    });
    if (stop_) return;
    if (permanent_ ? next_load_ < m : next_load_ < released_ + k) {
      if (!(permanent_ && SlotOf(next_load_).pos == static_cast<int64_t>(next_load_))) Open(next_load_);
      ++next_load_;
    }
    if (Slot* slot = open_slot_with_work()) ReadClaimed(slot, lock);
  }
}

Status WeightStreamer::Acquire(int layer, const LayerWeights** out) {
  if (!streams(layer)) {
    return Status(StatusCode::kInternal, "weight streamer: layer " + std::to_string(layer) + " is not streamed");
  }
  const uint64_t m = order_.size();
  const uint64_t idx = static_cast<uint64_t>(index_[static_cast<size_t>(layer)]);
  std::unique_lock<std::mutex> lock(mu_);
  const auto t0 = Clock::now();
  uint64_t pos;
  if (permanent_) {
    pos = idx;
  } else {
    if (order_[static_cast<size_t>(next_use_ % m)] != layer) {
      // Out of order (a failed or partial pass): restart the sequence at this layer.
      cv_.wait(lock, [&] { return inflight_ == 0; });
      uint64_t p = std::max(next_load_, next_use_);
      p += (idx + m - p % m) % m;
      next_use_ = released_ = next_load_ = p;
      for (Slot& s : slots_) s.pos = -1;
      cv_.notify_all();
    }
    pos = next_use_;
  }
  Slot& slot = SlotOf(pos);
  if (slot.pos != static_cast<int64_t>(pos)) {
    // Not opened yet (the loader is behind): open it here; the loader skips it.
    Open(pos);
    if (!permanent_ && next_load_ <= pos) next_load_ = pos + 1;
  }
  ReadClaimed(&slot, lock);  // whatever the loader has not claimed yet
  cv_.wait(lock, [&] { return slot.done == LayerWeights::kMatrices; });
  stats_.wait_ms += MsSince(t0);
  if (!slot.status.ok()) {
    Status st = slot.status;
    if (permanent_) {
      slot.pos = -1;  // read it again on the next visit
    } else {
      next_use_ = released_ = pos + 1;
    }
    cv_.notify_all();
    return st;
  }
  lock.unlock();
  slot.lw = model_->layers()[static_cast<size_t>(layer)];
  const auto views = slot.lw.Matrices();
  for (size_t i = 0; i < views.size(); ++i) views[i]->data = slot.data[i];
  *out = &slot.lw;
  return Status::Ok();
}

void WeightStreamer::Release(int layer) {
  (void)layer;
  if (permanent_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = next_use_ = next_use_ + 1;
  }
  cv_.notify_all();
}

WeightStreamer::Stats WeightStreamer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace trine
