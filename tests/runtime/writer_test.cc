// GGUF writer: metadata of every type, stories260K converted and reloaded
// (F32 bit-exact, Q8_0/Q4_0 within ggml's error bounds), synthetic models.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "runtime/model/gguf.h"
#include "runtime/model/gguf_writer.h"
#include "runtime/model/model_export.h"
#include "runtime/model/model_loader.h"
#include "simd/model_kernels_ref.h"
#include "simd/weight_quant.h"
#include "runtime/tokenizer/spm_tokenizer.h"
#include "simd/float16.h"
#include "tests/testing/test_data.h"

namespace kvedge {
namespace {

using ::kvedge::testing::SharedPath;
using ::kvedge::testing::TempDir;

TEST(QuantizeTest, MatchesGgmlReferenceValues) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);  // -16..15
  BlockQ8_0 q8;
  QuantizeRowQ8_0(x, 32, &q8);
  EXPECT_EQ(q8.d, F16FromF32(16.0f / 127.0f));
  for (int j = 0; j < 32; ++j) EXPECT_EQ(q8.qs[j], static_cast<int8_t>(std::roundf(x[j] * 127.0f / 16.0f))) << j;
  BlockQ4_0 q4;
  QuantizeRowQ4_0(x, 32, &q4);
  // max = -16 (largest |x|, signed) → d = 2, q = min(15, (int8)(x/2 + 8.5)).
  EXPECT_EQ(q4.d, F16FromF32(2.0f));
  EXPECT_EQ(q4.qs[0] & 15, 0);          // x = -16
  EXPECT_EQ(q4.qs[15] >> 4, 15);        // x = 15 → 16 clipped to 15
  EXPECT_EQ(q4.qs[3] & 15, 2);          // x = -13: (int8)(-6.5 + 8.5) = 2
  float y[32];
  ref::DequantizeRow(MatrixView{WeightType::kQ4_0, &q4, 1, 32}, 0, y);
  EXPECT_FLOAT_EQ(y[0], -16.0f);
  EXPECT_FLOAT_EQ(y[31], 14.0f);
}

TEST(GgufWriterTest, MetadataOfEveryTypeRoundTrips) {
  const std::string path = TempDir() + "/meta.gguf";
  GgufWriter w;
  w.SetUint8("u8", 200);
  w.SetInt8("i8", -100);
  w.SetUint16("u16", 60000);
  w.SetInt16("i16", -30000);
  w.SetUint32("u32", 4000000000u);
  w.SetInt32("i32", -2000000000);
  w.SetFloat32("f32", 1.5f);
  w.SetBool("bool", true);
  w.SetUint64("u64", 1ull << 60);
  w.SetInt64("i64", -(1ll << 60));
  w.SetFloat64("f64", -2.25);
  w.SetString("str", "h\xC3\xA9llo");
  const int16_t shorts[3] = {-1, 2, -3};
  w.SetArray("arr.i16", GgufType::kInt16, shorts, 3);
  w.SetStringArray("arr.str", {"a", "", "ccc"});
  w.SetAlignment(64);
  w.AddTensor("bf16", WeightType::kBF16, {4, 2});
  ASSERT_TRUE(w.Begin(path).ok());
  const float values[8] = {1, -2, 3.5f, 0, 1e-3f, 7, -8, 65504};
  ASSERT_TRUE(w.WriteRows(values, 2).ok());
  ASSERT_TRUE(w.Finish().ok());

  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok());
  auto g = GgufFile::Parse(file->data(), file->size(), path);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(g->alignment(), 64u);
  EXPECT_EQ(*g->Find("u8")->AsInt(), 200);
  EXPECT_EQ(*g->Find("i8")->AsInt(), -100);
  EXPECT_EQ(*g->Find("u16")->AsInt(), 60000);
  EXPECT_EQ(*g->Find("i16")->AsInt(), -30000);
  EXPECT_EQ(*g->Find("u32")->AsInt(), 4000000000ll);
  EXPECT_EQ(*g->Find("i32")->AsInt(), -2000000000);
  EXPECT_EQ(*g->Find("f32")->AsFloat(), 1.5);
  EXPECT_EQ(g->Find("bool")->type, GgufType::kBool);
  EXPECT_EQ(*g->Find("bool")->AsInt(), 1);
  EXPECT_EQ(*g->Find("u64")->AsInt(), 1ll << 60);
  EXPECT_EQ(*g->Find("i64")->AsInt(), -(1ll << 60));
  EXPECT_EQ(*g->Find("f64")->AsFloat(), -2.25);
  EXPECT_EQ(g->Find("str")->str, "h\xC3\xA9llo");
  const GgufValue* a = g->Find("arr.i16");
  ASSERT_EQ(a->count, 3u);
  EXPECT_EQ(*a->IntAt(2), -3);
  EXPECT_FALSE(a->IntAt(3).has_value());
  const GgufValue* s = g->Find("arr.str");
  ASSERT_EQ(s->strings.size(), 3u);
  EXPECT_EQ(s->strings[2], "ccc");
  ASSERT_EQ(g->tensors().size(), 1u);
  const GgufTensorInfo& t = g->tensors()[0];
  EXPECT_EQ(t.type, kGgmlBF16);
  EXPECT_EQ(t.ne[0], 4u);
  EXPECT_EQ(t.ne[1], 2u);
  EXPECT_EQ((t.data - file->data()) % 64, 0);
  for (int i = 0; i < 8; ++i) {
    uint16_t b;
    std::memcpy(&b, t.data + 2 * i, 2);
    EXPECT_EQ(b, BF16FromF32(values[i])) << i;
  }
}

TEST(GgufWriterTest, MisuseIsReported) {
  GgufWriter w;
  w.SetUint32("k", 1);
  w.SetUint32("k", 2);
  Status s = w.Begin(TempDir() + "/dup.gguf");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("duplicate metadata key 'k'"), std::string::npos);
  GgufWriter q;
  q.AddTensor("t", WeightType::kQ8_0, {40, 2});
  s = q.Begin(TempDir() + "/q.gguf");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tensor 't'"), std::string::npos);
  GgufWriter incomplete;
  incomplete.AddTensor("t", WeightType::kF32, {4, 2});
  ASSERT_TRUE(incomplete.Begin(TempDir() + "/i.gguf").ok());
  const float row[4] = {};
  ASSERT_TRUE(incomplete.WriteRows(row, 1).ok());
  s = incomplete.Finish();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("1 of 2 rows"), std::string::npos);
}

class ConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = LoadModel(SharedPath("models/stories260K.bin"));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value();
    auto t = LoadLlama2cTokenizer(SharedPath("models/tok512.bin"), 512);
    ASSERT_TRUE(t.ok());
    tokenizer_ = std::move(t).value();
  }

  std::unique_ptr<ModelWeights> Convert(WeightType type) {
    const std::string path = TempDir() + "/stories260K.gguf";
    Status s = ConvertToGguf(*model_, tokenizer_->Vocabulary(), path, type);
    EXPECT_TRUE(s.ok()) << s.ToString();
    auto m = LoadModel(path);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? std::move(m).value() : nullptr;
  }

  std::unique_ptr<ModelWeights> model_;
  std::unique_ptr<SpmTokenizer> tokenizer_;
};

// Dequantized rows of `m` (any stored type) as f32.
std::vector<float> Dequantize(const MatrixView& m) {
  std::vector<float> out(m.rows * m.cols);
  for (size_t r = 0; r < m.rows; ++r) ref::DequantizeRow(m, r, out.data() + r * m.cols);
  return out;
}

// ggml's error bounds per 32-block: Q8_0 half a step (amax/127/2), Q4_0 one
// step (amax/8; the end opposite the max clips at +7), F16 2^-11 relative;
// plus the f16 rounding of the scale.
void ExpectWithinBounds(const MatrixView& source, const MatrixView& stored, const char* what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(source.rows, stored.rows);
  ASSERT_EQ(source.cols, stored.cols);
  const float* x = static_cast<const float*>(source.data);
  const std::vector<float> y = Dequantize(stored);
  for (size_t b = 0; b < y.size() / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    for (int j = 0; j < 32; ++j) {
      const size_t i = b * 32 + j;
      float bound = 0;
      switch (stored.type) {
        case WeightType::kQ8_0: bound = 0.5f * amax / 127 + amax / 1024; break;
        case WeightType::kQ4_0: bound = amax / 8 + amax / 1024; break;
        case WeightType::kF16: bound = std::fabs(x[i]) / 2048 + 1e-7f; break;
        default: bound = 0; break;
      }
      ASSERT_LE(std::fabs(x[i] - y[i]), bound) << "element " << i;
    }
  }
}

TEST_F(ConvertTest, F32RoundTripIsBitExact) {
  auto g = Convert(WeightType::kF32);
  ASSERT_NE(g, nullptr);
  const ModelWeights& a = *model_;
  const ModelWeights& b = *g;
  EXPECT_EQ(b.config.dim, 64);
  EXPECT_EQ(b.config.n_kv_heads, 4);
  EXPECT_EQ(b.config.context_length, 512);
  EXPECT_EQ(b.output.data, b.token_embedding.data);  // tied stays tied
  EXPECT_EQ(b.weight_bytes, a.weight_bytes);
  const auto same = [](const MatrixView& x, const MatrixView& y) {
    return x.type == y.type && x.rows == y.rows && x.cols == y.cols &&
           std::memcmp(x.data, y.data, x.rows * x.cols * 4) == 0;
  };
  EXPECT_TRUE(same(a.token_embedding, b.token_embedding));
  for (int l = 0; l < 5; ++l) {
    const LayerWeights& x = a.layers[l];
    const LayerWeights& y = b.layers[l];
    EXPECT_TRUE(same(x.wq, y.wq) && same(x.wk, y.wk) && same(x.wv, y.wv) && same(x.wo, y.wo) &&
                same(x.w1, y.w1) && same(x.w2, y.w2) && same(x.w3, y.w3));
    EXPECT_EQ(std::memcmp(x.attn_norm, y.attn_norm, 256), 0);
    EXPECT_EQ(std::memcmp(x.ffn_norm, y.ffn_norm, 256), 0);
  }
  EXPECT_EQ(std::memcmp(a.final_norm, b.final_norm, 256), 0);
  // The embedded vocabulary encodes like tokenizer.bin.
  auto t = LoadTokenizer(b);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const std::string text = "Lily's mom said, \"Lily, let's go to the park.\" \xE2\x80\x9CYes!\xE2\x80\x9D";
  EXPECT_EQ(*(*t)->Encode(text, true), *tokenizer_->Encode(text, true));
  EXPECT_EQ((*t)->Decode(*(*t)->Encode(text, true)), text);
}

TEST_F(ConvertTest, QuantizedWithinGgmlBounds) {
  for (WeightType type : {WeightType::kQ8_0, WeightType::kQ4_0, WeightType::kF16, WeightType::kBF16}) {
    SCOPED_TRACE(static_cast<int>(type));
    auto g = Convert(type);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->layers[0].wq.type, type);
    // ffn_down rows are 172 long: not a multiple of 32, stored as F16.
    const bool quantized = type == WeightType::kQ8_0 || type == WeightType::kQ4_0;
    EXPECT_EQ(g->layers[0].w2.type, quantized ? WeightType::kF16 : type);
    if (type == WeightType::kBF16) continue;  // bf16: covered by the metadata test's bit check
    ExpectWithinBounds(model_->token_embedding, g->token_embedding, "token_embd");
    for (int l = 0; l < 5; ++l) {
      const LayerWeights& x = model_->layers[l];
      const LayerWeights& y = g->layers[l];
      ExpectWithinBounds(x.wq, y.wq, "wq");
      ExpectWithinBounds(x.wk, y.wk, "wk");
      ExpectWithinBounds(x.wv, y.wv, "wv");
      ExpectWithinBounds(x.wo, y.wo, "wo");
      ExpectWithinBounds(x.w1, y.w1, "w1");
      ExpectWithinBounds(x.w3, y.w3, "w3");
      ExpectWithinBounds(x.w2, y.w2, "w2");
      EXPECT_EQ(std::memcmp(x.attn_norm, y.attn_norm, 256), 0);  // norms stay f32
    }
    EXPECT_LT(g->weight_bytes, model_->weight_bytes);
  }
}

TEST(SynthTest, PresetsAndSmallRandomModel) {
  auto tiny = SynthPreset("tinyllama-1.1b");
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->dim, 2048);
  EXPECT_EQ(tiny->n_layers, 22);
  EXPECT_EQ(tiny->n_kv_heads, 4);
  EXPECT_EQ(tiny->hidden_dim, 5632);
  auto big = SynthPreset("llama-7b");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->dim, 4096);
  EXPECT_EQ(big->hidden_dim, 11008);
  EXPECT_EQ(big->context_length, 4096);
  EXPECT_FALSE(SynthPreset("gpt-5").ok());

  const SynthShape shape{"small", 128, 2, 4, 2, 352, 1000, 256};
  for (WeightType type : {WeightType::kF16, WeightType::kQ8_0, WeightType::kQ4_0}) {
    const std::string path = TempDir() + "/synth.gguf";
    ASSERT_TRUE(WriteRandomLlamaGguf(shape, type, 7, path).ok());
    auto m = LoadModel(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const ModelConfig& c = (*m)->config;
    EXPECT_EQ(c.name, "small");
    EXPECT_EQ(c.dim, 128);
    EXPECT_EQ(c.n_kv_heads, 2);
    EXPECT_EQ(c.head_dim, 32);
    EXPECT_EQ(c.vocab_size, 1000);
    EXPECT_EQ((*m)->layers[1].w2.type, type);
    EXPECT_EQ((*m)->layers[1].attn_norm[5], 1.0f);
    const std::vector<float> e = Dequantize((*m)->token_embedding);
    double sum = 0, sum2 = 0;
    for (float v : e) sum += v, sum2 += double(v) * v;
    const double mean = sum / e.size(), stddev = std::sqrt(sum2 / e.size() - mean * mean);
    EXPECT_NEAR(mean, 0.0, 1e-3);
    EXPECT_NEAR(stddev, 0.02, 0.002);
    auto t = LoadTokenizer(**m);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    const std::string text = "hello synthetic world \xE2\x9C\x93";
    auto ids = (*t)->Encode(text, true);
    ASSERT_TRUE(ids.ok());
    EXPECT_LT(ids->size(), text.size());  // "▁he", "▁hel"... merge
    EXPECT_EQ((*t)->Decode(*ids), text);
  }
  EXPECT_FALSE(WriteRandomLlamaGguf({"odd", 100, 1, 4, 4, 100, 300, 16}, WeightType::kQ8_0, 1,
                                    TempDir() + "/x.gguf").ok());
}

}  // namespace
}  // namespace kvedge
