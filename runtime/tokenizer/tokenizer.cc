// Tokenizer base (decoding) and the factories reading GGUF vocabularies.
#include "runtime/tokenizer/tokenizer.h"

#include "runtime/model/gguf.h"
#include "runtime/model/model.h"
#include "runtime/tokenizer/gpt2_tokenizer.h"
#include "runtime/tokenizer/spm_tokenizer.h"

namespace kvedge {
namespace {

// llama.cpp's token types (tokenizer.ggml.token_type).
constexpr int64_t kTokenNormal = 1, kTokenUserDefined = 4;

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

StatusOr<int> TokenId(const GgufFile& g, const char* key, int fallback, int vocab) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr) return fallback;
  const auto id = v->AsInt();
  if (!id || *id < 0 || *id >= vocab) {
    return DataLoss(g.name() + ": metadata '" + key + "' = " + (id ? std::to_string(*id) : "non-integer") +
                    " is not a token id (vocabulary of " + std::to_string(vocab) + ")");
  }
  return static_cast<int>(*id);
}

// GGUF SentencePiece vocabularies mark spaces with U+2581 ("▁").
std::string SpacesFromMarkers(std::string_view piece) {
  static constexpr std::string_view kMarker = "\xE2\x96\x81";
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    if (piece.substr(i, 3) == kMarker) {
      out.push_back(' ');
      i += 3;
    } else {
      out.push_back(piece[i++]);
    }
  }
  return out;
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

std::string_view Tokenizer::TokenText(int id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return pieces_[id];
}

StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const GgufFile& g) {
  const GgufValue* model = g.Find("tokenizer.ggml.model");
  if (model == nullptr || model->type != GgufType::kString) {
    return DataLoss(g.name() + ": missing string metadata 'tokenizer.ggml.model' (no embedded vocabulary)");
  }
  KVEDGE_ASSIGN_OR_RETURN(const GgufValue* tokens, FindArray(g, "tokenizer.ggml.tokens", GgufType::kString, true));
  const int n = static_cast<int>(std::min<uint64_t>(tokens->count, 1 << 24));
  if (tokens->count == 0 || tokens->count > (1 << 24)) {
    return DataLoss(g.name() + ": tokenizer.ggml.tokens holds " + std::to_string(tokens->count) +
                    " tokens (expected 1..16777216)");
  }
  const auto wrap = [&](auto result) -> StatusOr<std::unique_ptr<Tokenizer>> {
    if (!result.ok()) return Status(result.status().code(), g.name() + ": " + result.status().message());
    return std::unique_ptr<Tokenizer>(std::move(result).value());
  };
  if (model->str == "llama") {
    KVEDGE_ASSIGN_OR_RETURN(const GgufValue* scores, FindArray(g, "tokenizer.ggml.scores", GgufType::kFloat32, true));
    KVEDGE_ASSIGN_OR_RETURN(const GgufValue* types, FindArray(g, "tokenizer.ggml.token_type", GgufType::kInt32, false));
    if (scores->count != tokens->count || (types != nullptr && types->count != tokens->count)) {
      return DataLoss(g.name() + ": tokenizer arrays disagree: " + std::to_string(tokens->count) + " tokens, " +
                      std::to_string(scores->count) + " scores" +
                      (types ? ", " + std::to_string(types->count) + " token types" : ""));
    }
    std::vector<std::string> pieces(n);
    std::vector<float> score(n);
    std::vector<bool> mergeable(n, true);
    for (int i = 0; i < n; ++i) {
      pieces[i] = SpacesFromMarkers(tokens->strings[i]);
      score[i] = static_cast<float>(scores->FloatAt(i).value_or(0.0));
      if (types != nullptr) {
        const int64_t type = types->IntAt(i).value_or(kTokenNormal);
        mergeable[i] = type == kTokenNormal || type == kTokenUserDefined;
      }
    }
    KVEDGE_ASSIGN_OR_RETURN(const int bos, TokenId(g, "tokenizer.ggml.bos_token_id", 1, n));
    KVEDGE_ASSIGN_OR_RETURN(const int eos, TokenId(g, "tokenizer.ggml.eos_token_id", 2, n));
    KVEDGE_ASSIGN_OR_RETURN(const int unk, TokenId(g, "tokenizer.ggml.unknown_token_id", 0, n));
    return wrap(SpmTokenizer::Create(std::move(pieces), std::move(score), mergeable, bos, eos, unk));
  }
  if (model->str == "gpt2") {
    KVEDGE_ASSIGN_OR_RETURN(const GgufValue* merges, FindArray(g, "tokenizer.ggml.merges", GgufType::kString, true));
    std::vector<std::string> pieces(tokens->strings.begin(), tokens->strings.end());
    KVEDGE_ASSIGN_OR_RETURN(const int bos, TokenId(g, "tokenizer.ggml.bos_token_id", -1, n));
    KVEDGE_ASSIGN_OR_RETURN(const int eos, TokenId(g, "tokenizer.ggml.eos_token_id", -1, n));
    return wrap(Gpt2Tokenizer::Create(std::move(pieces), merges->strings, bos, eos));
  }
  return Unsupported(g.name() + ": tokenizer model '" + std::string(model->str.substr(0, 64)) +
                     "' is not supported (kvedge reads 'llama' and 'gpt2')");
}

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const ModelWeights& model, const std::string& tokenizer_bin_path) {
  std::unique_ptr<Tokenizer> t;
  if (!tokenizer_bin_path.empty()) {
    KVEDGE_ASSIGN_OR_RETURN(t, LoadLlama2cTokenizer(tokenizer_bin_path, model.config.vocab_size));
  } else if (model.format == "gguf") {
    KVEDGE_ASSIGN_OR_RETURN(GgufFile g, GgufFile::Parse(model.source, model.source_size,
                                                               model.file.path().empty() ? model.config.name : model.file.path()));
    KVEDGE_ASSIGN_OR_RETURN(t, LoadGgufTokenizer(g));
  } else {
    return InvalidArgument("model '" + model.config.name +
                           "' is a llama2.c checkpoint without a vocabulary: give its tokenizer.bin");
  }
  if (t->vocab_size() != model.config.vocab_size) {
    return InvalidArgument("tokenizer has " + std::to_string(t->vocab_size()) + " tokens but model '" +
                           model.config.name + "' has vocab_size " + std::to_string(model.config.vocab_size));
  }
  return t;
}

}  // namespace kvedge
