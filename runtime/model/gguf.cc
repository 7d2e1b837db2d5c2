// GGUF parsing. Every count, length and offset is checked against the bytes
// that remain before it is used, so hostile files fail with a located error.
#include "runtime/model/gguf.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "platform/enum_names.h"
#include "platform/utf8.h"

namespace kvedge {
namespace {

// Bounded little-endian reader over [data, data + size).
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& file)
      : data_(data), size_(size), file_(file) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  Status Read(void* out, size_t n, const char* what) {
    if (n > remaining()) {
      return DataLoss(file_ + ": truncated: " + what + " at offset " + std::to_string(pos_) + " needs " +
                      std::to_string(n) + " bytes, " + std::to_string(remaining()) + " remain");
    }
    std::memcpy(out, data_ + pos_, n);
    pos_ += n;
    return OkStatus();
  }
  Status U32(uint32_t* v, const char* what) { return Read(v, 4, what); }
  Status U64(uint64_t* v, const char* what) { return Read(v, 8, what); }

  // A u64 length then that many bytes, viewed in place.
  Status String(std::string_view* out, const char* what) {
    const size_t at = pos_;
    uint64_t len;
    KVEDGE_RETURN_IF_ERROR(U64(&len, what));
    if (len > remaining()) {
      return DataLoss(file_ + ": " + what + " at offset " + std::to_string(at) + " has length " +
                      std::to_string(len) + ", past the file end (" + std::to_string(size_) + " bytes)");
    }
    *out = std::string_view(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return OkStatus();
  }
  Status Skip(size_t n, const char* what) {
    if (n > remaining()) {
      return DataLoss(file_ + ": truncated: " + what + " at offset " + std::to_string(pos_) + " needs " +
                      std::to_string(n) + " bytes, " + std::to_string(remaining()) + " remain");
    }
    pos_ += n;
    return OkStatus();
  }
  const uint8_t* here() const { return data_ + pos_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& file_;
};

// Messages start with "<file>: "; inserts `where` ("metadata #3 'k': ")
// after that prefix so the result still reads file, location, problem.
Status Annotate(const Status& s, const std::string& file, const std::string& where) {
  const std::string prefix = file + ": ";
  if (s.message().compare(0, prefix.size(), prefix) == 0) {
    return Status(s.code(), prefix + where + s.message().substr(prefix.size()));
  }
  return Status(s.code(), prefix + where + s.message());
}

std::string Quote(std::string_view s) {
  // Keys and names may be hostile: print at most 80 bytes, escape controls.
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 80) out += "...";
  return out + "'";
}

bool KnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kFloat64); }

// Minimum encoded bytes of one array element of type t (caps counts).
size_t MinElementBytes(GgufType t) {
  if (t == GgufType::kString) return 8;
  if (t == GgufType::kArray) return 12;
  return GgufScalarSize(t);
}

Status ReadValue(Cursor& cur, GgufType type, int depth, const std::string& file, GgufValue* out);

Status ReadArray(Cursor& cur, int depth, const std::string& file, GgufValue* out) {
  if (depth >= kGgufMaxArrayDepth) {
    return DataLoss(file + ": arrays nested deeper than " + std::to_string(kGgufMaxArrayDepth) +
                    " levels at offset " + std::to_string(cur.pos()));
  }
  uint32_t elem;
  const size_t type_at = cur.pos();
  KVEDGE_RETURN_IF_ERROR(cur.U32(&elem, "array element type"));
  if (!KnownType(elem)) {
    return DataLoss(file + ": unknown array element type " + std::to_string(elem) + " at offset " +
                    std::to_string(type_at));
  }
  out->elem_type = static_cast<GgufType>(elem);
  const size_t count_at = cur.pos();
  KVEDGE_RETURN_IF_ERROR(cur.U64(&out->count, "array length"));
  const size_t min_bytes = MinElementBytes(out->elem_type);
  if (out->count > cur.remaining() / min_bytes) {
    return DataLoss(file + ": array of " + std::to_string(out->count) + " " + GgufTypeName(out->elem_type) +
                    " at offset " + std::to_string(count_at) + " needs at least " +
                    std::to_string(min_bytes) + " bytes each, only " + std::to_string(cur.remaining()) +
                    " bytes remain");
  }
  switch (out->elem_type) {
    case GgufType::kString:
      out->strings.resize(out->count);
      for (uint64_t i = 0; i < out->count; ++i) {
        Status s = cur.String(&out->strings[i], "string array element");
        if (!s.ok()) return Annotate(s, file, "element " + std::to_string(i) + ": ");
      }
      return OkStatus();
    case GgufType::kArray:
      out->arrays.resize(out->count);
      for (uint64_t i = 0; i < out->count; ++i) {
        GgufValue& v = out->arrays[i];
        v.type = GgufType::kArray;
        Status s = ReadArray(cur, depth + 1, file, &v);
        if (!s.ok()) return Annotate(s, file, "element " + std::to_string(i) + ": ");
      }
      return OkStatus();
    default:
      out->elems = cur.here();
      // count ≤ remaining / size, so the product cannot overflow.
      return cur.Skip(out->count * min_bytes, "array elements");
  }
}

Status ReadValue(Cursor& cur, GgufType type, int depth, const std::string& file, GgufValue* out) {
  out->type = type;
  if (type == GgufType::kString) return cur.String(&out->str, "string value");
  if (type == GgufType::kArray) return ReadArray(cur, depth, file, out);
  KVEDGE_RETURN_IF_ERROR(cur.Read(&out->bits, GgufScalarSize(type), "scalar value"));
  if (type == GgufType::kBool && out->bits > 1) {
    return DataLoss(file + ": bool value " + std::to_string(out->bits) + " at offset " +
                    std::to_string(cur.pos() - 1) + " (expected 0 or 1)");
  }
  return OkStatus();
}

bool CheckedMul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool CheckedAdd(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

// A scalar's bits read as the declared type.
std::optional<int64_t> ScalarInt(GgufType t, uint64_t bits) {
  switch (t) {
    case GgufType::kUint8: case GgufType::kUint16: case GgufType::kUint32: case GgufType::kBool:
      return static_cast<int64_t>(bits);
    case GgufType::kUint64:
      if (bits > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
      return static_cast<int64_t>(bits);
    case GgufType::kInt8: return static_cast<int8_t>(bits);
    case GgufType::kInt16: return static_cast<int16_t>(bits);
    case GgufType::kInt32: return static_cast<int32_t>(bits);
    case GgufType::kInt64: return static_cast<int64_t>(bits);
    default: return std::nullopt;
  }
}

std::optional<double> ScalarFloat(GgufType t, uint64_t bits) {
  if (t == GgufType::kFloat32) {
    float f;
    const uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&f, &b, 4);
    return f;
  }
  if (t == GgufType::kFloat64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  if (t == GgufType::kUint64) return static_cast<double>(bits);
  const auto i = ScalarInt(t, bits);
  if (i) return static_cast<double>(*i);
  return std::nullopt;
}

uint64_t ElementBits(const GgufValue& v, size_t i) {
  uint64_t bits = 0;
  const size_t n = GgufScalarSize(v.elem_type);
  std::memcpy(&bits, v.elems + i * n, n);
  return bits;
}

}  // namespace

namespace {
constexpr EnumName<GgufType> kGgufTypeNames[] = {
    {GgufType::kUint8, "uint8"},   {GgufType::kInt8, "int8"},       {GgufType::kUint16, "uint16"},
    {GgufType::kInt16, "int16"},   {GgufType::kUint32, "uint32"},   {GgufType::kInt32, "int32"},
    {GgufType::kFloat32, "float32"}, {GgufType::kBool, "bool"},     {GgufType::kString, "string"},
    {GgufType::kArray, "array"},   {GgufType::kUint64, "uint64"},   {GgufType::kInt64, "int64"},
    {GgufType::kFloat64, "float64"}};
}  // namespace

const char* GgufTypeName(GgufType t) { return NameOf(kGgufTypeNames, t, "unknown"); }

size_t GgufScalarSize(GgufType t) {
  switch (t) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kBool: return 1;
    case GgufType::kUint16: case GgufType::kInt16: return 2;
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kFloat32: return 4;
    case GgufType::kUint64: case GgufType::kInt64: case GgufType::kFloat64: return 8;
    default: return 0;
  }
}

std::optional<int64_t> GgufValue::AsInt() const { return ScalarInt(type, bits); }
std::optional<double> GgufValue::AsFloat() const { return ScalarFloat(type, bits); }
std::optional<int64_t> GgufValue::IntAt(size_t i) const {
  if (type != GgufType::kArray || elems == nullptr || i >= count) return std::nullopt;
  return ScalarInt(elem_type, ElementBits(*this, i));
}
std::optional<double> GgufValue::FloatAt(size_t i) const {
  if (type != GgufType::kArray || elems == nullptr || i >= count) return std::nullopt;
  return ScalarFloat(elem_type, ElementBits(*this, i));
}

std::string FormatDims(const uint64_t* ne, int n_dims) {
  std::string s = "[";
  for (int i = 0; i < n_dims; ++i) {
    if (i) s += ", ";
    s += std::to_string(ne[i]);
  }
  return s + "]";
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  const auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

StatusOr<GgufFile> GgufFile::Parse(const uint8_t* data, size_t size, std::string name) {
  GgufFile f;
  f.name_ = std::move(name);
  f.data_ = data;
  f.size_ = size;
  const std::string& file = f.name_;
  Cursor cur(data, size, file);

  uint32_t magic;
  KVEDGE_RETURN_IF_ERROR(cur.U32(&magic, "GGUF magic"));
  if (magic != kGgufMagic) {
    return InvalidArgument(file + ": not a GGUF file (magic bytes at offset 0 are not 'GGUF')");
  }
  KVEDGE_RETURN_IF_ERROR(cur.U32(&f.version_, "GGUF version"));
  if (f.version_ == 1) {
    return Unsupported(file + ": GGUF version 1 is not supported (kvedge reads versions 2 and 3; "
                              "re-convert the model with a current llama.cpp)");
  }
  if (f.version_ != 2 && f.version_ != 3) {
    std::string hint;
    if (f.version_ > 0xFFFF) hint = "; a big-endian GGUF? kvedge reads little-endian files only";
    return Unsupported(file + ": GGUF version " + std::to_string(f.version_) +
                       " is not supported (expected 2 or 3" + hint + ")");
  }
  uint64_t n_tensors, n_kv;
  KVEDGE_RETURN_IF_ERROR(cur.U64(&n_tensors, "tensor count"));
  KVEDGE_RETURN_IF_ERROR(cur.U64(&n_kv, "metadata count"));
  // Minimum encodings: a key-value is a length, a type and a 1-byte value;
  // a tensor info is a name length, n_dims, one dim, a type and an offset.
  constexpr uint64_t kMinKvBytes = 8 + 4 + 1, kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
  if (n_kv > cur.remaining() / kMinKvBytes) {
    return DataLoss(file + ": header claims " + std::to_string(n_kv) + " metadata entries, but only " +
                    std::to_string(cur.remaining()) + " bytes follow the header");
  }
  if (n_tensors > cur.remaining() / kMinTensorInfoBytes) {
    return DataLoss(file + ": header claims " + std::to_string(n_tensors) + " tensors, but only " +
                    std::to_string(cur.remaining()) + " bytes follow the header");
  }

  f.metadata_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string where = file + ": metadata #" + std::to_string(i);
    std::string_view key;
    Status s = cur.String(&key, "metadata key");
    if (!s.ok()) return Annotate(s, file, "metadata #" + std::to_string(i) + ": ");
    if (key.empty()) return DataLoss(where + " has an empty key");
    const size_t bad = FindInvalidUtf8(key);
    if (bad != kUtf8Valid) {
      return DataLoss(where + " key " + Quote(key) + " is not valid UTF-8 (byte " + std::to_string(bad) + ")");
    }
    const std::string at = "metadata #" + std::to_string(i) + " " + Quote(key) + ": ";
    uint32_t type;
    s = cur.U32(&type, "value type");
    if (!s.ok()) return Annotate(s, file, at);
    if (!KnownType(type)) {
      return DataLoss(where + " " + Quote(key) + " has unknown value type " + std::to_string(type));
    }
    GgufValue value;
    s = ReadValue(cur, static_cast<GgufType>(type), 0, file, &value);
    if (!s.ok()) return Annotate(s, file, at);
    if (!f.metadata_index_.emplace(key, f.metadata_.size()).second) {
      return DataLoss(where + ": duplicate key " + Quote(key));
    }
    f.metadata_.emplace_back(key, std::move(value));
  }

  if (const GgufValue* a = f.Find("general.alignment")) {
    const auto v = a->AsInt();
    if (!v || *v <= 0 || (*v & (*v - 1)) != 0 || *v > (1 << 30)) {
      return DataLoss(file + ": general.alignment must be a power of two integer ≤ 2^30, got " +
                      (v ? std::to_string(*v) : std::string(GgufTypeName(a->type))));
    }
    f.alignment_ = static_cast<uint64_t>(*v);
  }

  f.tensors_.resize(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo& t = f.tensors_[i];
    t.index = static_cast<int>(i);
    const std::string at = "tensor info #" + std::to_string(i) + ": ";
    Status s = cur.String(&t.name, "tensor name");
    if (!s.ok()) return Annotate(s, file, at);
    const std::string where = file + ": tensor " + Quote(t.name) + " (#" + std::to_string(i) + ")";
    if (t.name.empty()) return DataLoss(file + ": tensor #" + std::to_string(i) + " has an empty name");
    if (FindInvalidUtf8(t.name) != kUtf8Valid) return DataLoss(where + ": name is not valid UTF-8");
    uint32_t n_dims;
    s = cur.U32(&n_dims, "tensor n_dims");
    if (!s.ok()) return Annotate(s, file, at);
    if (n_dims < 1 || n_dims > kGgufMaxDims) {
      return DataLoss(where + " has " + std::to_string(n_dims) + " dimensions (expected 1.." +
                      std::to_string(kGgufMaxDims) + ")");
    }
    t.n_dims = static_cast<int>(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      s = cur.U64(&t.ne[d], "tensor dimension");
      if (!s.ok()) return Annotate(s, file, at);
    }
    s = cur.U32(&t.type, "tensor type");
    if (!s.ok()) return Annotate(s, file, at);
    s = cur.U64(&t.offset, "tensor data offset");
    if (!s.ok()) return Annotate(s, file, at);

    const GgmlTypeInfo* info = FindGgmlType(t.type);
    if (info == nullptr) {
      return DataLoss(where + " has unknown ggml type id " + std::to_string(t.type));
    }
    uint64_t n = 1;
    for (int d = 0; d < t.n_dims; ++d) {
      if (!CheckedMul(n, t.ne[d], &n) || n > static_cast<uint64_t>(INT64_MAX)) {
        return DataLoss(where + " dims " + FormatDims(t.ne, t.n_dims) + ": element count overflows 64 bits");
      }
    }
    t.n_elements = n;
    if (t.ne[0] % info->block != 0) {
      return DataLoss(where + " of type " + info->name + ": row length " + std::to_string(t.ne[0]) +
                      " is not a multiple of the block size " + std::to_string(info->block));
    }
    if (!CheckedMul(n / info->block, info->block_bytes, &t.n_bytes)) {
      return DataLoss(where + " dims " + FormatDims(t.ne, t.n_dims) + ": byte size overflows 64 bits");
    }
    if (t.offset % f.alignment_ != 0) {
      return DataLoss(where + " data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                      std::to_string(f.alignment_));
    }
    if (!f.tensor_index_.emplace(t.name, i).second) {
      return DataLoss(where + ": duplicate tensor name (first at #" +
                      std::to_string(f.tensor_index_[t.name]) + ")");
    }
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t end_of_infos = cur.pos();
  f.data_offset_ = (end_of_infos + f.alignment_ - 1) / f.alignment_ * f.alignment_;
  if (n_tensors > 0 && f.data_offset_ > size) {
    return DataLoss(file + ": truncated: the tensor data section would start at offset " +
                    std::to_string(f.data_offset_) + ", past the file end (" + std::to_string(size) + " bytes)");
  }
  for (GgufTensorInfo& t : f.tensors_) {
    const std::string where = file + ": tensor " + Quote(t.name) + " (#" + std::to_string(t.index) + ")";
    uint64_t begin, end;
    if (!CheckedAdd(f.data_offset_, t.offset, &begin) || !CheckedAdd(begin, t.n_bytes, &end)) {
      return DataLoss(where + " data offset " + std::to_string(t.offset) + " + " + std::to_string(t.n_bytes) +
                      " bytes overflows 64 bits");
    }
    if (end > size) {
      return DataLoss(where + " data [offset " + std::to_string(begin) + ".." + std::to_string(end) +
                      ") ends past the file end (" + std::to_string(size) + " bytes)");
    }
    t.data = data + begin;
  }
  // Overlap: sort by offset, neighbours must not intersect.
  std::vector<size_t> order(f.tensors_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return f.tensors_[a].offset < f.tensors_[b].offset; });
  const GgufTensorInfo* prev = nullptr;
  for (size_t k : order) {
    const GgufTensorInfo& t = f.tensors_[k];
    if (t.n_bytes == 0) continue;
    if (prev != nullptr && prev->offset + prev->n_bytes > t.offset) {
      return DataLoss(file + ": tensor " + Quote(t.name) + " (#" + std::to_string(t.index) + ") data at offset " +
                      std::to_string(t.offset) + " overlaps tensor " + Quote(prev->name) + " (#" +
                      std::to_string(prev->index) + ") [" + std::to_string(prev->offset) + ".." +
                      std::to_string(prev->offset + prev->n_bytes) + ")");
    }
    prev = &t;
  }
  return f;
}

}  // namespace kvedge
