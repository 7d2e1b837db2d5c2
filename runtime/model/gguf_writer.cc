// GGUF v3 serialization: metadata is encoded as it is set; tensor data is
// converted row batch by row batch into a small scratch buffer.
#include "runtime/model/gguf_writer.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "simd/weight_quant.h"

namespace kvedge {

uint32_t GgmlTypeOf(WeightType t) { return GetWeightFormat(t).ggml_type; }

GgufWriter::~GgufWriter() {
  if (out_ != nullptr) std::fclose(out_);
}

bool GgufWriter::StartKey(std::string_view key, GgufType type) {
  if (!keys_.emplace(key).second) {
    if (error_.ok()) error_ = InvalidArgument("GGUF writer: duplicate metadata key '" + std::string(key) + "'");
    return false;
  }
  PutString(key);
  const uint32_t t = static_cast<uint32_t>(type);
  Put(&t, 4);
  ++n_kv_;
  return true;
}

void GgufWriter::PutString(std::string_view s) {
  const uint64_t n = s.size();
  Put(&n, 8);
  Put(s.data(), s.size());
}

void GgufWriter::SetScalar(std::string_view key, GgufType type, const void* v) {
  if (StartKey(key, type)) Put(v, GgufScalarSize(type));
}

void GgufWriter::SetString(std::string_view key, std::string_view v) {
  if (StartKey(key, GgufType::kString)) PutString(v);
}

void GgufWriter::SetArray(std::string_view key, GgufType elem, const void* data, size_t count) {
  if (GgufScalarSize(elem) == 0) {
    if (error_.ok()) error_ = InvalidArgument("GGUF writer: SetArray('" + std::string(key) + "') needs a scalar type");
    return;
  }
  if (!StartKey(key, GgufType::kArray)) return;
  const uint32_t t = static_cast<uint32_t>(elem);
  const uint64_t n = count;
  Put(&t, 4);
  Put(&n, 8);
  Put(data, count * GgufScalarSize(elem));
}

void GgufWriter::SetStringArray(std::string_view key, const std::vector<std::string>& values) {
  if (!StartKey(key, GgufType::kArray)) return;
  const uint32_t t = static_cast<uint32_t>(GgufType::kString);
  const uint64_t n = values.size();
  Put(&t, 4);
  Put(&n, 8);
  for (const std::string& v : values) PutString(v);
}

void GgufWriter::PutValueBody(const GgufValue& v) {
  if (v.type == GgufType::kString) return PutString(v.str);
  if (v.type != GgufType::kArray) return Put(&v.bits, GgufScalarSize(v.type));  // little-endian host
  const uint32_t t = static_cast<uint32_t>(v.elem_type);
  const uint64_t n = v.count;
  Put(&t, 4);
  Put(&n, 8);
  if (v.elem_type == GgufType::kString) {
    for (std::string_view s : v.strings) PutString(s);
  } else if (v.elem_type == GgufType::kArray) {
    for (const GgufValue& a : v.arrays) PutValueBody(a);
  } else if (n > 0) {
    Put(v.elems, n * GgufScalarSize(v.elem_type));
  }
}

void GgufWriter::CopyValue(std::string_view key, const GgufValue& v) {
  if (StartKey(key, v.type)) PutValueBody(v);
}

void GgufWriter::SetAlignment(uint32_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    if (error_.ok()) error_ = InvalidArgument("GGUF writer: alignment " + std::to_string(alignment) + " is not a power of two");
    return;
  }
  alignment_ = alignment;
  SetUint32("general.alignment", alignment);
}

void GgufWriter::AddTensor(std::string name, WeightType type, std::vector<uint64_t> ne) {
  const WeightFormat& f = GetWeightFormat(type);
  if (ne.empty() || ne.size() > kGgufMaxDims || ne[0] == 0 || ne[0] % f.block != 0 || f.quantize == nullptr) {
    if (error_.ok()) {
      error_ = InvalidArgument("GGUF writer: tensor '" + name + "' of type " + f.ggml_name + " has shape " +
                               FormatDims(ne.data(), static_cast<int>(ne.size())) + " (1..4 dims; rows a multiple of " +
                               std::to_string(f.block) + ")" +
                               (f.quantize == nullptr ? std::string("; kvedge cannot write this type") : ""));
    }
    return;
  }
  uint64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  const uint64_t offset = (data_bytes_ + alignment_ - 1) / alignment_ * alignment_;
  data_bytes_ = offset + rows * WeightRowBytes(type, ne[0]);
  tensors_.push_back({std::move(name), type, std::move(ne), rows, offset});
}

Status GgufWriter::WriteBytes(const void* p, size_t n) {
  if (n != 0 && std::fwrite(p, 1, n, out_) != n) {
    return IoError("cannot write '" + path_ + "' at offset " + std::to_string(written_) + ": " + std::strerror(errno));
  }
  written_ += n;
  return OkStatus();
}

Status GgufWriter::Pad() {
  static const uint8_t kZeros[256] = {};
  uint64_t pad = (alignment_ - written_ % alignment_) % alignment_;
  while (pad > 0) {
    const size_t n = pad < sizeof(kZeros) ? pad : sizeof(kZeros);
    KVEDGE_RETURN_IF_ERROR(WriteBytes(kZeros, n));
    pad -= n;
  }
  return OkStatus();
}

Status GgufWriter::Begin(const std::string& path) {
  KVEDGE_RETURN_IF_ERROR(error_);
  if (out_ != nullptr) return FailedPrecondition("GGUF writer: Begin called twice");
  path_ = path;
  out_ = std::fopen(path.c_str(), "wb");
  if (out_ == nullptr) return IoError("cannot create '" + path + "': " + std::strerror(errno));
  const uint32_t header[2] = {kGgufMagic, 3};
  const uint64_t counts[2] = {tensors_.size(), n_kv_};
  KVEDGE_RETURN_IF_ERROR(WriteBytes(header, sizeof(header)));
  KVEDGE_RETURN_IF_ERROR(WriteBytes(counts, sizeof(counts)));
  KVEDGE_RETURN_IF_ERROR(WriteBytes(meta_.data(), meta_.size()));
  std::string info;
  for (const Tensor& t : tensors_) {
    const uint64_t len = t.name.size();
    const uint32_t n_dims = static_cast<uint32_t>(t.ne.size());
    const uint32_t type = GgmlTypeOf(t.type);
    info.append(reinterpret_cast<const char*>(&len), 8).append(t.name);
    info.append(reinterpret_cast<const char*>(&n_dims), 4);
    info.append(reinterpret_cast<const char*>(t.ne.data()), 8 * t.ne.size());
    info.append(reinterpret_cast<const char*>(&type), 4);
    info.append(reinterpret_cast<const char*>(&t.offset), 8);
  }
  KVEDGE_RETURN_IF_ERROR(WriteBytes(info.data(), info.size()));
  KVEDGE_RETURN_IF_ERROR(Pad());
  return OkStatus();
}

// Rows [rows_done_, rows_done_ + n) of the current tensor are at `bytes`.
Status GgufWriter::CommitRows(const void* bytes, uint64_t n) {
  KVEDGE_RETURN_IF_ERROR(WriteBytes(bytes, n * WeightRowBytes(tensors_[current_].type, tensors_[current_].ne[0])));
  rows_done_ += n;
  if (rows_done_ == tensors_[current_].rows) {
    ++current_;
    rows_done_ = 0;
    if (current_ < tensors_.size()) KVEDGE_RETURN_IF_ERROR(Pad());
  }
  return OkStatus();
}

Status GgufWriter::WriteRows(const float* rows, uint64_t n_rows) {
  if (out_ == nullptr) return FailedPrecondition("GGUF writer: WriteRows before Begin");
  while (n_rows > 0) {
    if (current_ >= tensors_.size()) {
      return FailedPrecondition("GGUF writer: more rows than the declared tensors hold ('" + path_ + "')");
    }
    const Tensor& t = tensors_[current_];
    const uint64_t cols = t.ne[0];
    const uint64_t row_bytes = WeightRowBytes(t.type, cols);
    const uint64_t n = std::min(n_rows, t.rows - rows_done_);
    scratch_.resize(n * row_bytes);
    for (uint64_t r = 0; r < n; ++r) {
      GetWeightFormat(t.type).quantize(rows + r * cols, scratch_.data() + r * row_bytes, cols);
    }
    KVEDGE_RETURN_IF_ERROR(CommitRows(scratch_.data(), n));
    rows += n * cols;
    n_rows -= n;
  }
  return OkStatus();
}

Status GgufWriter::WriteRawRows(const void* data, uint64_t n_rows) {
  if (out_ == nullptr) return FailedPrecondition("GGUF writer: WriteRawRows before Begin");
  const auto* p = static_cast<const uint8_t*>(data);
  while (n_rows > 0) {
    if (current_ >= tensors_.size()) {
      return FailedPrecondition("GGUF writer: more rows than the declared tensors hold ('" + path_ + "')");
    }
    const Tensor& t = tensors_[current_];
    const uint64_t n = std::min(n_rows, t.rows - rows_done_);
    const uint64_t bytes = n * WeightRowBytes(t.type, t.ne[0]);
    KVEDGE_RETURN_IF_ERROR(CommitRows(p, n));
    p += bytes;
    n_rows -= n;
  }
  return OkStatus();
}

Status GgufWriter::Finish() {
  if (out_ == nullptr) return FailedPrecondition("GGUF writer: Finish before Begin");
  if (current_ != tensors_.size()) {
    return FailedPrecondition("GGUF writer: tensor '" + tensors_[current_].name + "' is incomplete (" +
                              std::to_string(rows_done_) + " of " + std::to_string(tensors_[current_].rows) +
                              " rows written)");
  }
  const int rc = std::fclose(out_);
  out_ = nullptr;
  if (rc != 0) return IoError("cannot close '" + path_ + "': " + std::strerror(errno));
  return OkStatus();
}

}  // namespace kvedge
