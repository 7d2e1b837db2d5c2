// Tokenizer base (decoding) and the factories reading GGUF vocabularies.
#include "runtime/tokenizer/tokenizer.h"

#include "runtime/model/gguf.h"
#include "runtime/model/model.h"
#include "runtime/tokenizer/spm_tokenizer.h"
#include "runtime/tokenizer/vocab_tokenizer.h"

namespace kvedge {
namespace {

StatusOr<const GgufValue*> FindArray(const GgufFile& g, const char* key, GgufType elem, bool required) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr) {
    if (!required) return static_cast<const GgufValue*>(nullptr);
    return DataLoss(g.name() + ": missing metadata '" + key + "' (the embedded vocabulary)");
  }
  const bool int_ok = elem == GgufType::kInt32 && v->elems != nullptr && v->elem_type != GgufType::kFloat32 &&
                      v->elem_type != GgufType::kFloat64;
  if (v->type != GgufType::kArray || (v->elem_type != elem && !int_ok)) {
    return DataLoss(g.name() + ": metadata '" + key + "' is " + GgufTypeName(v->type) +
                    (v->type == GgufType::kArray ? std::string(" of ") + GgufTypeName(v->elem_type) : "") +
                    ", expected an array of " + GgufTypeName(elem));
  }
  return v;
}

// An integer (or bool) key; nullopt when absent.
StatusOr<std::optional<int64_t>> IntKey(const GgufFile& g, const char* key) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr) return std::optional<int64_t>();
  const auto i = v->AsInt();
  if (!i) return DataLoss(g.name() + ": metadata '" + key + "' is " + GgufTypeName(v->type) + ", expected an integer");
  return std::optional<int64_t>(*i);
}

// A string key; "" when absent.
StatusOr<std::string> StringKey(const GgufFile& g, const char* key) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr) return std::string();
  if (v->type != GgufType::kString) {
    return DataLoss(g.name() + ": metadata '" + key + "' is " + GgufTypeName(v->type) + ", expected a string");
  }
  return std::string(v->str);
}

}  // namespace

std::string_view Tokenizer::DecodePiece(int prev_token, int token) const {
  if (token < 0 || token >= vocab_size()) return {};
  std::string_view piece = decoded_[token];
  if (strip_space_after_bos_ && prev_token == bos_ && !piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
  return piece;
}

std::string Tokenizer::Decode(const std::vector<int>& tokens) const {
  std::string out;
  int prev = -1;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!(i == 0 && tokens[i] == bos_)) out.append(DecodePiece(prev, tokens[i]));
    prev = tokens[i];
  }
  return out;
}

std::vector<int> Tokenizer::EndOfGenerationIds() const {
  std::vector<int> ids;
  for (int i = 0; i < static_cast<int>(eog_.size()); ++i) {
    if (eog_[i]) ids.push_back(i);
  }
  return ids;
}

std::string_view Tokenizer::TokenText(int id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return pieces_[id];
}

StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const GgufFile& g, std::string_view pre_override) {
  const GgufValue* model = g.Find("tokenizer.ggml.model");
  if (model == nullptr || model->type != GgufType::kString) {
    return DataLoss(g.name() + ": missing string metadata 'tokenizer.ggml.model' (no embedded vocabulary)");
  }
  KVEDGE_ASSIGN_OR_RETURN(const GgufValue* tokens, FindArray(g, "tokenizer.ggml.tokens", GgufType::kString, true));
  if (tokens->count == 0 || tokens->count > static_cast<uint64_t>(kMaxVocab)) {
    return DataLoss(g.name() + ": tokenizer.ggml.tokens holds " + std::to_string(tokens->count) + " tokens (expected 1.." +
                    std::to_string(kMaxVocab) + ")");
  }
  const bool bpe = model->str == "gpt2";
  if (!pre_override.empty() && !bpe) {
    return InvalidArgument(g.name() + ": a pre-tokenizer override applies to byte-level BPE ('gpt2') vocabularies; "
                           "this one is '" + std::string(model->str.substr(0, 64)) + "'");
  }
  VocabSpec spec;
  spec.model = std::string(model->str);
  KVEDGE_ASSIGN_OR_RETURN(spec.pre, StringKey(g, "tokenizer.ggml.pre"));
  if (!pre_override.empty()) spec.pre = std::string(pre_override);
  KVEDGE_ASSIGN_OR_RETURN(spec.name, StringKey(g, "general.name"));
  spec.tokens.assign(tokens->strings.begin(), tokens->strings.end());
  KVEDGE_ASSIGN_OR_RETURN(const GgufValue* scores,
                          FindArray(g, "tokenizer.ggml.scores", GgufType::kFloat32, model->str == "llama"));
  KVEDGE_ASSIGN_OR_RETURN(const GgufValue* types, FindArray(g, "tokenizer.ggml.token_type", GgufType::kInt32, false));
  if ((scores != nullptr && scores->count != tokens->count) || (types != nullptr && types->count != tokens->count)) {
    return DataLoss(g.name() + ": tokenizer arrays disagree: " + std::to_string(tokens->count) + " tokens, " +
                    (scores ? std::to_string(scores->count) : std::string("no")) + " scores, " +
                    (types ? std::to_string(types->count) : std::string("no")) + " token types");
  }
  for (uint64_t i = 0; scores != nullptr && i < scores->count; ++i) {
    spec.scores.push_back(static_cast<float>(scores->FloatAt(i).value_or(0.0)));
  }
  for (uint64_t i = 0; types != nullptr && i < types->count; ++i) {
    spec.types.push_back(static_cast<int32_t>(types->IntAt(i).value_or(1)));
  }
  if (bpe) {
    KVEDGE_ASSIGN_OR_RETURN(const GgufValue* merges, FindArray(g, "tokenizer.ggml.merges", GgufType::kString, true));
    spec.merges.assign(merges->strings.begin(), merges->strings.end());
  }
  const std::pair<const char*, std::optional<int64_t>*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &spec.bos},         {"tokenizer.ggml.eos_token_id", &spec.eos},
      {"tokenizer.ggml.eot_token_id", &spec.eot},         {"tokenizer.ggml.eom_token_id", &spec.eom},
      {"tokenizer.ggml.unknown_token_id", &spec.unk},     {"tokenizer.ggml.padding_token_id", &spec.pad},
      {"tokenizer.ggml.fim_pad_token_id", &spec.fim_pad}, {"tokenizer.ggml.fim_rep_token_id", &spec.fim_rep},
      {"tokenizer.ggml.fim_sep_token_id", &spec.fim_sep},
  };
  for (const auto& [key, slot] : ids) {
    KVEDGE_ASSIGN_OR_RETURN(*slot, IntKey(g, key));
  }
  const std::pair<const char*, std::optional<bool>*> flags[] = {
      {"tokenizer.ggml.add_bos_token", &spec.add_bos},
      {"tokenizer.ggml.add_eos_token", &spec.add_eos},
      {"tokenizer.ggml.add_space_prefix", &spec.add_space_prefix},
  };
  for (const auto& [key, slot] : flags) {
    KVEDGE_ASSIGN_OR_RETURN(const std::optional<int64_t> v, IntKey(g, key));
    if (v) *slot = *v != 0;
  }
  auto t = VocabTokenizer::Create(std::move(spec));
  if (!t.ok()) return Status(t.status().code(), g.name() + ": " + t.status().message());
  return std::unique_ptr<Tokenizer>(std::move(t).value());
}

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const ModelWeights& model, const std::string& tokenizer_bin_path,
                                                   std::string_view pre_override) {
  std::unique_ptr<Tokenizer> t;
  if (!tokenizer_bin_path.empty()) {
    if (!pre_override.empty()) {
      return InvalidArgument("a pre-tokenizer override applies to byte-level BPE (GGUF 'gpt2') vocabularies, not to "
                             "a llama2.c tokenizer.bin");
    }
    KVEDGE_ASSIGN_OR_RETURN(t, LoadLlama2cTokenizer(tokenizer_bin_path, model.config.vocab_size));
  } else if (model.gguf != nullptr) {
    KVEDGE_ASSIGN_OR_RETURN(t, LoadGgufTokenizer(*model.gguf, pre_override));
  } else {
    // Nothing beside the file is taken on trust: a tokenizer.bin of the same
    // size may belong to another model and would silently garble the text.
    return InvalidArgument("model '" + model.config.name +
                           "' is a llama2.c checkpoint without a vocabulary: give its tokenizer.bin with --tokenizer");
  }
  if (t->vocab_size() != model.config.vocab_size) {
    return InvalidArgument("tokenizer has " + std::to_string(t->vocab_size()) + " tokens but model '" +
                           model.config.name + "' has vocab_size " + std::to_string(model.config.vocab_size));
  }
  return t;
}

}  // namespace kvedge
