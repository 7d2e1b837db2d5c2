// Model loading: format detection, GGUF llama metadata and tensor mapping.
#include "runtime/model/model_loader.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "platform/thread_arena.h"
#include "runtime/model/llama2c.h"
#include "simd/weight_quant.h"

namespace kvedge {
namespace {

// Reads an integer metadata key into 1..INT_MAX. `fallback` < 0 means required.
StatusOr<int> GetInt(const GgufFile& g, const std::string& key, int fallback) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr) {
    if (fallback >= 0) return fallback;
    return DataLoss(g.name() + ": missing metadata key '" + key + "'");
  }
  const auto i = v->AsInt();
  if (!i) {
    return DataLoss(g.name() + ": metadata '" + key + "' has type " + GgufTypeName(v->type) +
                    ", expected an integer");
  }
  if (*i <= 0 || *i > INT_MAX) {
    return DataLoss(g.name() + ": metadata '" + key + "' = " + std::to_string(*i) + " is out of range");
  }
  return static_cast<int>(*i);
}

StatusOr<float> GetFloat(const GgufFile& g, const std::string& key, float fallback, bool required) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr) {
    if (!required) return fallback;
    return DataLoss(g.name() + ": missing metadata key '" + key + "'");
  }
  const auto f = v->AsFloat();
  if (!f) {
    return DataLoss(g.name() + ": metadata '" + key + "' has type " + GgufTypeName(v->type) + ", expected a float");
  }
  return static_cast<float>(*f);
}

std::string TensorWhere(const GgufFile& g, const GgufTensorInfo& t) {
  return g.name() + ": tensor '" + std::string(t.name) + "' (#" + std::to_string(t.index) + ")";
}

StatusOr<const GgufTensorInfo*> FindShaped(const GgufFile& g, const std::string& name, uint64_t ne0, uint64_t ne1,
                                           int n_dims) {
  const GgufTensorInfo* t = g.FindTensor(name);
  const uint64_t expected[kGgufMaxDims] = {ne0, ne1, 1, 1};
  if (t == nullptr) {
    return DataLoss(g.name() + ": missing tensor '" + name + "' (expected shape " + FormatDims(expected, n_dims) + ")");
  }
  // Trailing dimensions of 1 are harmless (some writers keep them).
  bool match = t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == 1 && t->ne[3] == 1;
  if (!match) {
    return DataLoss(TensorWhere(g, *t) + " has shape " + FormatDims(t->ne, t->n_dims) + ", expected " +
                    FormatDims(expected, n_dims) + " from the model's metadata");
  }
  return t;
}

StatusOr<MatrixView> Matrix(const GgufFile& g, const std::string& name, uint64_t rows, uint64_t cols,
                            uint64_t* bytes) {
  KVEDGE_ASSIGN_OR_RETURN(const GgufTensorInfo* t, FindShaped(g, name, cols, rows, 2));
  const WeightFormat* format = FindGgmlType(t->type)->format;
  if (format == nullptr) {
    return Unsupported(TensorWhere(g, *t) + " has type " + FindGgmlType(t->type)->name +
                       "; kvedge reads matrices of type " + ReadableWeightTypes());
  }
  MatrixView m;
  m.type = format->type;
  // Float elements are read whole; blocks hold f16 fields at even offsets.
  const size_t align = format->block == 1 ? format->block_bytes : 2;
  if (reinterpret_cast<uintptr_t>(t->data) % align != 0) {
    return DataLoss(TensorWhere(g, *t) + " data is not " + std::to_string(align) + "-byte aligned (general.alignment " +
                    std::to_string(g.alignment()) + ")");
  }
  m.data = t->data;
  m.rows = rows;
  m.cols = cols;
  *bytes += t->n_bytes;
  return m;
}

// A norm vector as f32: in place when stored as aligned F32, else converted
// into an owned buffer.
StatusOr<const float*> Vector(const GgufFile& g, const std::string& name, uint64_t n, ModelWeights* w) {
  KVEDGE_ASSIGN_OR_RETURN(const GgufTensorInfo* t, FindShaped(g, name, n, 1, 1));
  w->weight_bytes += t->n_bytes;
  const WeightFormat* format = FindGgmlType(t->type)->format;
  if (format == nullptr || format->kernel != WeightKernel::kFloat) {
    return Unsupported(TensorWhere(g, *t) + " has type " + FindGgmlType(t->type)->name +
                       "; kvedge reads norm vectors of type F32, F16 or BF16");
  }
  if (format->type == WeightType::kF32 && reinterpret_cast<uintptr_t>(t->data) % alignof(float) == 0) {
    return reinterpret_cast<const float*>(t->data);
  }
  KVEDGE_ASSIGN_OR_RETURN(AlignedBuffer buf, AlignedBuffer::Allocate(n * sizeof(float), "norm weights"));
  float* out = buf.as<float>();
  DequantizeRow(format->type, t->data, out, n);
  w->owned.push_back(std::move(buf));
  return static_cast<const float*>(out);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

StatusOr<std::unique_ptr<ModelWeights>> LoadBytes(const uint8_t* data, size_t size, const std::string& name) {
  if (size < 4) {
    return DataLoss(name + ": " + std::to_string(size) + " bytes is too small for a model file");
  }
  uint32_t magic;
  std::memcpy(&magic, data, 4);
  if (magic == kGgufMagic) {
    KVEDGE_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Parse(data, size, name));
    KVEDGE_ASSIGN_OR_RETURN(std::unique_ptr<ModelWeights> w, LoadGgufModel(gguf));
    w->gguf = std::make_unique<const GgufFile>(std::move(gguf));  // its views point into `data`, not into itself
    return w;
  }
  if (std::memcmp(data, "ak42", 4) == 0 || std::memcmp(data, "24ka", 4) == 0) {
    return Unsupported(name + ": llama2.c export version 1/2 (magic 'ak42') is not supported; export the "
                              "checkpoint with --version 0 (the legacy format) or convert it to GGUF");
  }
  if (std::memcmp(data, "lmgg", 4) == 0 || std::memcmp(data, "tjgg", 4) == 0 || std::memcmp(data, "fmgg", 4) == 0) {
    return Unsupported(name + ": pre-GGUF ggml file (GGML/GGJT/GGMF); convert it to GGUF with llama.cpp");
  }
  KVEDGE_ASSIGN_OR_RETURN(std::unique_ptr<ModelWeights> w, ReadLlama2c(data, size, name));
  w->config.name = BaseName(name);
  return w;
}

// What llama.cpp hard-codes per architecture; everything else is metadata.
struct ArchTraits {
  const char* name;
  RopeStyle rope_style;
  FfnActivation ffn;
  bool fused_qkv;        // attn_qkv.weight rows: Q, then K, then V (phi3)
  bool fused_gate_up;    // ffn_up.weight rows: gate, then up (phi3)
  bool embedding_scale;  // embeddings × √dim (gemma)
  bool post_norms;       // post_attention_norm, post_ffw_norm (gemma2)
  bool tied_output;      // output.weight never read (gemma)
  bool sliding_window;   // reads attention.sliding_window
  int swa_period;        // KvShape::Windowed pattern (gemma2: even layers)
  bool softcaps;         // attn/final logit soft-capping (gemma2)
};
constexpr ArchTraits kArchitectures[] = {
    {"llama", RopeStyle::kNorm, FfnActivation::kSilu, false, false, false, false, false, true, 1, false},
    {"qwen2", RopeStyle::kNeox, FfnActivation::kSilu, false, false, false, false, false, false, 1, false},
    {"phi3", RopeStyle::kNeox, FfnActivation::kSilu, true, true, false, false, false, true, 1, false},
    {"gemma", RopeStyle::kNeox, FfnActivation::kGeluTanh, false, false, true, false, true, false, 1, false},
    {"gemma2", RopeStyle::kNeox, FfnActivation::kGeluTanh, false, false, true, true, true, true, 2, true},
};

// Rows [begin, begin + rows) of a row-major matrix, in place.
MatrixView RowSlice(const MatrixView& m, size_t begin, size_t rows) {
  MatrixView s = m;
  s.data = static_cast<const uint8_t*>(m.data) + begin * WeightRowBytes(m.type, m.cols);
  s.rows = rows;
  return s;
}

// An optional vector: null when absent, else as Vector.
StatusOr<const float*> OptionalVector(const GgufFile& g, const std::string& name, uint64_t n, ModelWeights* w) {
  if (g.FindTensor(name) == nullptr) return static_cast<const float*>(nullptr);
  return Vector(g, name, n, w);
}

// A frequency-factor vector: optional, every entry finite and positive.
StatusOr<const float*> FactorVector(const GgufFile& g, const std::string& name, uint64_t n, ModelWeights* w) {
  KVEDGE_ASSIGN_OR_RETURN(const float* f, OptionalVector(g, name, n, w));
  for (uint64_t i = 0; f != nullptr && i < n; ++i) {
    if (!std::isfinite(f[i]) || f[i] <= 0.0f) {
      return DataLoss(g.name() + ": tensor '" + name + "' entry " + std::to_string(i) + " = " + std::to_string(f[i]) +
                      " is not a positive frequency factor");
    }
  }
  return f;
}

StatusOr<std::string> GetString(const GgufFile& g, const std::string& key) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr) return std::string();
  if (v->type != GgufType::kString) {
    return DataLoss(g.name() + ": metadata '" + key + "' has type " + GgufTypeName(v->type) + ", expected a string");
  }
  return std::string(v->str.substr(0, 64));
}

}  // namespace

StatusOr<std::unique_ptr<ModelWeights>> LoadGgufModel(const GgufFile& g) {
  const std::string& file = g.name();
  const GgufValue* arch = g.Find("general.architecture");
  if (arch == nullptr || arch->type != GgufType::kString) {
    return DataLoss(file + ": missing string metadata 'general.architecture'");
  }
  const ArchTraits* traits = nullptr;
  for (const ArchTraits& a : kArchitectures) {
    if (arch->str == a.name) traits = &a;
  }
  if (traits == nullptr) {
    return Unsupported(file + ": architecture '" + std::string(arch->str.substr(0, 64)) +
                       "' is not supported (kvedge runs llama, qwen2, phi3, gemma, gemma2)");
  }
  auto w = std::make_unique<ModelWeights>();
  ModelConfig& c = w->config;
  c.architecture = traits->name;
  const std::string a = std::string(traits->name) + ".";
  const GgufValue* gname = g.Find("general.name");
  c.name = gname != nullptr && gname->type == GgufType::kString ? std::string(gname->str) : BaseName(file);
  KVEDGE_ASSIGN_OR_RETURN(c.context_length, GetInt(g, a + "context_length", -1));
  KVEDGE_ASSIGN_OR_RETURN(c.dim, GetInt(g, a + "embedding_length", -1));
  KVEDGE_ASSIGN_OR_RETURN(c.n_layers, GetInt(g, a + "block_count", -1));
  KVEDGE_ASSIGN_OR_RETURN(c.hidden_dim, GetInt(g, a + "feed_forward_length", -1));
  KVEDGE_ASSIGN_OR_RETURN(c.n_heads, GetInt(g, a + "attention.head_count", -1));
  KVEDGE_ASSIGN_OR_RETURN(c.n_kv_heads, GetInt(g, a + "attention.head_count_kv", c.n_heads));
  if (c.dim % c.n_heads != 0 && g.Find(a + "attention.key_length") == nullptr) {
    return DataLoss(file + ": embedding_length " + std::to_string(c.dim) + " is not a multiple of head_count " +
                    std::to_string(c.n_heads) + " and '" + a + "attention.key_length' is missing");
  }
  KVEDGE_ASSIGN_OR_RETURN(c.head_dim, GetInt(g, a + "attention.key_length", c.dim / c.n_heads));
  KVEDGE_ASSIGN_OR_RETURN(const int value_length, GetInt(g, a + "attention.value_length", c.head_dim));
  if (value_length != c.head_dim) {
    return Unsupported(file + ": attention.value_length " + std::to_string(value_length) + " differs from key_length " +
                       std::to_string(c.head_dim) + "; kvedge's cache holds keys and values of one head size");
  }
  KVEDGE_ASSIGN_OR_RETURN(c.rope_dim, GetInt(g, a + "rope.dimension_count", c.head_dim));
  KVEDGE_ASSIGN_OR_RETURN(c.rope_theta, GetFloat(g, a + "rope.freq_base", 10000.0f, false));
  KVEDGE_ASSIGN_OR_RETURN(c.rms_eps, GetFloat(g, a + "attention.layer_norm_rms_epsilon", 0.0f, true));
  c.rope_style = traits->rope_style;
  c.ffn_activation = traits->ffn;
  KVEDGE_ASSIGN_OR_RETURN(const std::string scaling, GetString(g, a + "rope.scaling.type"));
  if (scaling == "linear") {
    c.rope_scaling = RopeScaling::kLinear;
  } else if (scaling == "yarn") {
    c.rope_scaling = RopeScaling::kYarn;
  } else if (!scaling.empty() && scaling != "none" && !(scaling == "llama3" && g.FindTensor("rope_freqs.weight"))) {
    // "llama3" is carried by rope_freqs.weight alone (as llama.cpp reads it).
    return Unsupported(file + ": rope.scaling.type '" + scaling + "' is not supported (none, linear, yarn; llama3 "
                       "with rope_freqs.weight)");
  }
  KVEDGE_ASSIGN_OR_RETURN(c.rope_scaling_factor, GetFloat(g, a + "rope.scaling.factor", 1.0f, false));
  KVEDGE_ASSIGN_OR_RETURN(c.rope_original_context, GetInt(g, a + "rope.scaling.original_context_length", 0));
  KVEDGE_ASSIGN_OR_RETURN(c.rope_attn_factor, GetFloat(g, a + "rope.scaling.attn_factor", 1.0f, false));
  if (traits->embedding_scale) c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
  if (traits->sliding_window) {
    // gemma2 without the key: llama.cpp's default of 4096.
    KVEDGE_ASSIGN_OR_RETURN(c.sliding_window,
                            GetInt(g, a + "attention.sliding_window", traits->swa_period > 1 ? 4096 : 0));
    c.swa_period = traits->swa_period;
  }
  if (traits->softcaps) {
    KVEDGE_ASSIGN_OR_RETURN(c.attn_softcap, GetFloat(g, a + "attn_logit_softcapping", 50.0f, false));
    KVEDGE_ASSIGN_OR_RETURN(c.final_softcap, GetFloat(g, a + "final_logit_softcapping", 30.0f, false));
    // gemma2 27B (46 layers) scales queries by 1/sqrt(dim/heads), the others
    // by 1/sqrt(head_dim): llama.cpp picks by model size (no GGUF key).
    if (c.n_layers == 46) c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.dim / c.n_heads));
  }
  const GgufTensorInfo* embd = g.FindTensor("token_embd.weight");
  if (const GgufValue* tokens = g.Find("tokenizer.ggml.tokens")) {
    if (tokens->type != GgufType::kArray || tokens->elem_type != GgufType::kString) {
      return DataLoss(file + ": metadata 'tokenizer.ggml.tokens' is not an array of strings");
    }
    c.vocab_size = tokens->count > INT_MAX ? INT_MAX : static_cast<int>(tokens->count);
  } else if (embd != nullptr) {
    c.vocab_size = embd->ne[1] > INT_MAX ? INT_MAX : static_cast<int>(embd->ne[1]);
  }
  KVEDGE_RETURN_IF_ERROR(ValidateConfig(c, file));

  const uint64_t D = c.dim, H = c.hidden_dim, V = c.vocab_size;
  const uint64_t Q = static_cast<uint64_t>(c.n_heads) * c.head_dim;
  const uint64_t KV = static_cast<uint64_t>(c.n_kv_heads) * c.head_dim;
  uint64_t& bytes = w->weight_bytes;
  KVEDGE_ASSIGN_OR_RETURN(w->token_embedding, Matrix(g, "token_embd.weight", V, D, &bytes));
  const uint64_t pairs = static_cast<uint64_t>(c.rope_dim / 2);
  KVEDGE_ASSIGN_OR_RETURN(w->rope_freqs, FactorVector(g, "rope_freqs.weight", pairs, w.get()));
  KVEDGE_ASSIGN_OR_RETURN(w->rope_factors_short, FactorVector(g, "rope_factors_short.weight", pairs, w.get()));
  KVEDGE_ASSIGN_OR_RETURN(w->rope_factors_long, FactorVector(g, "rope_factors_long.weight", pairs, w.get()));
  w->layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights& lw = w->layers[l];
    const std::string p = "blk." + std::to_string(l) + ".";
    KVEDGE_ASSIGN_OR_RETURN(lw.attn_norm, Vector(g, p + "attn_norm.weight", D, w.get()));
    if (traits->fused_qkv) {
      KVEDGE_ASSIGN_OR_RETURN(const MatrixView qkv, Matrix(g, p + "attn_qkv.weight", Q + 2 * KV, D, &bytes));
      lw.wq = RowSlice(qkv, 0, Q);
      lw.wk = RowSlice(qkv, Q, KV);
      lw.wv = RowSlice(qkv, Q + KV, KV);
    } else {
      KVEDGE_ASSIGN_OR_RETURN(lw.wq, Matrix(g, p + "attn_q.weight", Q, D, &bytes));
      KVEDGE_ASSIGN_OR_RETURN(lw.wk, Matrix(g, p + "attn_k.weight", KV, D, &bytes));
      KVEDGE_ASSIGN_OR_RETURN(lw.wv, Matrix(g, p + "attn_v.weight", KV, D, &bytes));
    }
    KVEDGE_ASSIGN_OR_RETURN(lw.bq, OptionalVector(g, p + "attn_q.bias", Q, w.get()));
    KVEDGE_ASSIGN_OR_RETURN(lw.bk, OptionalVector(g, p + "attn_k.bias", KV, w.get()));
    KVEDGE_ASSIGN_OR_RETURN(lw.bv, OptionalVector(g, p + "attn_v.bias", KV, w.get()));
    KVEDGE_ASSIGN_OR_RETURN(lw.wo, Matrix(g, p + "attn_output.weight", D, Q, &bytes));
    KVEDGE_ASSIGN_OR_RETURN(lw.ffn_norm, Vector(g, p + "ffn_norm.weight", D, w.get()));
    if (traits->fused_gate_up) {
      KVEDGE_ASSIGN_OR_RETURN(const MatrixView gate_up, Matrix(g, p + "ffn_up.weight", 2 * H, D, &bytes));
      lw.w1 = RowSlice(gate_up, 0, H);
      lw.w3 = RowSlice(gate_up, H, H);
    } else {
      KVEDGE_ASSIGN_OR_RETURN(lw.w1, Matrix(g, p + "ffn_gate.weight", H, D, &bytes));
      KVEDGE_ASSIGN_OR_RETURN(lw.w3, Matrix(g, p + "ffn_up.weight", H, D, &bytes));
    }
    KVEDGE_ASSIGN_OR_RETURN(lw.w2, Matrix(g, p + "ffn_down.weight", D, H, &bytes));
    if (traits->post_norms) {
      KVEDGE_ASSIGN_OR_RETURN(lw.post_attn_norm, Vector(g, p + "post_attention_norm.weight", D, w.get()));
      KVEDGE_ASSIGN_OR_RETURN(lw.post_ffn_norm, Vector(g, p + "post_ffw_norm.weight", D, w.get()));
    }
  }
  KVEDGE_ASSIGN_OR_RETURN(w->final_norm, Vector(g, "output_norm.weight", D, w.get()));
  if (!traits->tied_output && g.FindTensor("output.weight") != nullptr) {
    KVEDGE_ASSIGN_OR_RETURN(w->output, Matrix(g, "output.weight", V, D, &bytes));
  } else {
    w->output = w->token_embedding;  // tied embeddings
  }
  w->format = "gguf";
  w->source = g.data();
  w->source_size = g.size();
  return w;
}

StatusOr<std::unique_ptr<ModelWeights>> LoadModelFromMemory(const uint8_t* data, size_t size,
                                                            const std::string& name) {
  return LoadBytes(data, size, name);
}

Status InterleaveWeights(ModelWeights* w, int threads) {
  std::vector<MatrixView*> matrices = {&w->output};
  for (LayerWeights& l : w->layers) {
    for (MatrixView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w3, &l.w2}) matrices.push_back(m);
  }
  std::erase_if(matrices, [](const MatrixView* m) {
    return !IsInterleavable(m->type) || m->layout != WeightLayout::kRows;
  });
  // One allocation for all copies (group sizes are 64-byte multiples): one
  // huge-page mapping, no allocator overhead per matrix.
  size_t total = 0;
  for (const MatrixView* m : matrices) total += MatrixBytes(m->type, WeightLayout::kInterleaved16, m->rows, m->cols);
  if (total == 0) return OkStatus();
  KVEDGE_ASSIGN_OR_RETURN(AlignedBuffer buf, AlignedBuffer::AllocatePages(total, "interleaved weights"));
  // Every matrix in slices of ~1 MiB, each slice's source pages dropped
  // right after it is copied, so the resident set never holds a matrix
  // twice (at most one slice per thread). The slices run on the threads in
  // any order; most of a copy's time is the first touch of its fresh pages.
  struct Slice {
    const MatrixView* m;
    size_t group_begin, group_end;
    uint8_t* dst;  // the matrix's copy
  };
  std::vector<Slice> slices;
  std::vector<uint8_t*> dsts;
  uint8_t* dst = buf.data();
  for (const MatrixView* m : matrices) {
    const size_t groups = InterleavedGroups(m->rows);
    const size_t row_bytes = WeightRowBytes(m->type, m->cols);
    const size_t slice = std::max<size_t>(1, (size_t{1} << 20) / (kInterleaveRows * row_bytes));  // groups
    for (size_t g = 0; g < groups; g += slice) slices.push_back({m, g, std::min(groups, g + slice), dst});
    dsts.push_back(dst);
    dst += MatrixBytes(m->type, WeightLayout::kInterleaved16, m->rows, m->cols);
  }
  KVEDGE_ASSIGN_OR_RETURN(std::unique_ptr<ThreadArena> arena,
                          ThreadArena::Create(std::clamp(threads > 0 ? threads : HardwareThreads(), 1,
                                                         static_cast<int>(std::min<size_t>(slices.size(), kMaxThreads)))));
  arena->ParallelForEach(slices.size(), [&](size_t i, int /*thread*/) {
    const Slice& s = slices[i];
    InterleaveGroups(*s.m, s.group_begin, s.group_end, s.dst);
    // Only the whole pages inside the slice's rows: a page shared with the
    // next slice stays until the matrix is retired below.
    const size_t row_bytes = WeightRowBytes(s.m->type, s.m->cols);
    const auto* src = static_cast<const uint8_t*>(s.m->data);
    const size_t src_begin = s.group_begin * kInterleaveRows * row_bytes;
    const size_t src_end = std::min(s.group_end * kInterleaveRows, s.m->rows) * row_bytes;
    if (w->file.data() != nullptr) w->file.DropPages(src + src_begin, src_end - src_begin);
  });
  for (size_t i = 0; i < matrices.size(); ++i) {
    MatrixView* m = matrices[i];
    // Then the whole pages of a matrix read only through its copy are
    // retired: decode reads the norms and the rows-layout tensors beside
    // them, and each such fault would map a window of their cached
    // neighbours back in (42 MB of Q4_K_M's Q4_K source pages). Tied
    // embeddings keep their mapped rows for the token lookup, which touches
    // only the pages of the tokens it reads.
    if (w->file.data() != nullptr) {
      const auto* src = static_cast<const uint8_t*>(m->data);
      const size_t row_bytes = WeightRowBytes(m->type, m->cols);
      const auto* embd = static_cast<const uint8_t*>(w->token_embedding.data);
      const size_t embd_bytes = embd == nullptr ? 0 : w->token_embedding.rows * WeightRowBytes(w->token_embedding.type,
                                                                                             w->token_embedding.cols);
      const bool tied = embd != nullptr && src < embd + embd_bytes && embd < src + m->rows * row_bytes;
      if (tied) {
        w->file.DropPages(src, m->rows * row_bytes);
      } else {
        w->file.RetirePages(src, m->rows * row_bytes);
      }
    }
    *m = InterleavedView(*m, dsts[i]);
  }
  w->owned.push_back(std::move(buf));
  return OkStatus();
}

StatusOr<std::unique_ptr<ModelWeights>> LoadModel(const std::string& path, const LoadOptions& options) {
  KVEDGE_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  KVEDGE_ASSIGN_OR_RETURN(std::unique_ptr<ModelWeights> w, LoadBytes(file.data(), file.size(), path));
  w->file = std::move(file);  // the mapping's address is unchanged by the move
  if (options.interleave && InterleavedWeightsPreferred()) {
    KVEDGE_RETURN_IF_ERROR(InterleaveWeights(w.get(), options.threads));
  }
  return w;
}

}  // namespace kvedge
