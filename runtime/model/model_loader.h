// Loading a model file (GGUF or llama2.c, detected by magic) into
// ModelWeights whose matrices are used in place.
#ifndef KVEDGE_RUNTIME_MODEL_MODEL_LOADER_H_
#define KVEDGE_RUNTIME_MODEL_MODEL_LOADER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/model/gguf.h"
#include "runtime/model/model.h"

namespace kvedge {

// Maps `path` and builds its weights. GGUF (architecture "llama"; matrices
// F32/F16/BF16/Q8_0/Q4_0) or a llama2.c v0 checkpoint. Errors name the file,
// the tensor or field, and what was expected. Thread-safe (no shared state).
StatusOr<std::unique_ptr<ModelWeights>> LoadModel(const std::string& path);

// As LoadModel over `size` bytes at `data` (4-byte aligned), which must
// outlive the result; `name` labels errors. For fuzzing and embedding.
StatusOr<std::unique_ptr<ModelWeights>> LoadModelFromMemory(const uint8_t* data, size_t size,
                                                            const std::string& name);

// Builds weights from a parsed GGUF; the GGUF's bytes must outlive the result.
StatusOr<std::unique_ptr<ModelWeights>> LoadGgufModel(const GgufFile& gguf);

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_MODEL_MODEL_LOADER_H_
