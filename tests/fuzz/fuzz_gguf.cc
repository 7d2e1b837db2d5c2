// Fuzzes the GGUF reader, the llama loader and the embedded-vocabulary
// tokenizer from a memory buffer.
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/model/gguf.h"
#include "runtime/model/model_loader.h"
#include "runtime/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exactly sized heap copy: ASan sees any read past the end.
  std::vector<uint8_t> buf(data, data + size);
  auto gguf = kvedge::GgufFile::Parse(buf.data(), buf.size(), "fuzz.gguf");
  if (gguf.ok()) {
    (void)kvedge::LoadGgufModel(*gguf);
    auto tokenizer = kvedge::LoadGgufTokenizer(*gguf);
    if (tokenizer.ok()) {
      auto ids = (*tokenizer)->Encode("Once upon a time, \xE2\x80\x9Cthere\xE2\x80\x9D was 42.", true);
      if (ids.ok()) (void)(*tokenizer)->Decode(*ids);
    }
  }
  (void)kvedge::LoadModelFromMemory(buf.data(), buf.size(), "fuzz.bin");
  return 0;
}
