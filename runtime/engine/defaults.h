// The measured defaults (docs/quality.md): what a KV cache is when the caller
// fixes only its size. One home for the CLI, the C API, chat and the server.
#ifndef KVEDGE_RUNTIME_ENGINE_DEFAULTS_H_
#define KVEDGE_RUNTIME_ENGINE_DEFAULTS_H_

#include <cstdint>
#include <optional>

#include "kvcache/kv_cache_plan.h"
#include "platform/status.h"
#include "runtime/model/model.h"

namespace kvedge {

// A cache request: its size and whatever the caller chose. Every choice left
// unset (nullopt, -1) is made by DefaultConfig.
struct KvRequest {
  // Size: tokens per lane, or an arena byte budget; with neither (and no
  // window) the cache holds the model's trained context.
  int capacity = 0;
  uint64_t budget_bytes = 0;
  std::optional<KvFormat> key_format;
  std::optional<KvFormat> value_format;
  std::optional<KeyRope> key_rope;
  std::optional<EvictionPolicy> policy;
  int sinks = -1;   // -1: the default for the policy
  int heavy = -1;
  int window = -1;  // -1: what the capacity leaves
  // Used as given.
  PositionMode positions = PositionMode::kInCache;
  H2OScore h2o_score = H2OScore::kCumulative;
  float h2o_decay = 1.0f;
  int h2o_lifetime = 0;
  KeyQuantAxis key_axis = KeyQuantAxis::kChannel;
  bool hot_tail = true;
};

// The cache options for `request` on `model` with `threads` threads (they size
// per-thread scratch, which counts against a byte budget). The rule (README,
// "Defaults"):
// - capacity: as given; from a budget, the most tokens it holds but never more
//   than the trained context T (in-cache positions stay below the capacity,
//   and past T the model breaks: spare bytes buy precision, not positions);
//   with no size at all, T.
// - formats: int8/int8, unless a byte budget cannot hold T tokens in int8:
//   then int4/int4 with pre-RoPE keys (unless the key rotation is given).
// - policy: sinks with S = 2 from 128 tokens, a plain window below 128.
// Errors: options that cannot be validated are left to PlanKvCache, which
// Session::Create calls with the caller's own choices; none are raised here.
KvCacheOptions DefaultConfig(const ModelConfig& model, const KvRequest& request, int threads);

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_ENGINE_DEFAULTS_H_
