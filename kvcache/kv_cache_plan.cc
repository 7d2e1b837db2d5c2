// Resolving policy defaults, per-lane layout and bytes; capacity from a budget.
#include "kvcache/kv_cache_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "platform/enum_names.h"
#include "platform/memory.h"

namespace kvedge {
namespace {

constexpr int G = kKvBlockTokens;
constexpr int kRopeFine = 64;  // distances below this come from the fine table

int CeilDiv(int a, int b) { return (a + b - 1) / b; }

// Lays regions out one after another, each starting 64-byte aligned.
class RegionCursor {
 public:
  Region Take(size_t bytes) {
    const Region r{end_, bytes};
    end_ = RoundUp(end_ + bytes, kAlignment);
    return r;
  }
  // A region packed right after the previous one (sink values after sink keys).
  Region TakePacked(const Region& prev, size_t bytes) {
    const Region r{prev.end(), bytes};
    end_ = RoundUp(r.end(), kAlignment);
    return r;
  }
  size_t end() const { return end_; }

 private:
  size_t end_ = 0;
};

LaneLayout LayOutLane(const KvCachePlan& p) {
  const size_t d = static_cast<size_t>(p.shape.head_dim);
  const size_t blocks = static_cast<size_t>(p.heavy_blocks + p.ring_blocks);
  RegionCursor c;
  LaneLayout l;
  l.sink_keys = c.Take(static_cast<size_t>(p.sinks) * d * sizeof(float));
  l.sink_values = c.TakePacked(l.sink_keys, static_cast<size_t>(p.sinks) * d * sizeof(float));
  l.block_keys = c.Take(blocks * p.key_block_bytes);
  l.block_values = c.Take(blocks * p.value_block_bytes);
  l.tail_keys = c.Take(p.tail_key_bytes);
  l.tail_values = c.Take(p.tail_value_bytes);
  if (p.policy == EvictionPolicy::kH2O) {
    l.scores = c.Take((blocks + 1) * G * sizeof(float));
    l.heavy_ids = c.Take(static_cast<size_t>(p.heavy_blocks) * G * sizeof(int64_t));
  }
  l.bytes = c.end();
  return l;
}

// Per-thread scratch of Append/Seal/Merge/Attend (see KvCache), every
// operation's buffers at once.
ScratchLayout LayOutScratch(const KvCachePlan& p) {
  const size_t d = static_cast<size_t>(p.shape.head_dim);
  const size_t blocks = static_cast<size_t>(p.heavy_blocks + p.ring_blocks + 1);
  const size_t slots = static_cast<size_t>(p.sinks) + blocks * G;
  const size_t merge = static_cast<size_t>(p.heavy_blocks * G + G);  // heavy + leaving block
  const size_t group = static_cast<size_t>(p.shape.n_heads / p.shape.n_kv_heads);
  RegionCursor c;
  ScratchLayout s;
  s.scores = c.Take((group + 1) * slots * sizeof(float));
  s.block_angles = c.Take(blocks * static_cast<size_t>(p.shape.rope_dim) * sizeof(float));
  s.block_ptrs = c.Take(2 * blocks * sizeof(void*));
  s.query = c.Take(2 * d * sizeof(float));
  s.reordered = c.Take((group + 1) * d * sizeof(float));
  s.stage_keys = c.Take(G * d * sizeof(float));
  s.stage_values = c.Take(G * d * sizeof(float));
  s.stage_tmp = c.Take(G * d * sizeof(float));
  if (p.SlowKeyPath()) s.slow_keys = c.Take((blocks + 1) * G * d * sizeof(float));
  if (p.policy == EvictionPolicy::kH2O) {
    s.candidates = c.Take(2 * merge * d * sizeof(float));
    s.cand_scores = c.Take(merge * sizeof(float));
    s.cand_ids = c.Take(merge * sizeof(int64_t));
    s.cand_index = c.Take(merge * sizeof(int64_t));
    s.cand_order = c.Take(merge * sizeof(int32_t));
  }
  s.bytes = c.end();
  return s;
}

void ComputeBytes(KvCachePlan& p) {
  const int d = p.shape.head_dim;
  const auto key_bytes = [&](KvFormat f) { return p.TokenMajorKeys(f) ? ValueBlockBytes(f, d) : KeyBlockBytes(f, d); };
  p.key_block_bytes = key_bytes(p.key_format);
  p.value_block_bytes = ValueBlockBytes(p.value_format, d);
  p.tail_key_bytes = key_bytes(p.tail_key_format());
  p.tail_value_bytes = ValueBlockBytes(p.tail_value_format(), d);
  p.lane = LayOutLane(p);
  p.lane_bytes = p.lane.bytes;
  const int max_distance = p.capacity + G;
  p.rope_table_bytes = RoundUp(
      static_cast<size_t>(kRopeFine + max_distance / kRopeFine + 1) * p.shape.rope_dim * sizeof(float), kAlignment);
  p.scratch = LayOutScratch(p);
  p.scratch_bytes_per_thread = p.scratch.bytes;
  p.arena_bytes = static_cast<size_t>(p.lanes()) * p.lane_bytes + p.rope_table_bytes +
                  static_cast<size_t>(p.max_threads) * p.scratch_bytes_per_thread;
}

// Fills S/H/W, block counts and bytes for a given capacity. The capacity must
// already be ≥ the policy minimum.
void Resolve(KvCachePlan& p, const KvCacheOptions& o, int capacity) {
  p.capacity = capacity;
  const int rest = capacity - p.sinks;
  switch (p.policy) {
    case EvictionPolicy::kFull:
      p.heavy = 0;
      p.window = capacity;
      p.ring_blocks = capacity / G;  // the hot tail holds the remainder
      break;
    case EvictionPolicy::kWindow:
    case EvictionPolicy::kSinks:
      p.heavy = 0;
      p.window = rest;
      // At sealing time the ring holds ≤ W − G tokens ending on a block edge.
      p.ring_blocks = CeilDiv(p.window, G);
      break;
    case EvictionPolicy::kH2O:
      // Blocks leave the window whole, so W is a whole number of blocks: the
      // ring plus a full hot tail.
      if (o.window >= 0) {
        p.window = o.window / G * G;
        p.heavy = o.heavy >= 0 ? o.heavy : rest - p.window;
      } else if (o.heavy >= 0) {
        p.heavy = o.heavy;
        p.window = (rest - p.heavy) / G * G;
      } else {  // even split, to block granularity
        p.window = std::max(2 * G, (rest / 2 + G / 2) / G * G);
        p.heavy = rest - p.window;
      }
      p.ring_blocks = p.window / G - 1;
      p.capacity = p.sinks + p.heavy + p.window;
      break;
  }
  p.heavy_blocks = CeilDiv(p.heavy, G);
  ComputeBytes(p);
}

// Empty (the default frequencies) or one finite, non-negative θ per rotated pair.
Status CheckRopeFrequencies(const std::vector<double>& freqs, int rope_dim) {
  if (!freqs.empty() && freqs.size() != static_cast<size_t>(rope_dim / 2)) {
    return InvalidArgument("KV cache: " + std::to_string(freqs.size()) + " RoPE frequencies for " +
                           std::to_string(rope_dim / 2) + " rotated pairs");
  }
  for (double f : freqs) {
    if (!std::isfinite(f) || f < 0.0) return InvalidArgument("KV cache: a RoPE frequency is negative or not finite");
  }
  return OkStatus();
}

int MinimumCapacity(const KvCachePlan& p, const KvCacheOptions& o) {
  switch (p.policy) {
    case EvictionPolicy::kFull: return 1;
    case EvictionPolicy::kWindow:
    case EvictionPolicy::kSinks: return p.sinks + G;
    case EvictionPolicy::kH2O: return p.sinks + std::max(o.heavy, 0) + 2 * G;
  }
  return 1;
}

}  // namespace

namespace {
constexpr EnumName<EvictionPolicy> kPolicyNames[] = {{EvictionPolicy::kFull, "full"},
                                                     {EvictionPolicy::kWindow, "window"},
                                                     {EvictionPolicy::kSinks, "sinks"},
                                                     {EvictionPolicy::kH2O, "h2o"}};
constexpr EnumName<PositionMode> kPositionNames[] = {{PositionMode::kInCache, "in-cache"},
                                                     {PositionMode::kAbsolute, "absolute"}};
constexpr EnumName<RopeStyle> kRopeStyleNames[] = {{RopeStyle::kNorm, "norm"}, {RopeStyle::kNeox, "neox"}};
constexpr EnumName<KeyQuantAxis> kKeyAxisNames[] = {{KeyQuantAxis::kChannel, "channel"},
                                                    {KeyQuantAxis::kToken, "token"}};
constexpr EnumName<KeyRope> kKeyRopeNames[] = {{KeyRope::kInBlock, "in-block"}, {KeyRope::kPost, "post"},
                                               {KeyRope::kPre, "pre"}};
constexpr EnumName<H2OScore> kH2OScoreNames[] = {{H2OScore::kCumulative, "cumulative"},
                                                 {H2OScore::kTova, "tova"},
                                                 {H2OScore::kAge, "age"}};
}  // namespace

const char* EvictionPolicyName(EvictionPolicy p) { return NameOf(kPolicyNames, p); }
bool ParseEvictionPolicy(const std::string& name, EvictionPolicy* out) { return ParseName(kPolicyNames, name, out); }
const char* PositionModeName(PositionMode m) { return NameOf(kPositionNames, m); }
bool ParsePositionMode(const std::string& name, PositionMode* out) { return ParseName(kPositionNames, name, out); }
const char* RopeStyleName(RopeStyle s) { return NameOf(kRopeStyleNames, s); }
const char* KeyQuantAxisName(KeyQuantAxis a) { return NameOf(kKeyAxisNames, a); }
bool ParseKeyQuantAxis(const std::string& name, KeyQuantAxis* out) { return ParseName(kKeyAxisNames, name, out); }
const char* KeyRopeName(KeyRope r) { return NameOf(kKeyRopeNames, r); }
bool ParseKeyRope(const std::string& name, KeyRope* out) { return ParseName(kKeyRopeNames, name, out); }
const char* H2OScoreName(H2OScore s) { return NameOf(kH2OScoreNames, s); }
bool ParseH2OScore(const std::string& name, H2OScore* out) { return ParseName(kH2OScoreNames, name, out); }

uint64_t KvCachePlan::F16FullBytes(uint64_t tokens) const {
  return tokens * static_cast<uint64_t>(lanes()) * static_cast<uint64_t>(shape.head_dim) * 2 * sizeof(uint16_t);
}

Status KvCachePlan::SetRopeFrequencies(std::vector<double> freqs) {
  KVEDGE_RETURN_IF_ERROR(CheckRopeFrequencies(freqs, shape.rope_dim));
  shape.rope_freqs = std::move(freqs);
  return OkStatus();
}

std::string KvCachePlan::Describe() const {
  char buf[320];
  std::snprintf(buf, sizeof(buf), "%s cache, keys %s (%s-wise, %s RoPE), values %s%s, %d tokens/lane (sinks %d, heavy %d, window %d), %s",
                EvictionPolicyName(policy), KvFormatName(key_format), KeyQuantAxisName(key_axis), KeyRopeName(key_rope),
                KvFormatName(value_format), hot_tail ? "" : ", no hot tail", capacity, sinks, heavy, window,
                FormatBytes(arena_bytes).c_str());
  return buf;
}

StatusOr<KvCachePlan> PlanKvCache(const KvShape& s, const KvCacheOptions& o, int max_threads) {
  if (s.n_layers <= 0 || s.n_heads <= 0 || s.n_kv_heads <= 0 || s.n_heads % s.n_kv_heads != 0) {
    return InvalidArgument("KV cache: bad attention shape (layers " + std::to_string(s.n_layers) + ", heads " +
                           std::to_string(s.n_heads) + ", kv heads " + std::to_string(s.n_kv_heads) +
                           "): heads must be a positive multiple of kv heads");
  }
  if (!IsSupportedHeadDim(s.head_dim)) {
    return Unsupported("KV cache: head dimension " + std::to_string(s.head_dim) +
                       " is not supported (a multiple of 8 up to " +
                       std::to_string(kMaxHeadDim) + ")");
  }
  if (s.rope_dim < 0 || s.rope_dim > s.head_dim || s.rope_dim % 2 != 0) {
    return InvalidArgument("KV cache: rope dimension " + std::to_string(s.rope_dim) +
                           " must be even and at most the head dimension " + std::to_string(s.head_dim));
  }
  KVEDGE_RETURN_IF_ERROR(CheckRopeFrequencies(s.rope_freqs, s.rope_dim));
  if (!std::isfinite(s.rope_theta) || s.rope_theta <= 0.0) {
    return InvalidArgument("KV cache: RoPE base " + std::to_string(s.rope_theta) + " must be positive");
  }
  if (!std::isfinite(s.rope_mscale) || s.rope_mscale <= 0.0f || !std::isfinite(s.attn_scale) || s.attn_scale < 0.0f ||
      !std::isfinite(s.attn_softcap) || s.attn_softcap < 0.0f) {
    return InvalidArgument("KV cache: RoPE magnitude, attention scale and soft-cap must be finite and ≥ 0");
  }
  if (s.sliding_window < 0 || s.swa_period < 0) {
    return InvalidArgument("KV cache: sliding window " + std::to_string(s.sliding_window) + " and period " +
                           std::to_string(s.swa_period) + " must be ≥ 0");
  }
  if (max_threads < 1 || max_threads > 1024) return InvalidArgument("KV cache: bad thread count");
  if (!(o.h2o_decay > 0.0f && o.h2o_decay <= 1.0f)) {
    return InvalidArgument("KV cache: h2o decay must be in (0, 1]");
  }
  if (o.h2o_decay != 1.0f && o.h2o_score != H2OScore::kCumulative) {
    return InvalidArgument(std::string("KV cache: h2o decay applies to the cumulative score, not '") +
                           H2OScoreName(o.h2o_score) + "'");
  }
  if (o.h2o_lifetime < 0) return InvalidArgument("KV cache: h2o lifetime must be ≥ 0 tokens (0: unbounded)");
  if (o.key_rope == KeyRope::kPost && o.policy == EvictionPolicy::kH2O) {
    // Heavy hitters are gathered from many blocks: post-RoPE keys would need a
    // rotation per token, which is what `pre` does.
    return InvalidArgument("KV cache: post-RoPE keys are not supported with h2o; use --key-rope in-block or pre");
  }
  KvCachePlan p;
  p.shape = s;
  static_cast<KvCacheSettings&>(p) = o;
  p.tail_format = (o.key_format == KvFormat::kF32 || o.value_format == KvFormat::kF32) ? KvFormat::kF32
                                                                                       : KvFormat::kF16;
  p.max_threads = max_threads;
  const bool has_sinks = o.policy == EvictionPolicy::kSinks || o.policy == EvictionPolicy::kH2O;
  if (!has_sinks && o.sinks > 0) {
    return InvalidArgument(std::string("KV cache: policy '") + EvictionPolicyName(o.policy) +
                           "' keeps no sinks; use --policy sinks or h2o for --sinks");
  }
  if (o.policy != EvictionPolicy::kH2O && o.heavy > 0) {
    return InvalidArgument("KV cache: heavy hitters need --policy h2o");
  }
  p.sinks = has_sinks ? (o.sinks >= 0 ? o.sinks : 4) : 0;
  // Sinks also pin a chat's system prompt (runtime/chat/system_prompt.h).
  if (p.sinks > kMaxSinks) {
    return InvalidArgument("KV cache: " + std::to_string(p.sinks) + " sinks is too many (max " +
                           std::to_string(kMaxSinks) + ")");
  }

  const int minimum = MinimumCapacity(p, o);
  int capacity = o.capacity;
  if (capacity == 0 && o.budget_bytes == 0) {
    if (o.window < 0 || (o.policy == EvictionPolicy::kH2O && o.heavy < 0)) {
      return InvalidArgument("KV cache: give a capacity in tokens (-c) or a byte budget (--kv-budget)");
    }
    capacity = p.sinks + o.window + std::max(o.heavy, 0);
  }
  if (capacity < 0 || capacity > (1 << 26)) {
    return InvalidArgument("KV cache: capacity " + std::to_string(capacity) + " tokens is out of range");
  }
  if (capacity > 0) {
    if (capacity < minimum) {
      return ResourceExhausted("KV cache: capacity " + std::to_string(capacity) + " tokens is below the minimum " +
                               std::to_string(minimum) + " for policy " + EvictionPolicyName(o.policy) +
                               " (sinks + one block of " + std::to_string(G) + " + the hot tail)");
    }
    if (o.window >= 0 && o.policy != EvictionPolicy::kH2O && p.sinks + o.window != capacity) {
      return InvalidArgument("KV cache: sinks " + std::to_string(p.sinks) + " + window " + std::to_string(o.window) +
                             " does not equal the capacity " + std::to_string(capacity));
    }
    Resolve(p, o, capacity);
  } else {
    // Largest capacity whose arena fits the budget (bytes grow with capacity).
    Resolve(p, o, minimum);
    if (p.arena_bytes > o.budget_bytes) {
      return ResourceExhausted("KV budget " + FormatBytes(o.budget_bytes) + " is too small: policy " +
                               EvictionPolicyName(o.policy) + " with " + KvFormatName(o.key_format) + "/" +
                               KvFormatName(o.value_format) + " needs at least " + FormatBytes(p.arena_bytes) +
                               " (sinks + one block + the hot tail, " + std::to_string(minimum) + " tokens per lane)");
    }
    int lo = minimum, hi = minimum;
    while (hi < (1 << 26)) {
      Resolve(p, o, std::min(hi * 2, 1 << 26));
      if (p.arena_bytes > o.budget_bytes) break;
      hi = std::min(hi * 2, 1 << 26);
      lo = hi;
    }
    hi = std::min(hi * 2, 1 << 26);
    while (lo < hi) {  // invariant: lo fits
      const int mid = lo + (hi - lo + 1) / 2;
      Resolve(p, o, mid);
      if (p.arena_bytes <= o.budget_bytes) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    Resolve(p, o, lo);
  }
  if (p.policy == EvictionPolicy::kH2O) {
    if (p.heavy < 0 || p.window < 2 * G) {
      return InvalidArgument("KV cache: h2o needs a recent window of at least " + std::to_string(2 * G) +
                             " tokens; capacity " + std::to_string(p.capacity) + " with " + std::to_string(p.sinks) +
                             " sinks leaves heavy " + std::to_string(p.heavy) + ", window " +
                             std::to_string(p.window));
    }
  }
  return p;
}

}  // namespace kvedge
