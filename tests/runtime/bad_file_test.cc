// Hostile and broken model / tokenizer files, crafted as bytes: every one
// must fail with a Status naming what and where — never crash or over-read
// (this suite also runs under ASan/UBSan).
#include <gtest/gtest.h>

#include <cstring>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

#include "runtime/model/gguf.h"
#include "runtime/model/model_loader.h"
#include "runtime/tokenizer/spm_tokenizer.h"
#include "runtime/tokenizer/tokenizer.h"
#include "simd/float16.h"
#include "tests/testing/test_data.h"

namespace kvedge {
namespace {

using ::kvedge::testing::SharedPath;
using ::kvedge::testing::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

template <typename T>
void Append(std::string* s, T v) {
  s->append(reinterpret_cast<const char*>(&v), sizeof(v));
}
void AppendStr(std::string* s, std::string_view v) {
  Append<uint64_t>(s, v.size());
  s->append(v);
}

// Assembles GGUF bytes field by field, so any field can be made hostile.
struct GgufBuilder {
  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    uint64_t offset;
  };
  uint32_t magic = 0x46554747;
  uint32_t version = 3;
  std::string kv;
  uint64_t n_kv = 0;
  std::vector<Tensor> tensors;
  uint64_t data_bytes = 0;
  uint64_t alignment = 32;
  std::optional<uint64_t> n_kv_override, n_tensors_override;

  void Key(std::string_view key, GgufType type) {
    AppendStr(&kv, key);
    Append<uint32_t>(&kv, static_cast<uint32_t>(type));
    ++n_kv;
  }
  void Str(std::string_view key, std::string_view v) { Key(key, GgufType::kString), AppendStr(&kv, v); }
  void U32(std::string_view key, uint32_t v) { Key(key, GgufType::kUint32), Append(&kv, v); }
  void F32(std::string_view key, float v) { Key(key, GgufType::kFloat32), Append(&kv, v); }
  // F32 tensor (or `bytes` explicitly) placed after the previous one.
  void Add(std::string name, std::vector<uint64_t> ne, uint32_t type = 0, std::optional<uint64_t> bytes = {}) {
    uint64_t n = 1;
    for (uint64_t d : ne) n *= d;
    const uint64_t offset = (data_bytes + alignment - 1) / alignment * alignment;
    data_bytes = offset + bytes.value_or(n * 4);
    tensors.push_back({std::move(name), std::move(ne), type, offset});
  }
  std::string Build() const {
    std::string s;
    Append(&s, magic);
    Append(&s, version);
    Append<uint64_t>(&s, n_tensors_override.value_or(tensors.size()));
    Append<uint64_t>(&s, n_kv_override.value_or(n_kv));
    s += kv;
    for (const Tensor& t : tensors) {
      AppendStr(&s, t.name);
      Append<uint32_t>(&s, static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) Append(&s, d);
      Append(&s, t.type);
      Append(&s, t.offset);
    }
    s.resize((s.size() + alignment - 1) / alignment * alignment, '\0');
    s.resize(s.size() + data_bytes, '\0');
    return s;
  }
};

// A valid tiny llama: dim 32, 1 layer, 4 heads (head_dim 8), 2 kv heads,
// ffn 64, vocab 16. `skip` drops a tensor; `edit` may change the rest.
GgufBuilder TinyLlama(const std::string& skip = "",
                      const std::function<void(GgufBuilder&)>& edit_metadata = nullptr) {
  GgufBuilder b;
  b.Str("general.architecture", "llama");
  b.U32("llama.context_length", 64);
  b.U32("llama.embedding_length", 32);
  b.U32("llama.block_count", 1);
  b.U32("llama.feed_forward_length", 64);
  b.U32("llama.attention.head_count", 4);
  b.U32("llama.attention.head_count_kv", 2);
  b.F32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  if (edit_metadata) edit_metadata(b);
  const auto add = [&](const std::string& name, std::vector<uint64_t> ne) {
    if (name != skip) b.Add(name, std::move(ne));
  };
  add("token_embd.weight", {32, 16});
  add("blk.0.attn_norm.weight", {32});
  add("blk.0.attn_q.weight", {32, 32});
  add("blk.0.attn_k.weight", {32, 16});
  add("blk.0.attn_v.weight", {32, 16});
  add("blk.0.attn_output.weight", {32, 32});
  add("blk.0.ffn_norm.weight", {32});
  add("blk.0.ffn_gate.weight", {32, 64});
  add("blk.0.ffn_up.weight", {32, 64});
  add("blk.0.ffn_down.weight", {64, 32});
  add("output_norm.weight", {32});
  return b;
}

std::string Llama2cHeader(std::vector<int32_t> h) {
  std::string s;
  for (int32_t v : h) Append(&s, v);
  return s;
}

std::string TokenizerBin(int32_t max_len, const std::vector<std::pair<int32_t, std::string>>& records) {
  std::string s;
  Append(&s, max_len);
  for (const auto& [len, text] : records) {
    Append(&s, 0.0f);
    Append(&s, len);
    s += text;
  }
  return s;
}

enum class Reader { kModel, kGgufParse, kTokenizerBin, kGgufTokenizer, kModelPath };

struct BadCase {
  std::string name;
  std::function<std::string()> bytes;  // the file's content (or the path, for kModelPath)
  Reader reader;
  std::string expected;  // substring of the error message
};

Status RunCase(const BadCase& c) {
  const std::string bytes = c.bytes();
  // Copy into an exactly sized heap block so ASan flags any over-read.
  std::unique_ptr<uint8_t[]> buf(new uint8_t[bytes.size() + 1]);
  std::memcpy(buf.get(), bytes.data(), bytes.size());
  const uint8_t* data = buf.get();
  switch (c.reader) {
    case Reader::kModel: return LoadModelFromMemory(data, bytes.size(), "bad.gguf").status();
    case Reader::kGgufParse: return GgufFile::Parse(data, bytes.size(), "bad.gguf").status();
    case Reader::kTokenizerBin: return ParseLlama2cTokenizer(data, bytes.size(), 4, "tokenizer.bin").status();
    case Reader::kGgufTokenizer: {
      auto g = GgufFile::Parse(data, bytes.size(), "bad.gguf");
      if (!g.ok()) return g.status();
      return LoadGgufTokenizer(*g).status();
    }
    case Reader::kModelPath: return LoadModel(bytes).status();
  }
  return OkStatus();
}

const std::string& Stories() {
  static const std::string s = ReadFile(SharedPath("models/stories260K_llamacpp.gguf"));
  return s;
}
// Offsets of the real file's sections (tensor infos begin 8 bytes before the first name).
size_t InfosStart() { return Stories().find("token_embd.weight") - 8; }

std::vector<BadCase> Cases() {
  std::vector<BadCase> v;
  const auto model = [&](std::string name, std::function<std::string()> f, std::string expected,
                         Reader r = Reader::kModel) { v.push_back({std::move(name), std::move(f), r, std::move(expected)}); };
  // Structure and truncation.
  model("empty_buffer", [] { return std::string(); }, "too small for a model file");
  model("wrong_magic", [] { auto s = Stories(); s[3] = 'X'; return s; }, "not a GGUF file", Reader::kGgufParse);
  model("version_1", [] { auto b = TinyLlama(); b.version = 1; return b.Build(); }, "GGUF version 1 is not supported");
  model("version_4", [] { auto b = TinyLlama(); b.version = 4; return b.Build(); }, "GGUF version 4 is not supported");
  model("big_endian", [] { auto b = TinyLlama(); b.version = 0x03000000; return b.Build(); }, "big-endian");
  model("truncated_header", [] { return Stories().substr(0, 12); }, "truncated: tensor count at offset 8");
  model("truncated_metadata_count", [] { return Stories().substr(0, 200); },
        "header claims 19 metadata entries, but only 176 bytes follow the header");
  model("truncated_metadata", [] { return Stories().substr(0, InfosStart() - 50); }, "bad.gguf: metadata #18: truncated: metadata key at offset");
  model("truncated_tensor_infos", [] { return Stories().substr(0, InfosStart() + 20); }, "bad.gguf: tensor info #0: tensor name at offset 11347 has length 17, past the file end");
  model("truncated_before_data", [] { return Stories().substr(0, Stories().find("output.weight") + 40); },
        "tensor info #");
  model("truncated_data", [] { return Stories().substr(0, Stories().size() - 100); },
        "tensor 'blk.4.ffn_norm.weight' (#47) data [offset 1185120..1185376) ends past the file end (1185276 bytes)");
  model("absurd_kv_count", [] { auto b = TinyLlama(); b.n_kv_override = 1ull << 40; return b.Build(); },
        "header claims 1099511627776 metadata entries");
  model("absurd_tensor_count", [] { auto b = TinyLlama(); b.n_tensors_override = ~0ull; return b.Build(); },
        "tensors, but only");
  model("absurd_key_length", [] {
    std::string s = GgufBuilder().Build().substr(0, 16);
    Append<uint64_t>(&s, 1);  // one kv
    Append<uint64_t>(&s, ~0ull >> 1);
    return s + "key" + std::string(64, '\0');
  }, "metadata key at offset 24 has length 9223372036854775807, past the file end");
  model("absurd_string_value", [] {
    GgufBuilder b;
    b.Key("general.name", GgufType::kString);
    Append<uint64_t>(&b.kv, 1ull << 50);
    return b.Build();
  }, "bad.gguf: metadata #0 'general.name': string value at offset");
  model("absurd_array_count", [] {
    GgufBuilder b;
    b.Key("tokenizer.ggml.scores", GgufType::kArray);
    Append<uint32_t>(&b.kv, static_cast<uint32_t>(GgufType::kFloat32));
    Append<uint64_t>(&b.kv, 1ull << 61);
    return b.Build();
  }, "array of 2305843009213693952 float32");
  model("string_array_past_end", [] {
    GgufBuilder b;
    b.Key("tokenizer.ggml.tokens", GgufType::kArray);
    Append<uint32_t>(&b.kv, static_cast<uint32_t>(GgufType::kString));
    Append<uint64_t>(&b.kv, 2);
    AppendStr(&b.kv, "ok");
    Append<uint64_t>(&b.kv, 5000);
    return b.Build();
  }, "bad.gguf: metadata #0 'tokenizer.ggml.tokens': element 1: string array element at offset");
  model("non_utf8_key", [] { GgufBuilder b; b.U32("bad\xFF key", 1); return b.Build(); }, "is not valid UTF-8 (byte 3)");
  model("unknown_value_type", [] { GgufBuilder b; b.Key("x", static_cast<GgufType>(13)); return b.Build(); },
        "has unknown value type 13");
  model("deeply_nested_arrays", [] {
    GgufBuilder b;
    b.Key("nest", GgufType::kArray);
    for (int i = 0; i < 100; ++i) {
      Append<uint32_t>(&b.kv, static_cast<uint32_t>(GgufType::kArray));
      Append<uint64_t>(&b.kv, 1);
    }
    return b.Build();
  }, "arrays nested deeper than 8 levels");
  model("bool_out_of_range", [] { GgufBuilder b; b.Key("flag", GgufType::kBool); b.kv += '\x02'; return b.Build(); },
        "bool value 2");
  model("duplicate_key", [] { auto b = TinyLlama(); b.U32("llama.block_count", 2); return b.Build(); },
        "duplicate key 'llama.block_count'");
  model("bad_alignment", [] { auto b = TinyLlama(); b.U32("general.alignment", 48); return b.Build(); },
        "general.alignment must be a power of two");
  // Tensor infos.
  model("five_dims", [] { GgufBuilder b; b.Add("t", {1, 1, 1, 1, 1}); return b.Build(); },
        "tensor 't' (#0) has 5 dimensions (expected 1..4)");
  model("zero_dims", [] { GgufBuilder b; b.Add("t", {}); return b.Build(); }, "has 0 dimensions");
  model("dims_overflow", [] { GgufBuilder b; b.Add("t", {1ull << 32, 1ull << 32}, 0, 0); return b.Build(); },
        "tensor 't' (#0) dims [4294967296, 4294967296]: element count overflows 64 bits");
  model("bytes_overflow", [] { GgufBuilder b; b.Add("t", {1ull << 31, 1ull << 31}, 0, 0); return b.Build(); },
        "byte size overflows 64 bits");
  model("unknown_tensor_type", [] { GgufBuilder b; b.Add("blk.3.attn_q.weight", {32}, 99, 0); return b.Build(); },
        "tensor 'blk.3.attn_q.weight' (#0) has unknown ggml type id 99");
  model("row_not_block_multiple", [] { GgufBuilder b; b.Add("t", {40}, 8, 34); return b.Build(); },
        "row length 40 is not a multiple of the block size 32");
  model("duplicate_tensor", [] { auto b = TinyLlama(); b.Add("blk.0.attn_q.weight", {32, 32}); return b.Build(); },
        "tensor 'blk.0.attn_q.weight' (#11): duplicate tensor name (first at #2)");
  model("overlapping_tensors", [] {
    auto b = TinyLlama();
    b.tensors[2].offset = b.tensors[1].offset;
    return b.Build();
  }, "overlaps tensor");
  model("offset_past_end", [] {
    auto b = TinyLlama();
    b.tensors[5].offset = 1ull << 40;
    return b.Build();
  }, "tensor 'blk.0.attn_output.weight' (#5) data [offset");
  model("offset_overflow", [] { auto b = TinyLlama(); b.tensors[0].offset = ~0ull - 31; return b.Build(); },
        "bytes overflows 64 bits");
  model("offset_misaligned", [] { auto b = TinyLlama(); b.tensors[3].offset += 4; return b.Build(); },
        "is not a multiple of the alignment 32");
  // Model semantics.
  model("wrong_architecture", [] {
    GgufBuilder b = TinyLlama();
    GgufBuilder g;
    g.Str("general.architecture", "gpt2");
    return g.Build();
  }, "architecture 'gpt2' is not supported");
  model("missing_architecture", [] { return GgufBuilder().Build(); }, "missing string metadata 'general.architecture'");
  model("missing_metadata", [] {
    GgufBuilder b;
    b.Str("general.architecture", "llama");
    b.U32("llama.context_length", 64);
    b.U32("llama.embedding_length", 32);
    return b.Build();
  }, "missing metadata key 'llama.block_count'");
  model("heads_do_not_divide", [] {
    return TinyLlama("", [](GgufBuilder& b) { b.U32("llama.rope.dimension_count", 7); }).Build();
  }, "rope_dim 7 must be even");
  model("unknown_rope_scaling", [] {
    return TinyLlama("", [](GgufBuilder& b) { b.Str("llama.rope.scaling.type", "longrope"); }).Build();
  }, "rope.scaling.type 'longrope' is not supported");
  model("value_length_differs", [] {
    return TinyLlama("", [](GgufBuilder& b) {
      b.U32("llama.attention.key_length", 8);
      b.U32("llama.attention.value_length", 16);
    }).Build();
  }, "attention.value_length 16 differs from key_length 8");
  model("zero_rope_factor", [] {
    auto b = TinyLlama();
    b.Add("rope_freqs.weight", {4});  // zero-filled
    return b.Build();
  }, "tensor 'rope_freqs.weight' entry 0 = 0.000000 is not a positive frequency factor");
  model("missing_tensor", [] { return TinyLlama("blk.0.ffn_up.weight").Build(); },
        "missing tensor 'blk.0.ffn_up.weight' (expected shape [32, 64])");
  model("shape_mismatch", [] {
    auto b = TinyLlama();
    b.tensors[9].ne = {64, 31};  // ffn_down: [64, 32] expected; data size keeps fitting
    return b.Build();
  }, "tensor 'blk.0.ffn_down.weight' (#9) has shape [64, 31], expected [64, 32]");
  model("unsupported_matrix_type", [] {
    auto b = TinyLlama("blk.0.attn_q.weight");
    b.Add("blk.0.attn_q.weight", {256, 4}, 12, 4 * 144);  // Q4_K, and the wrong shape
    return b.Build();
  }, "has shape [256, 4], expected [32, 32]");
  model("q4k_matrix", [] {
    GgufBuilder b = TinyLlama("", [](GgufBuilder& g) {
      g.U32("llama.embedding_length_unused", 0);
    });
    b.tensors[0].type = 12;  // token_embd as Q4_K: row 32 is not a block of 256
    return b.Build();
  }, "row length 32 is not a multiple of the block size 256");
  model("q8_0_norm_vector", [] {
    auto b = TinyLlama();
    b.tensors[1].type = 8;  // blk.0.attn_norm as Q8_0 (one block fits the F32 bytes)
    return b.Build();
  }, "tensor 'blk.0.attn_norm.weight' (#1) has type Q8_0; kvedge reads norm vectors of type F32, F16 or BF16");
  model("vocab_disagrees", [] {
    auto b = TinyLlama("", [](GgufBuilder& g) {
      g.Key("tokenizer.ggml.tokens", GgufType::kArray);
      Append<uint32_t>(&g.kv, static_cast<uint32_t>(GgufType::kString));
      Append<uint64_t>(&g.kv, 3);
      for (const char* t : {"a", "b", "c"}) AppendStr(&g.kv, t);
    });
    return b.Build();
  }, "tensor 'token_embd.weight' (#0) has shape [32, 16], expected [32, 3]");
  // llama2.c checkpoints.
  model("llama2c_negative_dim", [] { return Llama2cHeader({-64, 172, 5, 8, 4, 512, 512}); },
        "llama2.c header field dim = -64 at offset 0 is out of range");
  model("llama2c_zero_layers", [] { return Llama2cHeader({64, 172, 0, 8, 4, 512, 512}); }, "n_layers = 0");
  model("llama2c_zero_vocab", [] { return Llama2cHeader({64, 172, 5, 8, 4, 0, 512}); }, "vocab_size = 0");
  model("llama2c_int_min_vocab", [] { return Llama2cHeader({64, 172, 5, 8, 4, INT32_MIN, 512}); },
        "vocab_size = -2147483648");
  model("llama2c_huge", [] { return Llama2cHeader({65536, 1 << 20, 4096, 256, 256, 1 << 24, 1 << 24}); },
        "implies 3663592071364636 bytes");
  model("llama2c_heads_do_not_divide", [] { return Llama2cHeader({64, 172, 5, 7, 7, 512, 512}); },
        "not a multiple of n_heads 7");
  model("llama2c_gqa_does_not_divide", [] { return Llama2cHeader({64, 172, 5, 8, 3, 512, 512}); },
        "n_heads 8 is not a multiple of n_kv_heads 3");
  model("llama2c_truncated_header", [] { return Llama2cHeader({64, 172}); }, "a llama2.c header needs 28");
  model("llama2c_size_mismatch", [] {
    auto s = ReadFile(SharedPath("models/stories260K.bin"));
    return s.substr(0, s.size() - 4);
  }, "llama2.c file is 1056536 bytes, but its header");
  model("llama2c_v1_magic", [] { return std::string("ak42") + std::string(252, '\0'); }, "export version 1/2");
  // tokenizer.bin (4 tokens expected).
  const auto tok = [&](std::string name, std::function<std::string()> f, std::string expected) {
    v.push_back({std::move(name), std::move(f), Reader::kTokenizerBin, std::move(expected)});
  };
  tok("tok_empty", [] { return std::string(); }, "starts with a 4-byte max_token_length");
  tok("tok_zero_max_len", [] { return TokenizerBin(0, {{1, "a"}, {1, "b"}, {1, "c"}, {1, "d"}}); },
      "max_token_length 0");
  tok("tok_length_past_end", [] { return TokenizerBin(7, {{1, "a"}, {1, "b"}, {1000, "c"}, {1, "d"}}); },
      "token #2 at offset 22 has length 1000, past the file end");
  tok("tok_negative_length", [] { return TokenizerBin(7, {{1, "a"}, {-5, ""}, {1, "c"}, {1, "d"}}); },
      "token #1 at offset 13 has length -5");
  tok("tok_truncated_record", [] { return TokenizerBin(7, {{1, "a"}, {1, "b"}, {1, "c"}}) + "\0\0"; },
      "cannot hold 4 tokens");
  tok("tok_truncated_last", [] {
    std::string s = TokenizerBin(7, {{1, "a"}, {1, "b"}, {1, "c"}, {1, "d"}});
    return s.substr(0, s.size() - 1);
  }, "token #3 at offset 31 has length 1, past the file end (39 bytes)");
  tok("tok_trailing", [] { return TokenizerBin(7, {{1, "a"}, {1, "b"}, {1, "c"}, {1, "d"}, {1, "e"}}); },
      "9 bytes left after 4 tokens");
  // GGUF vocabularies.
  const auto vocab = [&](std::string name, std::function<std::string()> f, std::string expected) {
    v.push_back({std::move(name), std::move(f), Reader::kGgufTokenizer, std::move(expected)});
  };
  vocab("gguf_no_vocab", [] { return TinyLlama().Build(); }, "missing string metadata 'tokenizer.ggml.model'");
  vocab("gguf_bert_vocab", [] { GgufBuilder b; b.Str("tokenizer.ggml.model", "bert"); return b.Build(); },
        "missing metadata 'tokenizer.ggml.tokens'");
  vocab("gguf_scores_mismatch", [] {
    GgufBuilder b;
    b.Str("tokenizer.ggml.model", "llama");
    b.Key("tokenizer.ggml.tokens", GgufType::kArray);
    Append<uint32_t>(&b.kv, static_cast<uint32_t>(GgufType::kString));
    Append<uint64_t>(&b.kv, 3);
    for (const char* t : {"<unk>", "<s>", "</s>"}) AppendStr(&b.kv, t);
    b.Key("tokenizer.ggml.scores", GgufType::kArray);
    Append<uint32_t>(&b.kv, static_cast<uint32_t>(GgufType::kFloat32));
    Append<uint64_t>(&b.kv, 2);
    Append(&b.kv, 0.0f), Append(&b.kv, 0.0f);
    return b.Build();
  }, "3 tokens, 2 scores");
  vocab("gguf_gpt2_without_merges", [] {
    GgufBuilder b;
    b.Str("tokenizer.ggml.model", "gpt2");
    b.Key("tokenizer.ggml.tokens", GgufType::kArray);
    Append<uint32_t>(&b.kv, static_cast<uint32_t>(GgufType::kString));
    Append<uint64_t>(&b.kv, 1);
    AppendStr(&b.kv, "a");
    return b.Build();
  }, "missing metadata 'tokenizer.ggml.merges'");
  // Files.
  const auto path = [&](std::string name, std::function<std::string()> f, std::string expected) {
    v.push_back({std::move(name), std::move(f), Reader::kModelPath, std::move(expected)});
  };
  path("directory", [] { return SharedPath("models"); }, "is a directory");
  path("missing_file", [] { return SharedPath("models/no_such_model.gguf"); }, "no such file");
  path("empty_file", [] {
    const std::string p = TempDir() + "/empty.gguf";
    std::ofstream(p).close();
    return p;
  }, "is empty");
  return v;
}

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class BadFileTest : public ::testing::TestWithParam<BadCase> {};

// With KVEDGE_ROBUSTNESS_OUT set, each case appends "name<TAB>message" to that
// file; scripts/robustness-report.sh turns it into docs/robustness.md.
void RecordForReport(const std::string& name, const Status& s) {
  const char* out = std::getenv("KVEDGE_ROBUSTNESS_OUT");
  if (out == nullptr || out[0] == '\0') return;
  std::ofstream(out, std::ios::app) << name << '\t' << s.ToString() << '\n';
}

TEST_P(BadFileTest, FailsWithLocatedMessage) {
  const Status s = RunCase(GetParam());
  RecordForReport(GetParam().name, s);
  ASSERT_FALSE(s.ok()) << GetParam().name << " was accepted";
  EXPECT_NE(s.message().find(GetParam().expected), std::string::npos)
      << "message: " << s.message() << "\nexpected to contain: " << GetParam().expected;
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line: " << s.message();
}

INSTANTIATE_TEST_SUITE_P(Table, BadFileTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

TEST(BadFileTest, TinyLlamaBaselineLoads) {
  // The table's mutations start from this valid file.
  const std::string bytes = TinyLlama().Build();
  auto w = LoadModelFromMemory(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "tiny.gguf");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ((*w)->config.n_kv_heads, 2);
  EXPECT_EQ((*w)->config.vocab_size, 16);
  EXPECT_EQ((*w)->output.data, (*w)->token_embedding.data);
}

TEST(BadFileTest, HalfNormVectorsLoadAsF32) {
  // blk.0.attn_norm stored as F16 and as BF16, values i − 8 (exact in both).
  for (const uint32_t type : {1u, 30u}) {
    GgufBuilder b = TinyLlama();
    b.tensors[1].type = type;
    std::string bytes = b.Build();
    const size_t data = bytes.size() - b.data_bytes + b.tensors[1].offset;
    for (int i = 0; i < 32; ++i) {
      const float v = static_cast<float>(i - 8);
      const uint16_t h = type == 1 ? F16FromF32(v) : BF16FromF32(v);
      std::memcpy(&bytes[data + 2 * i], &h, 2);
    }
    auto w = LoadModelFromMemory(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "tiny.gguf");
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (int i = 0; i < 32; ++i) EXPECT_EQ((*w)->layers[0].attn_norm[i], static_cast<float>(i - 8)) << type << " " << i;
  }
}

TEST(BadFileTest, EveryTruncationOfARealGgufFails) {
  // Every prefix at a stride through headers, metadata and tensor infos, and
  // near the end of the data: none may crash, over-read or succeed.
  const std::string& s = Stories();
  for (size_t n = 0; n < s.size(); n += (n < InfosStart() + 3000 ? 1 : 4099)) {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[n + 1]);
    std::memcpy(buf.get(), s.data(), n);
    auto w = LoadModelFromMemory(buf.get(), n, "cut.gguf");
    ASSERT_FALSE(w.ok()) << n;
  }
}

}  // namespace
}  // namespace kvedge
