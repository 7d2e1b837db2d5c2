// Cache planning: from a model shape, a policy and a byte budget or token
// capacity, the exact per-lane layout of the KV arena and its byte cost.
#ifndef KVEDGE_KVCACHE_KV_CACHE_PLAN_H_
#define KVEDGE_KVCACHE_KV_CACHE_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

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
bool ParsePositionMode(const std::string& name, PositionMode* out);

// Which axis a quantized key block shares its scale/min along.
enum class KeyQuantAxis : uint8_t {
  kChannel,  // per channel over the block's G tokens (KIVI/KVQuant; default)
  kToken,    // ablation: per token in groups of 32 elements, the value layout
};
const char* KeyQuantAxisName(KeyQuantAxis a);
bool ParseKeyQuantAxis(const std::string& name, KeyQuantAxis* out);

// The rotation a stored (heavy, ring or tail) key carries. Sinks always carry
// R(slot) in f32. See simd/kv_kernels.h for why in-block is the default.
enum class KeyRope : uint8_t {
  kInBlock,  // R(t), t the slot inside its block (fast kernel)
  kPost,     // R(stream index): classic post-RoPE keys (not with h2o)
  kPre,      // unrotated (KVQuant pre-RoPE); rotated per token while scoring
};
const char* KeyRopeName(KeyRope r);
bool ParseKeyRope(const std::string& name, KeyRope* out);

// How H2O ranks candidates for the heavy-hitter slots.
enum class H2OScore : uint8_t {
  kCumulative,  // score = decay·score + p (decay 1: the H2O paper's sum)
  kTova,        // score = p of the latest query only (TOVA)
  kAge,         // score = Σp / queries seen: mean attention, age-normalised
};
const char* H2OScoreName(H2OScore s);
bool ParseH2OScore(const std::string& name, H2OScore* out);

// Most sink (pinned, f32) tokens a lane may hold: attention sinks and a
// chat's system prompt.
inline constexpr int kMaxSinks = 8192;

// Which channels RoPE rotates together (llama.cpp's rope modes).
enum class RopeStyle : uint8_t {
  kNorm,  // adjacent pairs (2i, 2i+1): llama, mistral
  kNeox,  // halves (i, i + rope_dim/2): qwen2, phi3, gemma
};
const char* RopeStyleName(RopeStyle s);

// The attention-shape facts the cache needs from a model.
struct KvShape {
  int n_layers = 0;
  int n_heads = 0;      // query heads
  int n_kv_heads = 0;   // lanes per layer; n_heads % n_kv_heads == 0
  int head_dim = 0;
  int rope_dim = 0;     // ≤ head_dim, even
  double rope_theta = 10000.0;
  RopeStyle rope_style = RopeStyle::kNorm;
  // Radians per position of each rotated pair i (θ_i·p is its angle at
  // position p): [rope_dim/2]. Empty: rope_theta^(−2i/rope_dim). Frequency
  // factors, linear and YaRN scaling are all per-pair frequencies.
  std::vector<double> rope_freqs;
  // Multiplies the rotated channels of q and k (llama.cpp's attn_factor and
  // YaRN mscale: cos and sin are scaled). Unrotated channels are not.
  float rope_mscale = 1.0f;
  float attn_scale = 0.0f;     // score = attn_scale·q·k; 0: 1/sqrt(head_dim)
  float attn_softcap = 0.0f;   // > 0: score → cap·tanh(score/cap) before the mask (gemma2)
  // Sliding-window attention: in windowed layers a key of stream index k is
  // visible to the query of stream index q iff q − k < sliding_window (0: no
  // window). Layer l is windowed iff swa_period ≤ 1 or l % swa_period <
  // swa_period − 1 (llama.cpp's pattern: gemma2 has period 2, even layers).
  int sliding_window = 0;
  int swa_period = 1;
  bool Windowed(int layer) const {
    return sliding_window > 0 && (swa_period <= 1 || layer % swa_period < swa_period - 1);
  }
};

// How the cache stores, ranks and evicts tokens: asked for in KvCacheOptions
// and carried unchanged into the KvCachePlan resolved from them (both derive
// from this, so each setting is declared once).
struct KvCacheSettings {
  EvictionPolicy policy = EvictionPolicy::kSinks;
  KvFormat key_format = KvFormat::kInt4;
  KvFormat value_format = KvFormat::kInt4;
  PositionMode positions = PositionMode::kInCache;
  // H2O score update per attention step: score = decay·score + p. 1 keeps the
  // classic cumulative sum; < 1 forgets old attention. kCumulative only.
  float h2o_decay = 1.0f;
  H2OScore h2o_score = H2OScore::kCumulative;
  // Heavy hitters older than this many tokens rank below every younger
  // candidate, so they leave first; 0: unbounded.
  int h2o_lifetime = 0;
  // Ablations and alternatives (docs/quality.md measures them). Paths other
  // than the defaults decode key blocks to f32 scratch before scoring: slow,
  // correct, not optimised.
  KeyQuantAxis key_axis = KeyQuantAxis::kChannel;
  KeyRope key_rope = KeyRope::kInBlock;
  // false: no full-precision hot tail; the partial block is held in the
  // key/value formats and re-encoded (from its own decoded codes) per append.
  bool hot_tail = true;
};

// What the user asks for: the settings and the sizes. Unset (−1 / 0) sizes
// take policy defaults.
struct KvCacheOptions : KvCacheSettings {
  int sinks = -1;          // S; default 4 for sinks/h2o, 0 otherwise
  int heavy = -1;          // H (h2o); default: half of what sinks leave
  int window = -1;         // W recent tokens incl. the hot tail; default: the rest
  int capacity = 0;        // tokens per lane (S + H + W); 0: derive from budget
  uint64_t budget_bytes = 0;  // arena byte budget; used when capacity == 0
};

// A byte range inside a lane or inside one thread's scratch.
struct Region {
  size_t offset = 0;
  size_t bytes = 0;
  size_t end() const { return offset + bytes; }
};

// Where each part of a lane lives, in bytes from the lane's start. Regions are
// disjoint and inside `bytes`; h2o's are empty for other policies.
struct LaneLayout {
  Region sink_keys;     // [S][D] f32, rotated by their slot
  Region sink_values;   // [S][D] f32
  Region block_keys;    // [heavy_blocks + ring_blocks] key blocks (heavy first)
  Region block_values;  // [heavy_blocks + ring_blocks] value blocks
  Region tail_keys;     // one key block of tail_key_format()
  Region tail_values;   // one value block of tail_value_format()
  Region scores;        // h2o: [heavy_blocks + ring_blocks + 1][G] f32 accumulated attention
  Region heavy_ids;     // h2o: [heavy_blocks][G] int64 stream index of each heavy slot
  size_t bytes = 0;     // the lane, 64-byte aligned
};

// One thread's scratch, in bytes from its start: named regions for each
// operation, disjoint (an operation may call another) and 64-byte aligned.
struct ScratchLayout {
  Region scores;        // attend: [group + 1][slots] f32 scores per query head, then head-summed probabilities
  Region block_angles;  // attend: [blocks][rope_dim] f32 query rotation per block
  Region block_ptrs;    // attend: [2][blocks] key then value block pointers
  Region query;         // attend: rotated query [D] + sink angles [D]; append: rotated key [D] + angles [D]
  Region reordered;     // NEOX models: attend [group][D] queries, append [D] key, in the cache's channel order
  Region stage_keys;    // [G][D] f32: append (re-encoding a quantized tail), seal, h2o merge
  Region stage_values;  // [G][D] f32
  Region stage_tmp;     // [G][D] f32 transpose buffer
  Region slow_keys;     // attend on the slow key path: [blocks + 1][G][D] f32, else empty
  Region candidates;    // h2o merge: [2][merge][D] f32 keys then values (merge = heavy + one block)
  Region cand_scores;   // h2o merge: [merge] f32 ranking key
  Region cand_ids;      // h2o merge: [merge] int64 stream index
  Region cand_index;    // h2o merge: [merge] int64 rotation index the stored key carries
  Region cand_order;    // h2o merge: [merge] int32
  size_t bytes = 0;
};

// The resolved layout. Per lane (layer × kv head):
//   sinks   S rows  f32 K and V, token-major [S][D]
//   heavy   heavy_blocks key+value blocks (h2o)      format key/value_format
//   ring    ring_blocks  key+value blocks            format key/value_format
//   tail    one key+value block of G slots           format tail_format (hot
//           tail) or key/value_format (no hot tail)
//   h2o     f32 score per heavy/ring/tail slot, int64 stream index per heavy slot
struct KvCachePlan : KvCacheSettings {
  KvShape shape;
  KvFormat tail_format = KvFormat::kF16;  // hot tail: f32 when keys are f32, else f16
  int sinks = 0;
  int heavy = 0;         // heavy-hitter slots
  int window = 0;        // recent tokens kept (window/sinks: exact; h2o: ≤)
  int capacity = 0;      // sinks + heavy + window
  int heavy_blocks = 0;
  int ring_blocks = 0;
  // Bytes.
  size_t key_block_bytes = 0, value_block_bytes = 0;
  size_t tail_key_bytes = 0, tail_value_bytes = 0;
  LaneLayout lane;             // every lane's layout; the cache only reads it
  ScratchLayout scratch;       // every thread's scratch layout
  size_t lane_bytes = 0;       // lane.bytes
  size_t arena_bytes = 0;      // all lanes + rope table + per-thread scratch
  size_t scratch_bytes_per_thread = 0;  // scratch.bytes
  size_t rope_table_bytes = 0;
  int max_threads = 1;

  int lanes() const { return shape.n_layers * shape.n_kv_heads; }
  KvFormat tail_key_format() const { return hot_tail ? tail_format : key_format; }
  KvFormat tail_value_format() const { return hot_tail ? tail_format : value_format; }
  // Key blocks stored token-major (the token-wise ablation of a quantized format).
  bool TokenMajorKeys(KvFormat f) const { return key_axis == KeyQuantAxis::kToken && IsQuantized(f); }
  // Scoring decodes key blocks to f32 scratch first (ablation paths).
  bool SlowKeyPath() const { return key_rope == KeyRope::kPre || TokenMajorKeys(key_format); }
  // Bytes an f16 cache holding `tokens` tokens of every lane needs.
  uint64_t F16FullBytes(uint64_t tokens) const;
  std::string Describe() const;  // one line: policy, formats, S/H/W, bytes
  // Sets shape.rope_freqs, checked as PlanKvCache checks a shape's. For
  // frequencies that depend on the capacity resolved here (phi3's long/short
  // factors); the layout does not depend on them.
  Status SetRopeFrequencies(std::vector<double> freqs);
};

// Validates the shape and options and resolves the layout. A budget too small
// for the sinks plus one block plus the hot tail is refused with a message
// naming the minimum. `max_threads` sizes per-thread scratch.
StatusOr<KvCachePlan> PlanKvCache(const KvShape& shape, const KvCacheOptions& options, int max_threads);

}  // namespace kvedge

#endif  // KVEDGE_KVCACHE_KV_CACHE_PLAN_H_
