// Cache planning: from a model shape, a policy and a byte budget or token
// capacity, the exact per-lane layout of the KV arena and its byte cost.
#ifndef KVEDGE_KVCACHE_KV_CACHE_PLAN_H_
#define KVEDGE_KVCACHE_KV_CACHE_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "platform/status.h"
#include "simd/kv_format.h"

namespace kvedge {

enum class EvictionPolicy : uint8_t {
  kFull,    // keep everything up to capacity, then refuse ("context full")
  kWindow,  // the W most recent tokens
  kSinks,   // S first tokens pinned + the W most recent (StreamingLLM)
  kH2O,     // S sinks + H heavy hitters by accumulated attention + recent window
};
const char* EvictionPolicyName(EvictionPolicy p);
bool ParseEvictionPolicy(const std::string& name, EvictionPolicy* out);

// How tokens get RoPE positions.
enum class PositionMode : uint8_t {
  kInCache,   // by order inside the cache (StreamingLLM): distances ≤ capacity
  kAbsolute,  // by index in the original stream
};
const char* PositionModeName(PositionMode m);

// The attention-shape facts the cache needs from a model.
struct KvShape {
  int n_layers = 0;
  int n_heads = 0;      // query heads
  int n_kv_heads = 0;   // lanes per layer; n_heads % n_kv_heads == 0
  int head_dim = 0;
  int rope_dim = 0;     // ≤ head_dim, even
  double rope_theta = 10000.0;
};

// What the user asks for. Unset (−1 / 0) fields take policy defaults.
struct KvCacheOptions {
  EvictionPolicy policy = EvictionPolicy::kSinks;
  KvFormat key_format = KvFormat::kInt4;
  KvFormat value_format = KvFormat::kInt4;
  int sinks = -1;          // S; default 4 for sinks/h2o, 0 otherwise
  int heavy = -1;          // H (h2o); default: half of what sinks leave
  int window = -1;         // W recent tokens incl. the hot tail; default: the rest
  int capacity = 0;        // tokens per lane (S + H + W); 0: derive from budget
  uint64_t budget_bytes = 0;  // arena byte budget; used when capacity == 0
  PositionMode positions = PositionMode::kInCache;
  // H2O score update per attention step: score = decay·score + p. 1 keeps the
  // classic cumulative sum; < 1 forgets old attention (bounded lifetime).
  float h2o_decay = 1.0f;
};

// The resolved layout. Per lane (layer × kv head):
//   sinks   S rows  f32 K and V, token-major [S][D]
//   heavy   heavy_blocks key+value blocks (h2o)      format key/value_format
//   ring    ring_blocks  key+value blocks            format key/value_format
//   tail    one key+value block of G slots           format tail_format
//   h2o     f32 score per heavy/ring/tail slot, int64 stream index per heavy slot
struct KvCachePlan {
  KvShape shape;
  EvictionPolicy policy = EvictionPolicy::kSinks;
  PositionMode positions = PositionMode::kInCache;
  KvFormat key_format = KvFormat::kInt4;
  KvFormat value_format = KvFormat::kInt4;
  KvFormat tail_format = KvFormat::kF16;  // f32 when keys are f32, else f16
  float h2o_decay = 1.0f;
  int sinks = 0;
  int heavy = 0;         // heavy-hitter slots
  int window = 0;        // recent tokens kept (window/sinks: exact; h2o: ≤)
  int capacity = 0;      // sinks + heavy + window
  int heavy_blocks = 0;
  int ring_blocks = 0;
  // Bytes.
  size_t key_block_bytes = 0, value_block_bytes = 0;
  size_t tail_key_bytes = 0, tail_value_bytes = 0;
  size_t lane_bytes = 0;       // one lane, 64-byte aligned
  size_t arena_bytes = 0;      // all lanes + rope table + per-thread scratch
  size_t scratch_bytes_per_thread = 0;
  size_t rope_table_bytes = 0;
  int max_threads = 1;

  int lanes() const { return shape.n_layers * shape.n_kv_heads; }
  // Bytes an f16 cache holding `tokens` tokens of every lane needs.
  uint64_t F16FullBytes(uint64_t tokens) const;
  std::string Describe() const;  // one line: policy, formats, S/H/W, bytes
};

// Validates the shape and options and resolves the layout. A budget too small
// for the sinks plus one block plus the hot tail is refused with a message
// naming the minimum. `max_threads` sizes per-thread scratch.
StatusOr<KvCachePlan> PlanKvCache(const KvShape& shape, const KvCacheOptions& options, int max_threads);

}  // namespace kvedge

#endif  // KVEDGE_KVCACHE_KV_CACHE_PLAN_H_
