// KvCache: the KV arena of one stream. One lane per (layer, kv head), each a
// fixed region of one 64-byte-aligned reservation:
//
//   lane: [sinks S×D f32 K,V][heavy blocks K|V][ring blocks K|V][tail block K,V][h2o scores, heavy ids]
//
// Rotated channels are kept in adjacent-pair order, the pairs the kernels
// rotate: NEOX-style keys and queries (pairs (i, i + rope_dim/2)) are
// permuted on entry, the same permutation for both, so scores are unchanged
// and values (never permuted) come out in model order.
// New tokens enter the hot tail (f16, or f32 for f32 caches) at slot t with
// keys stored as R(t)·k (see simd/kv_kernels.h); a full tail is quantized into
// the ring, channel-wise for keys, token-wise for values. Policies evict from
// the oldest ring block (window/sinks: token by token; h2o: a block at a time,
// keeping the heaviest of the leaving block and the current heavy hitters,
// re-quantized into the heavy blocks). Nothing allocates after Create().
// KvCacheOptions selects measured alternatives (docs/quality.md): keys stored
// post-RoPE or pre-RoPE instead of R(t)·k, token-wise key scales, no hot tail
// (the partial block re-encoded per append), and H2O rankings.
//
// The parts, one file each: ring_storage (append, seal, window eviction),
// heavy_hitters (H2O scores and merge), attention (gather → score → mask →
// softmax → accumulate), eviction (each policy's hooks), key_codec (the one
// switch point of the stored-key alternatives); lane.h is what they share.
#ifndef KVEDGE_KVCACHE_KV_CACHE_H_
#define KVEDGE_KVCACHE_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kvcache/kv_cache_plan.h"
#include "kvcache/rope_table.h"
#include "platform/function_ref.h"
#include "platform/memory.h"
#include "platform/status.h"
#include "platform/thread_arena.h"

namespace kvedge {

// The cache's parts (kvcache/lane.h and the files it names).
namespace kv {
struct CacheView;
struct LayerState;
class Eviction;
}  // namespace kv

struct KvCacheStats {
  uint64_t tokens_seen = 0;       // tokens appended over the stream's life
  uint64_t tokens_held = 0;       // tokens in each lane now
  uint64_t tokens_evicted = 0;
  uint64_t arena_bytes = 0;       // reserved once, constant
  uint64_t held_bytes = 0;        // storage holding tokens now (all lanes)
  uint64_t f16_full_bytes = 0;    // an f16 cache of every token seen
};

// Not thread-safe: one stream, driven by one thread (it may use a ThreadArena
// inside Attend). Move-only through unique_ptr.
class KvCache {
 public:
  // Reserves the whole arena from `budget` (may be null: unaccounted).
  static StatusOr<std::unique_ptr<KvCache>> Create(const KvCachePlan& plan, MemoryBudget* budget);
  ~KvCache();

  const KvCachePlan& plan() const { return plan_; }

  // OK if `tokens` more tokens fit; kResourceExhausted ("context full") for
  // the `full` policy past capacity. Call before appending to any layer.
  Status CheckRoom(int tokens = 1) const;

  // Appends one token's keys and values to every lane of `layer`.
  // k, v: f32 [n_kv_heads][head_dim], pre-RoPE. Layers are appended in any
  // order but each layer exactly once per token; precondition CheckRoom().
  void Append(int layer, const float* k, const float* v);

  // Attention of the newest token of `layer` (appended just before) over
  // everything that layer holds. q: f32 [n_heads][head_dim] pre-RoPE;
  // out: f32 [n_heads][head_dim]. Lanes run in parallel on `threads` (may be
  // null). H2O scores are updated from the attention weights.
  void Attend(int layer, const float* q, float* out, ThreadArena* threads);
  // Starts loading into L2 what Attend(layer) reads first (its first lane's
  // first blocks): a batch calls it on the next sequence's cache before
  // attending the current one, so that lane does not start on DRAM latency.
  // Attend does the same from lane to lane itself. A hint: no effect on results.
  void PrefetchAttend(int layer) const;

  KvCacheStats Stats() const;

  // Introspection for tests and reports: the stream indices the lane holds, in
  // cache order, and the RoPE position each gets for the next query.
  struct LaneContents {
    std::vector<int64_t> tokens;
    std::vector<int64_t> positions;
    std::vector<float> scores;  // h2o accumulated score per token (else empty)
  };
  LaneContents Contents(int layer, int kv_head) const;

  // The pinned sink rows of a lane, as stored: f32 [count][head_dim] keys
  // (rotated R(slot)) and values. They never change once written.
  struct SinkRows {
    const float* keys = nullptr;
    const float* values = nullptr;
    int count = 0;
  };
  SinkRows Sinks(int layer, int kv_head) const;

  // Saving and restoring a cache exactly (runtime/chat/session_file.h): the
  // bookkeeping of each layer plus the bytes of every storage region that
  // holds tokens, copied as they are (no re-quantization). Ring storage slots
  // are kept where they are (ring_head travels with the cursor), so a
  // restored cache reads the very bytes the saved one would have read.
  struct LayerCursor {
    int64_t seen = 0;        // tokens appended
    int64_t evicted = 0;
    int64_t tail_start = 0;  // stream index of tail slot 0
    int32_t sinks_filled = 0;
    int32_t heavy_count = 0;
    int32_t ring_head = 0;   // storage slot of the oldest ring block
    int32_t ring_count = 0;
    int32_t first_valid = 0;
    int32_t tail_count = 0;
  };
  std::vector<LayerCursor> Cursors() const;  // [n_layers]
  // Calls visit(bytes, size) for each region holding tokens, in this order for
  // lane (layer, kv head) after lane: sink keys and values (f32 rows), the
  // heavy key then value blocks in use, each ring block in ring order (key,
  // value), the whole tail (key, value), then for h2o the scores of those
  // heavy/ring/tail slots and the heavy-hitter stream ids. Cost ∝ bytes held.
  void ForEachHeldSpan(FunctionRef<void(const uint8_t*, size_t)> visit) const;
  // The bytes ForEachHeldSpan visits for a cache at `cursors` (validated).
  uint64_t HeldSpanBytes(const std::vector<LayerCursor>& cursors) const;
  // OK if `cursors` describe a state this plan can reach: counts in range,
  // consistent with each other and with the policy. DataLoss naming the layer
  // and field otherwise. Allocation-free; does not change the cache.
  Status CheckCursors(const std::vector<LayerCursor>& cursors) const;
  // Sets the cache to `cursors` and fills the regions they imply, in
  // ForEachHeldSpan order, by calling fill(destination, size). Checks the
  // cursors first (nothing changes if they are refused); if `fill` fails or
  // the restored heavy-hitter ids are inconsistent the cache is left empty.
  Status Restore(const std::vector<LayerCursor>& cursors, FunctionRef<Status(uint8_t*, size_t)> fill);
  // Forgets every token (an empty cache, as after Create). Allocation-free.
  void Reset();

 private:
  KvCache(const KvCachePlan& plan, AlignedBuffer arena);

  kv::CacheView View() const;
  // The held regions of one lane (see ForEachHeldSpan), for save and restore.
  void ForEachLaneSpan(const LayerCursor& c, int layer, int kv_head, FunctionRef<void(uint8_t*, size_t)> visit) const;

  KvCachePlan plan_;
  AlignedBuffer arena_;
  std::vector<double> rope_freqs_;  // [rope_dim/2] θ_i, read by rope_
  RopeTable rope_;
  const kv::Eviction* eviction_;        // the policy's hooks (static, not owned)
  std::vector<kv::LayerState> layers_;  // sized once in Create
  // Inside arena_: the lanes (layout: plan_.lane), the RoPE table, per-thread scratch (plan_.scratch).
  uint8_t* lanes_ = nullptr;
  uint8_t* scratch_ = nullptr;  // [max_threads][scratch_bytes_per_thread]
};

}  // namespace kvedge

#endif  // KVEDGE_KVCACHE_KV_CACHE_H_
