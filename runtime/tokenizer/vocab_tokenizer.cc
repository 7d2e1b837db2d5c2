// llama.cpp's vocabulary semantics (llama-vocab.cpp, read for its behaviour):
// defaults per model and pre-tokenizer, special tokens cut out of the text
// first, then SentencePiece merges by score or BPE merges by rank.
#include "runtime/tokenizer/vocab_tokenizer.h"

#include <algorithm>
#include <array>
#include <optional>
#include <queue>
#include <utility>

#include "runtime/tokenizer/utf8.h"

namespace kvedge {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// GPT-2's byte → code point map (printable bytes map to themselves, the rest
// to U+0100 onwards), as UTF-8.
const std::array<std::string, 256>& ByteToUnicode() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      AppendUtf8(printable ? static_cast<uint32_t>(b) : 256u + extra++, &t[b]);
    }
    return t;
  }();
  return table;
}

uint8_t AttrOfType(int32_t type) {
  switch (type) {
    case 1: return kTokenAttrNormal;
    case 2: return kTokenAttrUnknown;
    case 3: return kTokenAttrControl;
    case 4: return kTokenAttrUserDefined;
    case 5: return kTokenAttrUnused;
    case 6: return kTokenAttrByte;
    default: return kTokenAttrUndefined;
  }
}

void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s->size());
  size_t pos = 0;
  for (size_t hit; (hit = s->find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(*s, pos, hit - pos);
    out.append(to);
  }
  out.append(*s, pos, std::string::npos);
  s->swap(out);
}

// Valid UTF-8, each byte that does not start a valid sequence read as U+FFFD
// (llama.cpp's unicode_cpts_from_utf8 does the same for truncated sequences
// and stray bytes).
std::string ReplaceInvalidUtf8(std::string_view text) {
  if (FindInvalidUtf8(text) == kUtf8Valid) return std::string(text);
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp;
    const int len = DecodeUtf8(text, pos, &cp);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++pos;
    } else {
      out.append(text, pos, len);
      pos += len;
    }
  }
  return out;
}

bool IsAsciiSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// Texts llama.cpp recognises (llama_vocab::impl::load), in its order.
constexpr std::string_view kEotTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                          "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                          "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                          "<end_of_utterance>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~["};

template <size_t N>
bool OneOf(std::string_view s, const std::string_view (&list)[N]) {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

// One symbol of a text being merged: a run of its bytes, linked to its
// neighbours (indices into the symbol vector, -1 at either end).
struct Symbol {
  int prev, next;
  size_t begin, len;  // bytes of the text; len 0 once merged away
};

// One symbol per UTF-8 character of `text` (a byte that starts no valid
// sequence is a symbol of its own), linked in order.
std::vector<Symbol> CharacterSymbols(std::string_view text) {
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp;
    const size_t len = std::max(DecodeUtf8(text, pos, &cp), 1);
    const int i = static_cast<int>(sym.size());
    sym.push_back({i - 1, -1, pos, len});
    if (i > 0) sym[i - 1].next = i;
    pos += len;
  }
  return sym;
}

// A mergeable pair of adjacent symbols: SPM ranks by −score (best score
// first), BPE by merge rank.
template <typename Rank>
struct Bigram {
  Rank rank;
  int left, right;
  size_t size;
};
template <typename Rank>
struct BigramOrder {  // priority_queue's comparator: lowest rank first, leftmost on ties
  bool operator()(const Bigram<Rank>& a, const Bigram<Rank>& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

// Merges adjacent symbols, best pair first, until no adjacent pair is
// mergeable. `pair(l, r)` gives the Bigram of adjacent symbols l and r, or
// nothing when they do not merge; the lowest rank merges first. Entries left
// over from earlier merges are skipped.
template <typename Rank, typename Pair>
void MergeBestFirst(std::vector<Symbol>& sym, Pair pair) {
  std::priority_queue<Bigram<Rank>, std::vector<Bigram<Rank>>, BigramOrder<Rank>> queue;
  const auto consider = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    if (const std::optional<Bigram<Rank>> b = pair(l, r)) queue.push(*b);
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) consider(i - 1, i);
  while (!queue.empty()) {
    const Bigram<Rank> b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.size || l.next != b.right) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    consider(l.prev, b.left);
    consider(b.left, l.next);
  }
}

}  // namespace

const std::string& Gpt2ByteToUnicode(uint8_t byte) { return ByteToUnicode()[byte]; }

StatusOr<std::unique_ptr<VocabTokenizer>> VocabTokenizer::Create(VocabSpec spec) {
  const bool bpe = spec.model == "gpt2";
  if (!bpe && spec.model != "llama") {
    return Unsupported("tokenizer model '" + spec.model.substr(0, 64) +
                       "' is not supported (kvedge reads 'llama' and 'gpt2')");
  }
  const int n = static_cast<int>(spec.tokens.size());
  if (n == 0) return InvalidArgument("the vocabulary holds no tokens");
  if ((!spec.scores.empty() && spec.scores.size() != spec.tokens.size()) ||
      (!spec.types.empty() && spec.types.size() != spec.tokens.size())) {
    return InvalidArgument("tokenizer arrays disagree: " + std::to_string(n) + " tokens, " +
                           std::to_string(spec.scores.size()) + " scores, " + std::to_string(spec.types.size()) +
                           " token types");
  }
  std::unique_ptr<VocabTokenizer> t(new VocabTokenizer());
  if (bpe) {
    KVEDGE_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::Create(spec.pre));
    t->ignore_merges_ = pre.traits().ignore_merges;
    t->add_bos_ = pre.traits().add_bos;
    t->pre_ = std::move(pre);
  } else {
    t->add_space_prefix_ = true;
    t->add_bos_ = true;
  }
  t->add_space_prefix_ = spec.add_space_prefix.value_or(t->add_space_prefix_);
  t->add_bos_ = spec.add_bos.value_or(t->add_bos_);
  t->add_eos_ = spec.add_eos.value_or(false);

  t->pieces_ = std::move(spec.tokens);
  t->scores_ = spec.scores.empty() ? std::vector<float>(n, 0.0f) : std::move(spec.scores);
  t->attrs_.resize(n);
  t->ids_.reserve(n);
  for (int i = 0; i < n; ++i) {
    std::string& p = t->pieces_[i];
    if (p.empty()) p = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp names them
    t->attrs_[i] = spec.types.empty() ? uint8_t{kTokenAttrNormal} : AttrOfType(spec.types[i]);
  }
  for (int i = 0; i < n; ++i) {
    const auto [it, fresh] = t->ids_.emplace(t->pieces_[i], i);
    if (!fresh) {
      return InvalidArgument("duplicate token in the vocabulary: '" + t->pieces_[i].substr(0, 64) + "' has ids " +
                             std::to_string(it->second) + " and " + std::to_string(i));
    }
  }
  if (bpe) {
    t->merges_ = std::move(spec.merges);
    t->ranks_.reserve(t->merges_.size());
    for (size_t r = 0; r < t->merges_.size(); ++r) t->ranks_.emplace(t->merges_[r], static_cast<int>(r));
  }

  // Special ids: llama.cpp's defaults (SentencePiece 1/2/0, BPE 11/11 from
  // Falcon), dropped when outside the vocabulary; the GGUF's keys win.
  const auto default_id = [n](int id) { return id < n ? id : -1; };
  int bos = default_id(bpe ? 11 : 1), eos = default_id(bpe ? 11 : 2), unk = bpe ? -1 : default_id(0);
  int eot = -1, eom = -1, pad = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  const std::pair<const char*, std::pair<const std::optional<int64_t>*, int*>> keys[] = {
      {"bos_token_id", {&spec.bos, &bos}},         {"eos_token_id", {&spec.eos, &eos}},
      {"eot_token_id", {&spec.eot, &eot}},         {"eom_token_id", {&spec.eom, &eom}},
      {"unknown_token_id", {&spec.unk, &unk}},     {"padding_token_id", {&spec.pad, &pad}},
      {"fim_pad_token_id", {&spec.fim_pad, &fim_pad}}, {"fim_rep_token_id", {&spec.fim_rep, &fim_rep}},
      {"fim_sep_token_id", {&spec.fim_sep, &fim_sep}},
  };
  for (const auto& [key, slot] : keys) {
    const std::optional<int64_t>& given = *slot.first;
    // Converters write "none" as -1, which a uint32 key stores as 0xFFFFFFFF.
    if (!given || *given == -1 || *given == 0xFFFFFFFF) continue;
    if (*given < 0 || *given >= n) {
      return InvalidArgument(std::string("tokenizer.ggml.") + key + " = " + std::to_string(*given) +
                             " is not a token id (vocabulary of " + std::to_string(n) + ")");
    }
    *slot.second = static_cast<int>(*given);
  }
  if (t->add_bos_ && bos < 0) return InvalidArgument("add_bos_token is true but the vocabulary has no BOS token");
  if (t->add_eos_ && eos < 0) return InvalidArgument("add_eos_token is true but the vocabulary has no EOS token");

  // Tokens llama.cpp recognises by their text; each becomes a control token.
  std::vector<bool> eog(n, false);
  for (int i = 0; i < n; ++i) {
    const std::string_view text = t->pieces_[i];
    bool control = false;
    if (eot < 0 && OneOf(text, kEotTexts)) eot = i, control = true;
    if (eom < 0 && text == "<|eom_id|>") eom = i, control = true;
    if (fim_pad < 0 && OneOf(text, kFimPadTexts)) fim_pad = i, control = true;
    if (fim_rep < 0 && OneOf(text, kFimRepTexts)) fim_rep = i, control = true;
    if (fim_sep < 0 && OneOf(text, kFimSepTexts)) fim_sep = i, control = true;
    if (OneOf(text, kEogTexts)) eog[i] = control = true;
    if (control) t->attrs_[i] |= kTokenAttrControl;
  }
  for (int id : {fim_pad, fim_rep, fim_sep, eos, eot, eom}) {
    if (id >= 0) eog[id] = true;
  }
  // gpt-oss renders these, so llama.cpp makes them user-defined.
  for (std::string_view text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    if (const int id = t->Find(text); id >= 0) t->attrs_[id] = kTokenAttrUserDefined;
  }
  // o200k_harmony / solar-open: <|end|> ends a message, not the generation.
  const auto eog_text = [&](std::string_view s) {
    const int id = t->Find(s);
    return id >= 0 && eog[id];
  };
  if (eog_text("<|end|>") && ((eog_text("<|return|>") && eog_text("<|call|>")) ||
                              ((eog_text("<|call|>") || eog_text("<|calls|>")) && eog_text("<|flush|>")))) {
    const int end = t->Find("<|end|>");
    eog[end] = false;
    t->attrs_[end] = kTokenAttrUserDefined;
  }
  if (eog_text("<|tool_response>") && eog_text("</s>")) {  // gemma4
    const int s = t->Find("</s>");
    eog[s] = false;
    t->attrs_[s] = kTokenAttrNormal;
  }

  for (int i = 0; i < n; ++i) {
    if (t->attrs_[i] & (kTokenAttrControl | kTokenAttrUserDefined | kTokenAttrUnknown)) t->special_.push_back(i);
  }
  std::stable_sort(t->special_.begin(), t->special_.end(),
                   [&](int a, int b) { return t->pieces_[a].size() > t->pieces_[b].size(); });
  // Phi-3's special tokens eat the spaces after them (llama.cpp keys this on
  // general.name).
  std::string name = spec.name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int id : t->special_) t->attrs_[id] |= kTokenAttrRstrip;
    if (const int id = t->Find("</s>"); id >= 0) t->attrs_[id] |= kTokenAttrRstrip;
    for (std::string_view s : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (const int id = t->Find(s); id >= 0) t->attrs_[id] &= ~kTokenAttrRstrip;
    }
  }

  // What each token prints as (llama.cpp's token_to_piece without specials).
  t->decoded_.resize(n);
  std::unordered_map<std::string_view, uint8_t> to_byte;
  if (bpe) {
    for (int b = 0; b < 256; ++b) to_byte.emplace(ByteToUnicode()[b], static_cast<uint8_t>(b));
  }
  for (int i = 0; i < n; ++i) {
    const uint8_t a = t->attrs_[i];
    const std::string& p = t->pieces_[i];
    std::string& out = t->decoded_[i];
    if (a & (kTokenAttrControl | kTokenAttrUnknown)) continue;
    if (a & kTokenAttrUserDefined) {
      out = p;
    } else if (a & kTokenAttrNormal) {
      if (!bpe) {
        out = p;
        ReplaceAll(&out, kSpaceMarker, " ");
        continue;
      }
      for (size_t pos = 0; pos < p.size();) {  // byte-level text back to bytes; others kept as UTF-8
        uint32_t cp;
        const int len = std::max(DecodeUtf8(p, pos, &cp), 1);
        const auto it = to_byte.find(std::string_view(p).substr(pos, len));
        if (it != to_byte.end()) {
          out.push_back(static_cast<char>(it->second));
        } else {
          out.append(p, pos, len);
        }
        pos += len;
      }
    } else if ((a & kTokenAttrByte) && ParseBytePiece(p) >= 0) {
      out.assign(1, static_cast<char>(ParseBytePiece(p)));
    }
  }
  t->bos_ = bos;
  t->eos_ = eos;
  t->eot_ = eot;
  t->unk_ = unk;
  t->eog_ = std::move(eog);
  t->strip_space_after_bos_ = !bpe && t->add_space_prefix_;
  return t;
}

int VocabTokenizer::Find(std::string_view text) const {
  const auto it = ids_.find(text);
  return it == ids_.end() ? -1 : it->second;
}

StatusOr<std::vector<int>> VocabTokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  // Cut the special tokens out of the text, longest first: fragments are
  // either a token (id ≥ 0) or a byte range of `text`.
  struct Fragment {
    int id;
    size_t begin, len;
  };
  std::vector<Fragment> frags, next;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  for (const int id : special_) {
    const uint8_t attr = attrs_[id];
    if (!options.parse_special && (attr & (kTokenAttrControl | kTokenAttrUnknown))) continue;
    const std::string_view s = pieces_[id];
    next.clear();
    for (const Fragment& f : frags) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      size_t begin = f.begin, end = f.begin + f.len;
      while (begin < end) {
        const size_t hit = text.substr(0, end).find(s, begin);
        if (hit == std::string_view::npos) break;
        size_t left_end = hit;
        if (attr & kTokenAttrLstrip) {
          while (left_end > begin && IsAsciiSpace(text[left_end - 1])) --left_end;
        }
        if (left_end > begin) next.push_back({-1, begin, left_end - begin});
        next.push_back({id, 0, 0});
        begin = hit + s.size();
        if (attr & kTokenAttrRstrip) {
          while (begin < end && IsAsciiSpace(text[begin])) ++begin;
        }
      }
      if (begin < end) next.push_back({-1, begin, end - begin});
    }
    frags.swap(next);
  }

  std::vector<int> out;
  if (options.add_special && add_bos_) out.push_back(bos_);
  bool prev_special = true;  // SentencePiece prefixes a space to text at the start or after a special token
  for (const Fragment& f : frags) {
    if (f.id >= 0) {
      out.push_back(f.id);
      prev_special = true;
      continue;
    }
    const std::string_view piece = text.substr(f.begin, f.len);
    if (is_bpe()) {
      KVEDGE_RETURN_IF_ERROR(EncodeBpe(piece, &out));
    } else {
      std::string escaped = add_space_prefix_ && prev_special ? " " : "";
      escaped.append(piece);
      ReplaceAll(&escaped, " ", kSpaceMarker);
      EncodeSpm(escaped, &out);
    }
    prev_special = false;
  }
  if (options.add_special && add_eos_) out.push_back(eos_);
  return out;
}

void VocabTokenizer::EncodeSpm(std::string_view text, std::vector<int>* out) const {
  // One symbol per UTF-8 character (a byte that starts no valid sequence is
  // a symbol of its own); adjacent symbols merge while their concatenation
  // is a token, best score first.
  std::vector<Symbol> sym = CharacterSymbols(text);
  MergeBestFirst<float>(sym, [&](int l, int r) -> std::optional<Bigram<float>> {
    const std::string_view joined = text.substr(sym[l].begin, sym[l].len + sym[r].len);
    const int id = Find(joined);
    if (id < 0) return std::nullopt;
    return Bigram<float>{-scores_[id], l, r, joined.size()};
  });
  for (int i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
    const std::string_view s = text.substr(sym[i].begin, sym[i].len);
    if (const int id = Find(s); id >= 0) {
      out->push_back(id);
      continue;
    }
    // Not a token (only single characters can be): its bytes' tokens,
    // "<0xXX>" or the byte itself; unknown when the vocabulary has neither.
    for (const char c : s) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      const uint8_t b = static_cast<uint8_t>(c);
      const char hex[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
      int id = Find(std::string_view(hex, 6));
      if (id < 0) id = Find(std::string_view(&c, 1));
      if (id < 0) id = unk_;
      if (id >= 0) out->push_back(id);
    }
  }
}

Status VocabTokenizer::EncodeBpe(std::string_view text, std::vector<int>* out) const {
  const std::string clean = ReplaceInvalidUtf8(text);
  KVEDGE_ASSIGN_OR_RETURN(const std::vector<size_t> lengths, pre_->Split(clean));
  std::string word;
  size_t start = 0;
  for (const size_t len : lengths) {
    word.clear();
    for (size_t i = start; i < start + len; ++i) word += ByteToUnicode()[static_cast<uint8_t>(clean[i])];
    EncodeBpeWord(word, out);
    start += len;
  }
  return OkStatus();
}

void VocabTokenizer::EncodeBpeWord(const std::string& word, std::vector<int>* out) const {
  if (ignore_merges_) {
    if (const int id = Find(word); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  std::vector<Symbol> sym = CharacterSymbols(word);  // `word` is valid UTF-8
  std::string key;
  MergeBestFirst<int>(sym, [&](int l, int r) -> std::optional<Bigram<int>> {
    key.assign(word, sym[l].begin, sym[l].len);
    key.push_back(' ');
    key.append(word, sym[r].begin, sym[r].len);
    const auto it = ranks_.find(key);
    if (it == ranks_.end()) return std::nullopt;
    return Bigram<int>{it->second, l, r, sym[l].len + sym[r].len};
  });
  for (int i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
    const std::string_view s = std::string_view(word).substr(sym[i].begin, sym[i].len);
    if (const int id = Find(s); id >= 0) {
      out->push_back(id);
      continue;
    }
    // A symbol that is not a token (a vocabulary without some byte tokens,
    // like Falcon's or StarCoder's): llama.cpp looks up each *byte* of its
    // byte-level text as a one-byte token, so ASCII survives and the rest is
    // dropped. Reproduced for identical ids.
    for (const char c : s) {
      if (const int id = Find(std::string_view(&c, 1)); id >= 0) out->push_back(id);
    }
  }
}

}  // namespace kvedge
