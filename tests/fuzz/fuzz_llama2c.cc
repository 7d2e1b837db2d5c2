// Fuzzes the llama2.c checkpoint reader from a memory buffer.
#include <cstdint>
#include <vector>

#include "runtime/model/llama2c.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> buf(data, data + size);  // exact size, 4-byte aligned
  auto w = kvedge::ReadLlama2c(buf.data(), buf.size(), "fuzz.bin");
  if (w.ok()) {
    // Touch the ends of the views: they must lie inside the buffer.
    const kvedge::ModelWeights& m = **w;
    volatile float sink = m.final_norm[m.config.dim - 1];
    const auto* out = static_cast<const float*>(m.output.data);
    sink = out[m.output.rows * m.output.cols - 1];
    (void)sink;
  }
  return 0;
}
