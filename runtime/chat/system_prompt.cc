// Pinning a system prompt in the sink region.
#include "runtime/chat/system_prompt.h"

#include <algorithm>
#include <string>

namespace kvedge {

StatusOr<KvCachePlan> PinSystemPrompt(const KvShape& shape, int system_tokens, int max_threads,
                                      KvCacheOptions* options) {
  KVEDGE_CHECK(options != nullptr);
  if (system_tokens < 0) return InvalidArgument("system prompt of " + std::to_string(system_tokens) + " tokens");
  if (system_tokens > kMaxSinks) {
    return InvalidArgument("the system prompt has " + std::to_string(system_tokens) +
                           " tokens; at most " + std::to_string(kMaxSinks) + " can be pinned");
  }
  switch (options->policy) {
    case EvictionPolicy::kFull: break;
    case EvictionPolicy::kWindow:
      if (system_tokens > 0) {
        return InvalidArgument("policy window keeps no pinned tokens, so it would evict the system prompt; use "
                               "policy sinks (the same recent window plus the pinned prompt) or h2o");
      }
      break;
    case EvictionPolicy::kSinks:
    case EvictionPolicy::kH2O: {
      const int asked = options->sinks >= 0 ? options->sinks : 4;
      options->sinks = std::max(asked, system_tokens);
      break;
    }
  }
  StatusOr<KvCachePlan> plan = PlanKvCache(shape, *options, max_threads);
  if (!plan.ok()) {
    return Status(plan.status().code(), "the system prompt's " + std::to_string(system_tokens) +
                                            " tokens are pinned in the cache: " + plan.status().message());
  }
  if (options->policy == EvictionPolicy::kFull && plan->capacity < system_tokens) {
    return ResourceExhausted("the system prompt has " + std::to_string(system_tokens) + " tokens; the cache holds " +
                             std::to_string(plan->capacity));
  }
  return plan;
}

}  // namespace kvedge
