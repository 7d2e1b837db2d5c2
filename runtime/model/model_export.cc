// GGUF export: llama metadata and tensor order shared by the converter and
// the synthetic-model generator.
#include "runtime/model/model_export.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "runtime/model/gguf_writer.h"

namespace kvedge {
namespace {

constexpr int32_t kTokenNormal = 1, kTokenUnknown = 2, kTokenControl = 3, kTokenByte = 6;

void SetLlamaMetadata(const ModelConfig& c, GgufWriter& w) {
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", c.name);
  w.SetAlignment(static_cast<uint32_t>(kGgufDefaultAlignment));
  w.SetUint32("llama.context_length", c.context_length);
  w.SetUint32("llama.embedding_length", c.dim);
  w.SetUint32("llama.block_count", c.n_layers);
  w.SetUint32("llama.feed_forward_length", c.hidden_dim);
  w.SetUint32("llama.attention.head_count", c.n_heads);
  w.SetUint32("llama.attention.head_count_kv", c.n_kv_heads);
  w.SetUint32("llama.rope.dimension_count", c.rope_dim);
  w.SetFloat32("llama.rope.freq_base", c.rope_theta);
  w.SetFloat32("llama.attention.layer_norm_rms_epsilon", c.rms_eps);
}

void SetVocab(const std::vector<std::string>& pieces, const std::vector<float>& scores,
              const std::vector<int32_t>& types, int bos, int eos, int unk, GgufWriter& w) {
  std::vector<std::string> marked(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    for (char ch : pieces[i]) {
      if (ch == ' ') marked[i] += "\xE2\x96\x81";
      else marked[i] += ch;
    }
  }
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", marked);
  w.SetArray("tokenizer.ggml.scores", GgufType::kFloat32, scores.data(), scores.size());
  w.SetArray("tokenizer.ggml.token_type", GgufType::kInt32, types.data(), types.size());
  w.SetUint32("tokenizer.ggml.bos_token_id", bos);
  w.SetUint32("tokenizer.ggml.eos_token_id", eos);
  w.SetUint32("tokenizer.ggml.unknown_token_id", unk);
}

// Declares every llama tensor in the order WriteModelTensors fills them.
// `matrix_type(cols)` picks the storage type of a matrix with `cols` columns.
void DeclareTensors(const ModelConfig& c, bool tied, const std::function<WeightType(uint64_t)>& matrix_type,
                    GgufWriter& w) {
  const uint64_t D = c.dim, H = c.hidden_dim, V = c.vocab_size;
  const uint64_t KV = static_cast<uint64_t>(c.n_kv_heads) * c.head_dim;
  w.AddTensor("token_embd.weight", matrix_type(D), {D, V});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w.AddTensor(p + "attn_norm.weight", WeightType::kF32, {D});
    w.AddTensor(p + "attn_q.weight", matrix_type(D), {D, D});
    w.AddTensor(p + "attn_k.weight", matrix_type(D), {D, KV});
    w.AddTensor(p + "attn_v.weight", matrix_type(D), {D, KV});
    w.AddTensor(p + "attn_output.weight", matrix_type(D), {D, D});
    w.AddTensor(p + "ffn_norm.weight", WeightType::kF32, {D});
    w.AddTensor(p + "ffn_gate.weight", matrix_type(D), {D, H});
    w.AddTensor(p + "ffn_up.weight", matrix_type(D), {D, H});
    w.AddTensor(p + "ffn_down.weight", matrix_type(H), {H, D});
  }
  w.AddTensor("output_norm.weight", WeightType::kF32, {D});
  if (!tied) w.AddTensor("output.weight", matrix_type(D), {D, V});
}

WeightType StorableType(WeightType type, uint64_t cols) {
  return cols % WeightBlockSize(type) != 0 ? WeightType::kF16 : type;
}

// splitmix64: a fast, well-mixed stream for synthetic weights.
struct Random {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Approximately N(0, 1): Irwin–Hall sum of four 16-bit uniforms, rescaled
  // (variance 4/12 → 1). Light tails are fine for speed benchmarks.
  float Normal() {
    const uint64_t r = Next();
    const float s = static_cast<float>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48)) /
                    65536.0f;
    return (s - 2.0f) * 1.7320508f;
  }
};

}  // namespace

Status ConvertToGguf(const ModelWeights& model, const SpmVocabulary& vocab, const std::string& path,
                     WeightType type) {
  const ModelConfig& c = model.config;
  // The writer knows the plain llama layout only (what llama2.c holds).
  if (c.architecture != "llama" || static_cast<int64_t>(c.n_heads) * c.head_dim != c.dim ||
      c.rope_scaling != RopeScaling::kNone || model.rope_freqs != nullptr || c.sliding_window > 0) {
    return Unsupported("convert: only plain llama models (llama2.c checkpoints) are converted; '" + c.name +
                       "' is " + c.architecture + " with features the writer does not store");
  }
  const int vocab_size = static_cast<int>(vocab.pieces.size());
  if (vocab_size != c.vocab_size || vocab.scores.size() != vocab.pieces.size()) {
    return InvalidArgument("convert: tokenizer has " + std::to_string(vocab_size) +
                           " tokens, model vocab_size is " + std::to_string(c.vocab_size));
  }
  const bool tied = model.output.data == model.token_embedding.data;
  std::vector<const MatrixView*> matrices = {&model.token_embedding};
  for (const LayerWeights& l : model.layers) {
    for (const MatrixView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w3, &l.w2}) matrices.push_back(m);
  }
  if (!tied) matrices.push_back(&model.output);
  for (const MatrixView* m : matrices) {
    if (m->type != WeightType::kF32) return Unsupported("convert: reads F32 source weights only");
  }

  GgufWriter w;
  SetLlamaMetadata(c, w);
  const std::vector<std::string>& pieces = vocab.pieces;
  std::vector<int32_t> types(c.vocab_size);
  for (int i = 0; i < c.vocab_size; ++i) {
    const bool byte = pieces[i].size() == 6 && pieces[i].compare(0, 3, "<0x") == 0 && pieces[i][5] == '>';
    types[i] = i == vocab.unk ? kTokenUnknown
               : (i == vocab.bos || i == vocab.eos) ? kTokenControl
               : byte ? kTokenByte : kTokenNormal;
  }
  SetVocab(pieces, vocab.scores, types, vocab.bos, vocab.eos, vocab.unk, w);
  DeclareTensors(c, tied, [type](uint64_t cols) { return StorableType(type, cols); }, w);
  KVEDGE_RETURN_IF_ERROR(w.Begin(path));
  const auto rows = [&w](const MatrixView& m) {
    return w.WriteRows(static_cast<const float*>(m.data), m.rows);
  };
  KVEDGE_RETURN_IF_ERROR(rows(model.token_embedding));
  for (const LayerWeights& l : model.layers) {
    KVEDGE_RETURN_IF_ERROR(w.WriteRows(l.attn_norm, 1));
    for (const MatrixView* m : {&l.wq, &l.wk, &l.wv, &l.wo}) KVEDGE_RETURN_IF_ERROR(rows(*m));
    KVEDGE_RETURN_IF_ERROR(w.WriteRows(l.ffn_norm, 1));
    for (const MatrixView* m : {&l.w1, &l.w3, &l.w2}) KVEDGE_RETURN_IF_ERROR(rows(*m));
  }
  KVEDGE_RETURN_IF_ERROR(w.WriteRows(model.final_norm, 1));
  if (!tied) KVEDGE_RETURN_IF_ERROR(rows(model.output));
  return w.Finish();
}

StatusOr<SynthShape> SynthPreset(std::string_view name) {
  if (name == "tinyllama-1.1b") return SynthShape{"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 32000, 2048};
  if (name == "llama-7b") return SynthShape{"llama-7b", 4096, 32, 32, 32, 11008, 32000, 4096};
  return InvalidArgument("unknown model shape '" + std::string(name) + "' (known: tinyllama-1.1b, llama-7b)");
}

Status WriteRandomLlamaGguf(const SynthShape& shape, WeightType type, uint64_t seed, const std::string& path) {
  if (type != WeightType::kF16 && !IsQuantizedWeight(type)) {
    return InvalidArgument("synthetic models are written as f16, q8_0 or q4_0");
  }
  ModelConfig c;
  c.name = shape.name;
  c.dim = shape.dim;
  c.hidden_dim = shape.hidden_dim;
  c.n_layers = shape.n_layers;
  c.n_heads = shape.n_heads;
  c.n_kv_heads = shape.n_kv_heads;
  c.head_dim = shape.n_heads > 0 ? shape.dim / shape.n_heads : 0;
  c.rope_dim = c.head_dim;
  c.vocab_size = shape.vocab_size;
  c.context_length = shape.context_length;
  KVEDGE_RETURN_IF_ERROR(ValidateConfig(c, "synthetic model '" + shape.name + "'"));
  if (c.vocab_size < 3 + 256) {
    return InvalidArgument("synthetic model '" + shape.name + "': vocab_size " + std::to_string(c.vocab_size) +
                           " cannot hold <unk>, <s>, </s> and 256 byte tokens");
  }
  const uint32_t block = WeightBlockSize(type);
  if (c.dim % block != 0 || c.hidden_dim % block != 0) {
    return InvalidArgument("synthetic model '" + shape.name + "': dim and hidden_dim must be multiples of " +
                           std::to_string(block) + " for " + GetWeightFormat(type).ggml_name);
  }

  // Synthetic SentencePiece vocabulary; merges reach every "▁"-string since
  // each prefix is itself in the vocabulary.
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {kTokenUnknown, kTokenControl, kTokenControl};
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    pieces.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    types.push_back(kTokenByte);
  }
  for (int ch = 32; ch < 127 && static_cast<int>(pieces.size()) < c.vocab_size; ++ch) {
    pieces.emplace_back(1, static_cast<char>(ch));
    types.push_back(kTokenNormal);
  }
  std::vector<std::string> level = {" "};
  while (static_cast<int>(pieces.size()) < c.vocab_size) {
    std::vector<std::string> next;
    for (const std::string& p : level) {
      for (char ch = 'a'; ch <= 'z' && static_cast<int>(pieces.size()) < c.vocab_size; ++ch) {
        next.push_back(p + ch);
        pieces.push_back(next.back());
        types.push_back(kTokenNormal);
      }
    }
    level = std::move(next);
  }
  std::vector<float> scores(pieces.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = i < 259 ? 0.0f : -static_cast<float>(i - 259);

  GgufWriter w;
  SetLlamaMetadata(c, w);
  SetVocab(pieces, scores, types, 1, 2, 0, w);
  DeclareTensors(c, /*tied=*/false, [type](uint64_t) { return type; }, w);
  KVEDGE_RETURN_IF_ERROR(w.Begin(path));

  Random rng{seed};
  std::vector<float> buf;
  const auto random_matrix = [&](uint64_t rows, uint64_t cols) -> Status {
    const uint64_t batch = std::max<uint64_t>(1, (1u << 20) / cols);  // ~4 MiB of f32 at a time
    buf.resize(batch * cols);
    for (uint64_t r = 0; r < rows; r += batch) {
      const uint64_t n = std::min(batch, rows - r);
      for (uint64_t i = 0; i < n * cols; ++i) buf[i] = 0.02f * rng.Normal();
      KVEDGE_RETURN_IF_ERROR(w.WriteRows(buf.data(), n));
    }
    return OkStatus();
  };
  const std::vector<float> ones(c.dim, 1.0f);
  const uint64_t D = c.dim, H = c.hidden_dim, V = c.vocab_size;
  const uint64_t KV = static_cast<uint64_t>(c.n_kv_heads) * c.head_dim;
  KVEDGE_RETURN_IF_ERROR(random_matrix(V, D));
  for (int l = 0; l < c.n_layers; ++l) {
    KVEDGE_RETURN_IF_ERROR(w.WriteRows(ones.data(), 1));
    KVEDGE_RETURN_IF_ERROR(random_matrix(D, D));
    KVEDGE_RETURN_IF_ERROR(random_matrix(KV, D));
    KVEDGE_RETURN_IF_ERROR(random_matrix(KV, D));
    KVEDGE_RETURN_IF_ERROR(random_matrix(D, D));
    KVEDGE_RETURN_IF_ERROR(w.WriteRows(ones.data(), 1));
    KVEDGE_RETURN_IF_ERROR(random_matrix(H, D));
    KVEDGE_RETURN_IF_ERROR(random_matrix(H, D));
    KVEDGE_RETURN_IF_ERROR(random_matrix(D, H));
  }
  KVEDGE_RETURN_IF_ERROR(w.WriteRows(ones.data(), 1));
  KVEDGE_RETURN_IF_ERROR(random_matrix(V, D));
  return w.Finish();
}

}  // namespace kvedge
