// KvCache: creating the arena, and the public API over the parts —
// ring_storage (append, seal, window eviction), heavy_hitters (H2O),
// attention, eviction (the policies), key_codec (the stored-key
// alternatives) — plus stats, introspection, save and restore.
#include "kvcache/kv_cache.h"

#include <algorithm>
#include <string>

#include "kvcache/attention.h"
#include "kvcache/eviction.h"
#include "kvcache/lane.h"
#include "kvcache/ring_storage.h"

namespace kvedge {
namespace {
using kv::G;
}  // namespace

using LayerState = kv::LayerState;

KvCache::KvCache(const KvCachePlan& plan, AlignedBuffer arena)
    : plan_(plan), arena_(std::move(arena)), eviction_(&kv::EvictionFor(plan.policy)) {}
KvCache::~KvCache() = default;

StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCachePlan& plan, MemoryBudget* budget) {
  // Streamed every step: huge pages when big (fewer TLB misses; measured in
  // docs/performance.md, twenty-first session).
  StatusOr<AlignedBuffer> arena = AlignedBuffer::AllocateStreamed(budget, plan.arena_bytes, "KV arena");
  if (!arena.ok()) return arena.status();
  std::unique_ptr<KvCache> c(new KvCache(plan, std::move(arena).value()));
  c->lanes_ = c->arena_.data();
  float* rope_storage = reinterpret_cast<float*>(c->lanes_ + static_cast<size_t>(plan.lanes()) * plan.lane_bytes);
  c->rope_freqs_ = plan.shape.rope_freqs;
  if (c->rope_freqs_.empty()) {
    c->rope_freqs_.resize(static_cast<size_t>(plan.shape.rope_dim / 2));
    DefaultRopeFrequencies(plan.shape.rope_theta, plan.shape.rope_dim, c->rope_freqs_.data());
  }
  c->rope_ = RopeTable(c->rope_freqs_.data(), plan.shape.rope_dim, plan.capacity + G, rope_storage);
  c->scratch_ = c->lanes_ + static_cast<size_t>(plan.lanes()) * plan.lane_bytes + plan.rope_table_bytes;
  c->layers_.resize(static_cast<size_t>(plan.shape.n_layers));
  for (auto& st : c->layers_) st.ring_start.assign(static_cast<size_t>(std::max(plan.ring_blocks, 1)), 0);
  return c;
}

kv::CacheView KvCache::View() const { return kv::CacheView{&plan_, &rope_, lanes_}; }

Status KvCache::CheckRoom(int tokens) const {
  if (layers_.empty()) return OkStatus();
  return eviction_->CheckRoom(plan_, layers_[0].Held(), tokens);
}

void KvCache::Append(int layer, const float* k, const float* v) {
  // Append runs on the calling thread: thread 0's scratch.
  kv::AppendToken(View(), *eviction_, layers_[static_cast<size_t>(layer)], layer, k, v, scratch_);
}

void KvCache::Attend(int layer, const float* q, float* out, ThreadArena* threads) {
  const LayerState& st = layers_[static_cast<size_t>(layer)];
  const kv::CacheView view = View();
  const auto run = [&](size_t kv_head, int thread) {
    const int h = static_cast<int>(kv_head);
    const int group = plan_.shape.n_heads / plan_.shape.n_kv_heads;
    const size_t off = static_cast<size_t>(h) * group * plan_.shape.head_dim;
    kv::AttendLane(view, *eviction_, st, layer, h, q + off, out + off,
                   scratch_ + static_cast<size_t>(thread) * plan_.scratch_bytes_per_thread);
  };
  if (threads != nullptr && threads->num_threads() > 1) {
    KVEDGE_CHECK(threads->num_threads() <= plan_.max_threads);
    threads->ParallelForEach(static_cast<size_t>(plan_.shape.n_kv_heads), run);
  } else {
    for (int h = 0; h < plan_.shape.n_kv_heads; ++h) {
      if (h + 1 < plan_.shape.n_kv_heads) kv::PrefetchLane(view, st, layer, h + 1);
      run(static_cast<size_t>(h), 0);
    }
  }
}

void KvCache::PrefetchAttend(int layer) const {
  kv::PrefetchLane(View(), layers_[static_cast<size_t>(layer)], layer, 0);
}

KvCacheStats KvCache::Stats() const {
  KvCacheStats s;
  const LayerState& st = layers_.front();
  s.tokens_seen = static_cast<uint64_t>(st.seen);
  s.tokens_held = static_cast<uint64_t>(st.Held());
  s.tokens_evicted = static_cast<uint64_t>(st.evicted);
  s.arena_bytes = arena_.size();
  const int d = plan_.shape.head_dim;
  uint64_t lane = 2ull * st.sinks_filled * d * sizeof(float);
  lane += static_cast<uint64_t>((st.heavy_count + G - 1) / G + st.ring_count) *
          (plan_.key_block_bytes + plan_.value_block_bytes);
  if (st.tail_count > 0) lane += plan_.tail_key_bytes + plan_.tail_value_bytes;
  if (eviction_->KeepsScores()) {
    lane += static_cast<uint64_t>(st.Held() - st.sinks_filled) * sizeof(float) +
            static_cast<uint64_t>(st.heavy_count) * sizeof(int64_t);
  }
  s.held_bytes = lane * static_cast<uint64_t>(plan_.lanes());
  s.f16_full_bytes = plan_.F16FullBytes(s.tokens_seen);
  return s;
}

KvCache::LaneContents KvCache::Contents(int layer, int kv_head) const {
  const LayerState& st = layers_[static_cast<size_t>(layer)];
  const kv::LaneView lane = View().Lane(layer, kv_head);
  LaneContents c;
  const bool h2o = eviction_->KeepsScores();
  const float* scores = h2o ? lane.scores() : nullptr;
  const auto add = [&](int64_t token, const float* score) {
    c.tokens.push_back(token);
    if (h2o && score != nullptr) c.scores.push_back(*score);
  };
  for (int i = 0; i < st.sinks_filled; ++i) add(i, nullptr);
  if (h2o) {
    const int64_t* ids = lane.heavy_ids();
    for (int j = 0; j < st.heavy_count; ++j) add(ids[j], scores + j);
  }
  for (int k = 0; k < st.ring_count; ++k) {
    const int slot = (st.ring_head + k) % plan_.ring_blocks;
    const int storage = plan_.heavy_blocks + slot;
    for (int t = (k == 0 ? st.first_valid : 0); t < G; ++t) {
      add(st.ring_start[static_cast<size_t>(slot)] + t, h2o ? scores + static_cast<size_t>(storage) * G + t : nullptr);
    }
  }
  const size_t tail_scores = static_cast<size_t>(plan_.heavy_blocks + plan_.ring_blocks) * G;
  for (int t = 0; t < st.tail_count; ++t) add(st.tail_start + t, h2o ? scores + tail_scores + t : nullptr);
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    c.positions.push_back(plan_.positions == PositionMode::kAbsolute ? c.tokens[i] : static_cast<int64_t>(i));
  }
  return c;
}


KvCache::SinkRows KvCache::Sinks(int layer, int kv_head) const {
  const kv::LaneView lane = View().Lane(layer, kv_head);
  return SinkRows{lane.sink_keys(), lane.sink_values(), layers_[static_cast<size_t>(layer)].sinks_filled};
}

std::vector<KvCache::LayerCursor> KvCache::Cursors() const {
  return std::vector<LayerCursor>(layers_.begin(), layers_.end());  // the cursor part of each layer
}

void KvCache::ForEachLaneSpan(const LayerCursor& c, int layer, int kv_head,
                              FunctionRef<void(uint8_t*, size_t)> visit) const {
  uint8_t* lane = View().Lane(layer, kv_head).base;
  const size_t row = static_cast<size_t>(plan_.shape.head_dim) * sizeof(float);
  const int heavy_used = (c.heavy_count + G - 1) / G;
  const auto ring_storage = [&](int k) { return plan_.heavy_blocks + (c.ring_head + k) % plan_.ring_blocks; };
  if (c.sinks_filled > 0) {
    visit(lane + plan_.lane.sink_keys.offset, static_cast<size_t>(c.sinks_filled) * row);
    visit(lane + plan_.lane.sink_values.offset, static_cast<size_t>(c.sinks_filled) * row);
  }
  if (heavy_used > 0) {
    visit(lane + plan_.lane.block_keys.offset, static_cast<size_t>(heavy_used) * plan_.key_block_bytes);
    visit(lane + plan_.lane.block_values.offset, static_cast<size_t>(heavy_used) * plan_.value_block_bytes);
  }
  for (int k = 0; k < c.ring_count; ++k) {
    const size_t storage = static_cast<size_t>(ring_storage(k));
    visit(lane + plan_.lane.block_keys.offset + storage * plan_.key_block_bytes, plan_.key_block_bytes);
    visit(lane + plan_.lane.block_values.offset + storage * plan_.value_block_bytes, plan_.value_block_bytes);
  }
  // The whole tail, live slots or not: attention reads (and masks) every slot.
  visit(lane + plan_.lane.tail_keys.offset, plan_.tail_key_bytes);
  visit(lane + plan_.lane.tail_values.offset, plan_.tail_value_bytes);
  if (eviction_->KeepsScores()) {
    uint8_t* scores = lane + plan_.lane.scores.offset;
    const size_t block_scores = G * sizeof(float);
    if (heavy_used > 0) visit(scores, static_cast<size_t>(heavy_used) * block_scores);
    for (int k = 0; k < c.ring_count; ++k) visit(scores + static_cast<size_t>(ring_storage(k)) * block_scores, block_scores);
    visit(scores + static_cast<size_t>(plan_.heavy_blocks + plan_.ring_blocks) * block_scores, block_scores);
    if (c.heavy_count > 0) visit(lane + plan_.lane.heavy_ids.offset, static_cast<size_t>(c.heavy_count) * sizeof(int64_t));
  }
}

void KvCache::ForEachHeldSpan(FunctionRef<void(const uint8_t*, size_t)> visit) const {
  const std::vector<LayerCursor> cursors = Cursors();
  for (int l = 0; l < plan_.shape.n_layers; ++l) {
    for (int h = 0; h < plan_.shape.n_kv_heads; ++h) {
      ForEachLaneSpan(cursors[static_cast<size_t>(l)], l, h, [&](uint8_t* p, size_t n) { visit(p, n); });
    }
  }
}

uint64_t KvCache::HeldSpanBytes(const std::vector<LayerCursor>& cursors) const {
  uint64_t total = 0;
  for (int l = 0; l < plan_.shape.n_layers; ++l) {
    uint64_t lane = 0;
    ForEachLaneSpan(cursors[static_cast<size_t>(l)], l, 0, [&](uint8_t*, size_t n) { lane += n; });
    total += lane * static_cast<uint64_t>(plan_.shape.n_kv_heads);
  }
  return total;
}

Status KvCache::CheckCursors(const std::vector<LayerCursor>& cursors) const {
  if (cursors.size() != static_cast<size_t>(plan_.shape.n_layers)) {
    return DataLoss("KV state has " + std::to_string(cursors.size()) + " layers; the cache has " +
                    std::to_string(plan_.shape.n_layers));
  }
  const bool exact_window = eviction_->ExactWindow();
  for (size_t l = 0; l < cursors.size(); ++l) {
    const LayerCursor& c = cursors[l];
    const auto bad = [&](const std::string& what) {
      return DataLoss("KV state of layer " + std::to_string(l) + ": " + what);
    };
    const auto range = [&](const char* field, int64_t v, int64_t lo, int64_t hi) -> Status {
      if (v < lo || v > hi) {
        return bad(std::string(field) + " " + std::to_string(v) + " is outside " + std::to_string(lo) + ".." +
                   std::to_string(hi));
      }
      return OkStatus();
    };
    KVEDGE_RETURN_IF_ERROR(range("sinks_filled", c.sinks_filled, 0, plan_.sinks));
    KVEDGE_RETURN_IF_ERROR(range("heavy_count", c.heavy_count, 0, plan_.heavy));
    KVEDGE_RETURN_IF_ERROR(range("ring_head", c.ring_head, 0, std::max(plan_.ring_blocks - 1, 0)));
    KVEDGE_RETURN_IF_ERROR(range("ring_count", c.ring_count, 0, plan_.ring_blocks));
    KVEDGE_RETURN_IF_ERROR(range("first_valid", c.first_valid, 0, exact_window && c.ring_count > 0 ? G - 1 : 0));
    KVEDGE_RETURN_IF_ERROR(range("tail_count", c.tail_count, 0, G - 1));
    KVEDGE_RETURN_IF_ERROR(range("seen", c.seen, 0, int64_t{1} << 62));
    KVEDGE_RETURN_IF_ERROR(range("evicted", c.evicted, 0, c.seen));
    KVEDGE_RETURN_IF_ERROR(range("tail_start", c.tail_start, 0, c.seen));
    if (!eviction_->KeepsScores() && c.heavy_count > 0) return bad("heavy hitters without the h2o policy");
    const int64_t ring_tokens = static_cast<int64_t>(c.ring_count) * G - c.first_valid;
    const int64_t held = c.sinks_filled + c.heavy_count + ring_tokens + c.tail_count;
    if (c.sinks_filled < plan_.sinks && held != c.sinks_filled) return bad("tokens past unfilled sinks");
    if (held + c.evicted != c.seen) {
      return bad(std::to_string(held) + " held + " + std::to_string(c.evicted) + " evicted != " +
                 std::to_string(c.seen) + " seen");
    }
    if (held > plan_.capacity) return bad(std::to_string(held) + " tokens held exceed the capacity");
    if (exact_window && ring_tokens + c.tail_count > plan_.window) return bad("ring and tail exceed the window");
    if (c.tail_count > 0 && c.tail_start != c.seen - c.tail_count) return bad("tail_start does not match seen");
    if (c.seen - c.tail_count - static_cast<int64_t>(c.ring_count) * G < c.sinks_filled) {
      return bad("ring blocks start before the sinks end");
    }
  }
  return OkStatus();
}

Status KvCache::Restore(const std::vector<LayerCursor>& cursors, FunctionRef<Status(uint8_t*, size_t)> fill) {
  KVEDGE_RETURN_IF_ERROR(CheckCursors(cursors));
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerCursor& c = cursors[l];
    LayerState& st = layers_[l];
    static_cast<LayerCursor&>(st) = c;
    // Ring blocks hold consecutive stream indices ending where the tail starts.
    for (int k = 0; k < c.ring_count; ++k) {
      st.ring_start[static_cast<size_t>((c.ring_head + k) % plan_.ring_blocks)] =
          c.seen - c.tail_count - static_cast<int64_t>(c.ring_count - k) * G;
    }
  }
  Status status;
  for (int l = 0; l < plan_.shape.n_layers && status.ok(); ++l) {
    const LayerCursor& c = cursors[static_cast<size_t>(l)];
    for (int h = 0; h < plan_.shape.n_kv_heads && status.ok(); ++h) {
      ForEachLaneSpan(c, l, h, [&](uint8_t* p, size_t n) {
        if (status.ok()) status = fill(p, n);
      });
      if (!status.ok() || c.heavy_count == 0) continue;
      // Heavy hitters: distinct stream indices in increasing order, after the
      // sinks and before the oldest ring token.
      const int64_t* ids = View().Lane(l, h).heavy_ids();
      const int64_t ring_first = c.seen - c.tail_count - static_cast<int64_t>(c.ring_count) * G + c.first_valid;
      for (int j = 0; j < c.heavy_count && status.ok(); ++j) {
        const int64_t lo = j == 0 ? c.sinks_filled : ids[j - 1] + 1;
        if (ids[j] < lo || ids[j] >= ring_first) {
          status = DataLoss("KV state of layer " + std::to_string(l) + ", kv head " + std::to_string(h) +
                            ": heavy hitter " + std::to_string(j) + " has stream index " + std::to_string(ids[j]) +
                            " (expected " + std::to_string(lo) + " to " + std::to_string(ring_first - 1) + ")");
        }
      }
    }
  }
  if (!status.ok()) Reset();
  return status;
}

void KvCache::Reset() {
  for (LayerState& st : layers_) {
    static_cast<LayerCursor&>(st) = LayerCursor();
    std::fill(st.ring_start.begin(), st.ring_start.end(), 0);
  }
}

}  // namespace kvedge
