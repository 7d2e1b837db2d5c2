// llama-quantize's per-tensor type choice (llama-quant.cpp,
// llama_tensor_get_type, no importance matrix, non-MoE) for the presets
// kvedge writes, and the re-encoding of a GGUF file with it.
#include "runtime/model/gguf_quantize.h"

#include <cstring>
#include <vector>

#include "runtime/model/gguf_writer.h"

namespace kvedge {
namespace {

constexpr QuantizePreset kPresets[] = {
    {"Q4_K_M", 15, WeightType::kQ4_K}, {"Q5_K_M", 17, WeightType::kQ5_K}, {"Q6_K", 18, WeightType::kQ6_K},
    {"Q8_0", 7, WeightType::kQ8_0},    {"Q4_0", 2, WeightType::kQ4_0},    {"Q3_K_M", 12, WeightType::kQ3_K},
    {"Q2_K", 10, WeightType::kQ2_K},   {"IQ4_NL", 25, WeightType::kIQ4_NL}, {"IQ4_XS", 30, WeightType::kIQ4_XS},
};

bool Is(const QuantizePreset& p, const char* name) { return std::strcmp(p.name, name) == 0; }
bool Has(std::string_view name, std::string_view part) { return name.find(part) != std::string_view::npos; }

// llama.cpp's use_more_bits: the first and last eighth of the layers and
// every third one between get more bits.
bool UseMoreBits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The block of "blk.N.…", or −1.
int LayerOf(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  int n = 0;
  size_t i = 4;
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) n = n * 10 + (name[i] - '0');
  return n;
}

}  // namespace

const QuantizePreset* FindQuantizePreset(std::string_view name) {
  for (const QuantizePreset& p : kPresets) {
    if (name.size() != std::strlen(p.name)) continue;
    bool same = true;
    for (size_t i = 0; i < name.size(); ++i) same &= std::toupper(static_cast<unsigned char>(name[i])) == p.name[i];
    if (same) return &p;
  }
  return nullptr;
}

std::string QuantizePresetNames() {
  std::string s;
  for (const QuantizePreset& p : kPresets) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

WeightType ChooseTensorType(const QuantizePreset& p, std::string_view name, uint64_t cols, int layer, int n_layers,
                            int gqa) {
  WeightType t = p.base;
  if (name == "output.weight") {
    if (t != WeightType::kQ8_0) t = WeightType::kQ6_K;
  } else if (Has(name, "attn_v.weight")) {
    if (Is(p, "Q2_K")) {
      t = gqa >= 4 ? WeightType::kQ4_K : WeightType::kQ3_K;
    } else if (Is(p, "Q3_K_M")) {
      t = layer < 2 ? WeightType::kQ5_K : WeightType::kQ4_K;
    } else if ((Is(p, "IQ4_NL") || Is(p, "IQ4_XS")) && gqa >= 4) {
      t = WeightType::kQ5_K;
    } else if ((Is(p, "Q4_K_M") || Is(p, "Q5_K_M")) && UseMoreBits(layer, n_layers)) {
      t = WeightType::kQ6_K;
    }
  } else if (Has(name, "ffn_down")) {
    if (Is(p, "Q2_K")) {
      t = WeightType::kQ3_K;
    } else if (Is(p, "Q3_K_M")) {
      t = layer < n_layers / 16 ? WeightType::kQ5_K : WeightType::kQ4_K;
    } else if (Is(p, "Q4_K_M") || Is(p, "Q5_K_M")) {
      if (UseMoreBits(layer, n_layers)) t = WeightType::kQ6_K;
    } else if (layer < n_layers / 8 && (Is(p, "IQ4_NL") || Is(p, "IQ4_XS"))) {
      t = WeightType::kQ5_K;
    }
  } else if (Has(name, "attn_output.weight")) {
    if (Is(p, "Q2_K")) t = WeightType::kQ3_K;
    else if (Is(p, "Q3_K_M")) t = WeightType::kQ4_K;
  }
  // Rows that are not whole super-blocks fall back as llama.cpp does.
  if (cols % WeightBlockSize(t) != 0) {
    switch (t) {
      case WeightType::kQ2_K: case WeightType::kQ3_K: case WeightType::kIQ4_XS: t = WeightType::kIQ4_NL; break;
      case WeightType::kQ4_K: t = WeightType::kQ5_0; break;
      case WeightType::kQ5_K: t = WeightType::kQ5_1; break;
      case WeightType::kQ6_K: t = WeightType::kQ8_0; break;
      default: break;
    }
    if (cols % WeightBlockSize(t) != 0) t = WeightType::kF16;
  }
  return t;
}

Status QuantizeGguf(const GgufFile& in, const std::string& out_path, const QuantizePreset& p,
                    const std::function<void(const QuantizeProgress&)>& progress) {
  const GgufValue* arch = in.Find("general.architecture");
  const std::string prefix = arch != nullptr && arch->type == GgufType::kString ? std::string(arch->str) + "." : "";
  const auto get_int = [&](const std::string& key, int64_t fallback) {
    const GgufValue* v = in.Find(key);
    const auto i = v != nullptr ? v->AsInt() : std::nullopt;
    return i && *i > 0 ? *i : fallback;
  };
  const int64_t n_layers = get_int(prefix + "block_count", 1);
  const int64_t heads = get_int(prefix + "attention.head_count", 1);
  const int gqa = static_cast<int>(heads / get_int(prefix + "attention.head_count_kv", heads));

  GgufWriter w;
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.file_type" || key == "general.quantization_version") continue;
    if (key == "general.alignment") {
      const auto a = value.AsInt();
      w.SetAlignment(a ? static_cast<uint32_t>(*a) : kGgufDefaultAlignment);
      continue;
    }
    w.CopyValue(key, value);
  }
  w.SetUint32("general.file_type", p.ftype);
  w.SetUint32("general.quantization_version", 2);

  // The type of every tensor first (the header lists them all).
  const std::vector<GgufTensorInfo>& tensors = in.tensors();
  std::vector<WeightType> types(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& t = tensors[i];
    const WeightFormat* from = FindGgmlType(t.type)->format;
    if (from == nullptr) {
      return Unsupported(in.name() + ": tensor '" + std::string(t.name) + "' has type " + FindGgmlType(t.type)->name +
                         "; kvedge quantize reads " + ReadableWeightTypes());
    }
    const bool matrix = t.n_dims >= 2 && t.name.size() >= 6 && t.name.substr(t.name.size() - 6) == "weight";
    types[i] = matrix ? ChooseTensorType(p, t.name, t.ne[0], LayerOf(t.name), static_cast<int>(n_layers), gqa)
                      : from->type;
    w.AddTensor(std::string(t.name), types[i], std::vector<uint64_t>(t.ne, t.ne + t.n_dims));
  }
  KVEDGE_RETURN_IF_ERROR(w.Begin(out_path));
  std::vector<float> row;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& t = tensors[i];
    const WeightFormat& from = *FindGgmlType(t.type)->format;
    const uint64_t cols = t.ne[0], rows = t.n_elements / cols;
    if (progress) {
      progress({static_cast<int>(i), static_cast<int>(tensors.size()), t.name, from.ggml_name,
                GetWeightFormat(types[i]).ggml_name, rows, cols,
                from.type != types[i] && from.kernel != WeightKernel::kFloat});
    }
    if (from.type == types[i]) {
      KVEDGE_RETURN_IF_ERROR(w.WriteRawRows(t.data, rows));
      continue;
    }
    row.resize(cols);
    const size_t row_bytes = WeightRowBytes(from.type, cols);
    for (uint64_t r = 0; r < rows; ++r) {
      from.dequantize(t.data + r * row_bytes, row.data(), cols);
      KVEDGE_RETURN_IF_ERROR(w.WriteRows(row.data(), 1));
    }
  }
  return w.Finish();
}

}  // namespace kvedge
