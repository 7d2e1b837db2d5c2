// GGUF v3 writer: metadata of every type, tensors F32/F16/BF16/Q8_0/Q4_0
// streamed row batch by row batch (a 7B model never sits in RAM).
#ifndef KVEDGE_RUNTIME_MODEL_GGUF_WRITER_H_
#define KVEDGE_RUNTIME_MODEL_GGUF_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "platform/status.h"
#include "runtime/model/gguf.h"
#include "simd/model_kernels.h"

namespace kvedge {

// ggml type id of a kvedge weight type.
uint32_t GgmlTypeOf(WeightType t);

// Usage: Set*() metadata and AddTensor() every tensor, then Begin(), then
// WriteRows() each tensor's rows in declaration order, then Finish().
// Single-threaded; neither copyable nor movable (owns the open file).
class GgufWriter {
 public:
  GgufWriter() = default;
  GgufWriter(GgufWriter&&) = delete;
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;
  ~GgufWriter();

  void SetUint8(std::string_view key, uint8_t v) { SetScalar(key, GgufType::kUint8, &v); }
  void SetInt8(std::string_view key, int8_t v) { SetScalar(key, GgufType::kInt8, &v); }
  void SetUint16(std::string_view key, uint16_t v) { SetScalar(key, GgufType::kUint16, &v); }
  void SetInt16(std::string_view key, int16_t v) { SetScalar(key, GgufType::kInt16, &v); }
  void SetUint32(std::string_view key, uint32_t v) { SetScalar(key, GgufType::kUint32, &v); }
  void SetInt32(std::string_view key, int32_t v) { SetScalar(key, GgufType::kInt32, &v); }
  void SetFloat32(std::string_view key, float v) { SetScalar(key, GgufType::kFloat32, &v); }
  void SetBool(std::string_view key, bool v) {
    const uint8_t b = v;
    SetScalar(key, GgufType::kBool, &b);
  }
  void SetUint64(std::string_view key, uint64_t v) { SetScalar(key, GgufType::kUint64, &v); }
  void SetInt64(std::string_view key, int64_t v) { SetScalar(key, GgufType::kInt64, &v); }
  void SetFloat64(std::string_view key, double v) { SetScalar(key, GgufType::kFloat64, &v); }
  void SetString(std::string_view key, std::string_view v);
  // `count` packed little-endian scalars of type `elem` (not string/array).
  void SetArray(std::string_view key, GgufType elem, const void* data, size_t count);
  void SetStringArray(std::string_view key, const std::vector<std::string>& values);
  // Any value read from a GGUF file (scalars, strings, nested arrays), as is.
  void CopyValue(std::string_view key, const GgufValue& v);
  // Also written as general.alignment (uint32). Power of two; default 32.
  void SetAlignment(uint32_t alignment);

  // ne[0] is the row length (cols); 1..4 dims.
  void AddTensor(std::string name, WeightType type, std::vector<uint64_t> ne);

  // Creates `path` and writes header, metadata and tensor infos.
  Status Begin(const std::string& path);
  // Appends `n_rows` rows of ne[0] f32 values to the current tensor,
  // converting/quantizing to its type; moves to the next tensor when full.
  Status WriteRows(const float* rows, uint64_t n_rows);
  // Appends `n_rows` rows already in the current tensor's type (n_rows ·
  // WeightRowBytes bytes at `data`), copied as they are.
  Status WriteRawRows(const void* data, uint64_t n_rows);
  // Checks every tensor was written and closes the file.
  Status Finish();

 private:
  struct Tensor {
    std::string name;
    WeightType type;
    std::vector<uint64_t> ne;
    uint64_t rows;
    uint64_t offset;  // relative to the data section
  };
  void SetScalar(std::string_view key, GgufType type, const void* v);
  bool StartKey(std::string_view key, GgufType type);
  void Put(const void* p, size_t n) { meta_.append(static_cast<const char*>(p), n); }
  void PutString(std::string_view s);
  void PutValueBody(const GgufValue& v);
  // Writes n rows of the current tensor from `bytes` and advances.
  Status CommitRows(const void* bytes, uint64_t n);
  Status WriteBytes(const void* p, size_t n);
  Status Pad();

  std::string path_;
  std::string meta_;  // serialized key-value pairs
  uint64_t n_kv_ = 0;
  std::unordered_set<std::string> keys_;
  Status error_;  // first misuse (duplicate key, bad tensor), reported by Begin
  uint32_t alignment_ = kGgufDefaultAlignment;
  std::vector<Tensor> tensors_;
  uint64_t data_bytes_ = 0;
  std::FILE* out_ = nullptr;
  uint64_t written_ = 0;        // bytes written to the file so far
  size_t current_ = 0;          // tensor receiving rows
  uint64_t rows_done_ = 0;      // rows of it written
  std::vector<uint8_t> scratch_;
};

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_MODEL_GGUF_WRITER_H_
