// Reader for llama2.c's legacy ("version 0") checkpoint: a 7-int32 header
// followed by f32 arrays, used in place.
#ifndef KVEDGE_RUNTIME_MODEL_LLAMA2C_H_
#define KVEDGE_RUNTIME_MODEL_LLAMA2C_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/model/model.h"

namespace kvedge {

inline constexpr size_t kLlama2cHeaderBytes = 7 * 4;

// Builds weights viewing `size` bytes at `data` (4-byte aligned; must outlive
// the result; `file` and `source` are left for the caller to fill). The file
// size must match the header exactly. `name` prefixes errors.
StatusOr<std::unique_ptr<ModelWeights>> ReadLlama2c(const uint8_t* data, size_t size, const std::string& name);

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_MODEL_LLAMA2C_H_
