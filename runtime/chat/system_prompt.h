// A chat's system prompt, pinned: the stream's first tokens sit in the sink
// region (f32, never evicted, never re-quantized) for the whole stream, so the
// instructions a chat starts with stay in the cache at full quality however
// long it runs; everything after streams through the chosen policy.
#ifndef KVEDGE_RUNTIME_CHAT_SYSTEM_PROMPT_H_
#define KVEDGE_RUNTIME_CHAT_SYSTEM_PROMPT_H_

#include "kvcache/kv_cache_plan.h"
#include "platform/status.h"

namespace kvedge {

// Widens `options` so the first `system_tokens` tokens of a stream are pinned
// — sinks = max(the sinks asked for, or the policy default, system_tokens) —
// and plans the cache to check it fits. Policies: sinks and h2o pin; full
// never evicts, so it is planned as given; window keeps no sinks and is
// refused (use sinks: the same window plus the pinned prompt). Errors:
// ResourceExhausted when the capacity or byte budget cannot hold the pinned
// prompt plus a minimal window (the message gives the prompt's tokens and
// the minimum), InvalidArgument for a window policy, a prompt longer than
// kMaxSinks, or what PlanKvCache refuses.
StatusOr<KvCachePlan> PinSystemPrompt(const KvShape& shape, int system_tokens, int max_threads,
                                      KvCacheOptions* options);

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_CHAT_SYSTEM_PROMPT_H_
