// Model readers on the real shared models: llama2.c and llama.cpp's GGUF of
// stories260K, aidreams260K (MHA, head_dim 16).
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/model/gguf.h"
#include "runtime/model/model_loader.h"
#include "tests/testing/test_data.h"

namespace kvedge {
namespace {

using ::kvedge::testing::SharedPath;

size_t Bytes(const MatrixView& m) {
  EXPECT_EQ(m.type, WeightType::kF32);
  return m.rows * m.cols * sizeof(float);
}

bool SameMatrix(const MatrixView& a, const MatrixView& b) {
  return a.type == b.type && a.rows == b.rows && a.cols == b.cols &&
         std::memcmp(a.data, b.data, Bytes(a)) == 0;
}

bool SameVector(const float* a, const float* b, int n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

TEST(ModelTest, Stories260KBinConfig) {
  auto w = LoadModel(SharedPath("models/stories260K.bin"));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const ModelConfig& c = (*w)->config;
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.rope_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.context_length, 512);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_EQ((*w)->format, "llama2c");
  // 260,032 parameters minus nothing: the shared classifier is not counted twice.
  EXPECT_EQ((*w)->weight_bytes, 260032u * 4);
  EXPECT_EQ((*w)->output.data, (*w)->token_embedding.data);
  EXPECT_EQ((*w)->layers[4].wk.rows, 32u);
  EXPECT_EQ((*w)->layers[4].w2.cols, 172u);
  // The last float before freq_cis is rms_final[63]; check the layout ends there.
  const uint8_t* base = (*w)->source;
  const float* freq = reinterpret_cast<const float*>(base + (*w)->source_size) - 512 * 8;
  EXPECT_EQ((*w)->final_norm + 64, freq);
}

TEST(ModelTest, LlamaCppGgufEqualsBin) {
  auto bin = LoadModel(SharedPath("models/stories260K.bin"));
  auto gguf = LoadModel(SharedPath("models/stories260K_llamacpp.gguf"));
  ASSERT_TRUE(bin.ok()) << bin.status().ToString();
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  const ModelWeights& a = **bin;
  const ModelWeights& b = **gguf;
  EXPECT_EQ(b.format, "gguf");
  EXPECT_EQ(b.config.dim, a.config.dim);
  EXPECT_EQ(b.config.hidden_dim, a.config.hidden_dim);
  EXPECT_EQ(b.config.n_layers, a.config.n_layers);
  EXPECT_EQ(b.config.n_heads, a.config.n_heads);
  EXPECT_EQ(b.config.n_kv_heads, a.config.n_kv_heads);
  EXPECT_EQ(b.config.rope_dim, 8);
  EXPECT_EQ(b.config.vocab_size, 512);
  EXPECT_EQ(b.config.context_length, 512);
  EXPECT_FLOAT_EQ(b.config.rope_theta, 10000.0f);
  EXPECT_FLOAT_EQ(b.config.rms_eps, 1e-5f);
  EXPECT_TRUE(SameMatrix(a.token_embedding, b.token_embedding));
  EXPECT_TRUE(SameMatrix(a.output, b.output));
  EXPECT_NE(b.output.data, b.token_embedding.data);  // llama.cpp writes a separate output.weight
  for (int l = 0; l < a.config.n_layers; ++l) {
    SCOPED_TRACE(l);
    const LayerWeights& x = a.layers[l];
    const LayerWeights& y = b.layers[l];
    EXPECT_TRUE(SameVector(x.attn_norm, y.attn_norm, 64));
    EXPECT_TRUE(SameVector(x.ffn_norm, y.ffn_norm, 64));
    EXPECT_TRUE(SameMatrix(x.wq, y.wq));
    EXPECT_TRUE(SameMatrix(x.wk, y.wk));
    EXPECT_TRUE(SameMatrix(x.wv, y.wv));
    EXPECT_TRUE(SameMatrix(x.wo, y.wo));
    EXPECT_TRUE(SameMatrix(x.w1, y.w1));
    EXPECT_TRUE(SameMatrix(x.w2, y.w2));
    EXPECT_TRUE(SameMatrix(x.w3, y.w3));
  }
  EXPECT_TRUE(SameVector(a.final_norm, b.final_norm, 64));
}

TEST(ModelTest, LlamaCppGgufMetadata) {
  auto file = MappedFile::Open(SharedPath("models/stories260K_llamacpp.gguf"));
  ASSERT_TRUE(file.ok());
  auto g = GgufFile::Parse(file->data(), file->size(), file->path());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(g->metadata().size(), 19u);
  EXPECT_EQ(g->tensors().size(), 48u);
  EXPECT_EQ(g->alignment(), 32u);
  const GgufValue* model = g->Find("tokenizer.ggml.model");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->str, "llama");
  const GgufValue* scores = g->Find("tokenizer.ggml.scores");
  ASSERT_NE(scores, nullptr);
  EXPECT_EQ(scores->count, 512u);
  EXPECT_EQ(scores->elem_type, GgufType::kFloat32);
  EXPECT_EQ(g->Find("llama.rope.freq_base"), nullptr);
  for (const GgufTensorInfo& t : g->tensors()) EXPECT_EQ(t.type, kGgmlF32) << t.name;
}

TEST(ModelTest, Aidreams260K) {
  auto w = LoadModel(SharedPath("models/aidreams260K.bin"));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const ModelConfig& c = (*w)->config;
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.n_layers, 4);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.context_length, 128);
  EXPECT_EQ((*w)->layers[0].wk.rows, 64u);
}

}  // namespace
}  // namespace kvedge
