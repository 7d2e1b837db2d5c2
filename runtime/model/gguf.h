// GGUF (v2, v3) reader: header, metadata and tensor infos parsed and
// validated against the file size; tensor data is used in place.
#ifndef KVEDGE_RUNTIME_MODEL_GGUF_H_
#define KVEDGE_RUNTIME_MODEL_GGUF_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "platform/status.h"
#include "simd/weight_format.h"  // ggml type ids and block sizes (FindGgmlType)

namespace kvedge {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
inline constexpr uint64_t kGgufDefaultAlignment = 32;
inline constexpr int kGgufMaxDims = 4;
inline constexpr int kGgufMaxArrayDepth = 8;  // nested arrays deeper than this are refused

// Metadata value types (the numbering of the GGUF spec).
enum class GgufType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};
const char* GgufTypeName(GgufType t);
// Bytes of one scalar of type t; 0 for kString / kArray / unknown.
size_t GgufScalarSize(GgufType t);

// One metadata value. Strings and scalar arrays are views into the file.
struct GgufValue {
  GgufType type = GgufType::kUint8;
  uint64_t bits = 0;        // scalars: the little-endian payload, zero-extended
  std::string_view str;     // kString
  // kArray:
  GgufType elem_type = GgufType::kUint8;
  uint64_t count = 0;
  const uint8_t* elems = nullptr;         // scalar elements, packed, unaligned
  std::vector<std::string_view> strings;  // string elements
  std::vector<GgufValue> arrays;          // array elements

  // Any integer or bool scalar that fits int64; nullopt otherwise.
  std::optional<int64_t> AsInt() const;
  // f32/f64 or integer scalars.
  std::optional<double> AsFloat() const;
  // Element i (< count) of a scalar array, as above.
  std::optional<int64_t> IntAt(size_t i) const;
  std::optional<double> FloatAt(size_t i) const;
};

struct GgufTensorInfo {
  std::string_view name;
  int index = 0;                // position in the file's tensor list
  int n_dims = 0;               // 1..4
  uint64_t ne[kGgufMaxDims] = {1, 1, 1, 1};  // ne[0] is the innermost (contiguous) dimension
  uint32_t type = 0;            // ggml type id
  uint64_t offset = 0;          // relative to the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // in place
};

// A parsed GGUF file. Non-owning: the bytes passed to Parse must outlive it.
// Immutable after parsing, so concurrent reads are safe. Movable.
class GgufFile {
 public:
  // Parses and validates `size` bytes at `data`. `name` (usually the path)
  // starts every error message. Never reads outside [data, data + size) and
  // allocates at most a small multiple of `size`.
  static StatusOr<GgufFile> Parse(const uint8_t* data, size_t size, std::string name);

  const std::string& name() const { return name_; }
  const uint8_t* data() const { return data_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute start of the data section
  size_t size() const { return size_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string_view, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* Find(std::string_view key) const;
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;

 private:
  std::string name_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string_view, GgufValue>> metadata_;
  std::unordered_map<std::string_view, size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

// "[64, 512]" — ne order, as GGUF stores them.
std::string FormatDims(const uint64_t* ne, int n_dims);

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_MODEL_GGUF_H_
