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

struct LoadOptions {
  // Copy the IsInterleavable matrices (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K … Q6_K, IQ4_XS)
  // into the kInterleaved16 layout when this CPU's kernels are faster on it
  // (InterleavedWeightsPreferred(): x86 from AVX2 on).
  // The copies replace the mapped bytes in the resident set (their pages are
  // dropped), so RSS stays ≈ the weights; loading reads every weight once.
  // false: matrices are used in place from the mapping (page cache shared
  // between processes, no copy, slower kernels on those CPUs).
  bool interleave = true;
  // Threads that copy (InterleaveWeights); 0: HardwareThreads().
  int threads = 0;
};

// Maps `path` and builds its weights. GGUF (matrices of the types
// ReadableWeightTypes() names) or a llama2.c v0 checkpoint. Errors name the file,
// the tensor or field, and what was expected. Thread-safe (no shared state).
StatusOr<std::unique_ptr<ModelWeights>> LoadModel(const std::string& path, const LoadOptions& options = {});

// Copies every IsInterleavable matrix of w into owned kInterleaved16 buffers and
// points the views at them (token_embedding stays in place: it is read one
// row at a time); the mapped source pages are dropped from the resident set.
// The copy runs on `threads` threads (0: HardwareThreads()) in ~1 MiB slices.
// No-op for other formats. Errors: out of memory for a copy.
Status InterleaveWeights(ModelWeights* w, int threads = 0);

// As LoadModel over `size` bytes at `data` (4-byte aligned), which must
// outlive the result; `name` labels errors. For fuzzing and embedding.
StatusOr<std::unique_ptr<ModelWeights>> LoadModelFromMemory(const uint8_t* data, size_t size,
                                                            const std::string& name);

// Builds weights from a parsed GGUF; the GGUF's bytes must outlive the result.
StatusOr<std::unique_ptr<ModelWeights>> LoadGgufModel(const GgufFile& gguf);

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_MODEL_MODEL_LOADER_H_
