// GPT-2 byte-level BPE: pre-split, byte → code point mapping, rank-ordered
// merges through a priority queue, vocabulary lookup.
#include "runtime/tokenizer/gpt2_tokenizer.h"

#include <array>
#include <queue>
#include <utility>

#include "runtime/tokenizer/utf8.h"

namespace kvedge {
namespace {

const std::array<std::string, 256>& ByteTable() {
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

bool IsSpace(uint32_t c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
bool IsDigit(uint32_t c) { return c >= '0' && c <= '9'; }
bool IsLetter(uint32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (IsSpace(c)) return false;
  if (c <= 0xBF || c == 0xD7 || c == 0xF7) return false;          // Latin-1 symbols
  if (c >= 0x2000 && c <= 0x206F) return false;                    // general punctuation
  if (c >= 0x3000 && c <= 0x303F) return false;                    // CJK punctuation
  return true;
}

// Code points of valid UTF-8 text with their byte offsets (offsets[n] = size).
void Split(std::string_view text, std::vector<uint32_t>* cps, std::vector<size_t>* offsets) {
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp;
    const int len = DecodeUtf8(text, pos, &cp);
    cps->push_back(cp);
    offsets->push_back(pos);
    pos += len;
  }
  offsets->push_back(text.size());
}

// Length in code points of the pre-token starting at cp index i.
size_t PreTokenLength(const std::vector<uint32_t>& c, size_t i) {
  const size_t n = c.size();
  const auto lower = [&](size_t k) { return k < n && c[k] < 0x80 ? c[k] | 0x20 : 0u; };
  if (c[i] == '\'' && i + 1 < n) {
    const uint32_t a = lower(i + 1), b = lower(i + 2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  const size_t start = i + (c[i] == ' ' && i + 1 < n && !IsSpace(c[i + 1]) ? 1 : 0);
  if (start < n && !IsSpace(c[start])) {
    size_t k = start;
    if (IsLetter(c[k])) {
      while (k < n && IsLetter(c[k])) ++k;
    } else if (IsDigit(c[k])) {
      while (k < n && IsDigit(c[k])) ++k;
    } else {
      while (k < n && !IsSpace(c[k]) && !IsLetter(c[k]) && !IsDigit(c[k])) ++k;
    }
    return k - i;
  }
  // Whitespace: \s+(?!\S) leaves the last space to prefix the next word.
  size_t k = i;
  while (k < n && IsSpace(c[k])) ++k;
  if (k < n && k - i > 1) --k;
  return k - i;
}

struct Candidate {
  int rank;
  int left;
  int right;
  size_t left_len;  // symbol lengths when queued: stale entries no longer match
  size_t right_len;
};
struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.left > b.left;
  }
};

}  // namespace

const std::string& Gpt2ByteToUnicode(uint8_t byte) { return ByteTable()[byte]; }

StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::Create(std::vector<std::string> tokens,
                                                                const std::vector<std::string_view>& merges, int bos,
                                                                int eos) {
  const int n = static_cast<int>(tokens.size());
  if (bos >= n || eos >= n) {
    return InvalidArgument("tokenizer: BOS/EOS id outside the vocabulary of " + std::to_string(n));
  }
  std::unique_ptr<Gpt2Tokenizer> t(new Gpt2Tokenizer());
  t->pieces_ = std::move(tokens);
  t->bos_ = bos;
  t->eos_ = eos;
  t->ids_.reserve(n);
  for (int i = 0; i < n; ++i) t->ids_.emplace(t->pieces_[i], i);
  for (int b = 0; b < 256; ++b) {
    if (!t->ids_.count(Gpt2ByteToUnicode(b))) {
      return InvalidArgument("tokenizer: the GPT-2 vocabulary has no token for byte " + std::to_string(b) + " ('" +
                             Gpt2ByteToUnicode(b) + "')");
    }
  }
  // Byte-level text back to bytes; code points outside the map (added
  // tokens) are kept as their UTF-8.
  std::unordered_map<uint32_t, uint8_t> to_byte;
  for (int b = 0; b < 256; ++b) {
    uint32_t cp;
    DecodeUtf8(Gpt2ByteToUnicode(b), 0, &cp);
    to_byte[cp] = static_cast<uint8_t>(b);
  }
  t->decoded_.resize(n);
  for (int i = 0; i < n; ++i) {
    const std::string& p = t->pieces_[i];
    std::string& out = t->decoded_[i];
    for (size_t pos = 0; pos < p.size();) {
      uint32_t cp;
      const int len = DecodeUtf8(p, pos, &cp);
      const auto it = len > 0 ? to_byte.find(cp) : to_byte.end();
      if (it != to_byte.end()) {
        out.push_back(static_cast<char>(it->second));
      } else {
        out.append(p, pos, len > 0 ? len : 1);
      }
      pos += len > 0 ? len : 1;
    }
  }
  t->merges_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const size_t space = merges[r].find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == merges[r].size() ||
        merges[r].find(' ', space + 1) != std::string_view::npos) {
      return InvalidArgument("tokenizer: merge #" + std::to_string(r) + " '" + std::string(merges[r].substr(0, 64)) +
                             "' is not two symbols separated by one space");
    }
    t->merges_.emplace_back(merges[r]);
  }
  for (size_t r = 0; r < t->merges_.size(); ++r) t->ranks_.emplace(t->merges_[r], static_cast<int>(r));
  return t;
}

void Gpt2Tokenizer::EncodeWord(std::string_view word, std::vector<int>* out) const {
  // Symbols are byte ranges of `mapped`; a merge extends the left range.
  std::string mapped;
  for (char ch : word) mapped += Gpt2ByteToUnicode(static_cast<uint8_t>(ch));
  struct Sym {
    size_t begin, len;
    int prev, next;
  };
  std::vector<Sym> sym;
  for (size_t pos = 0; pos < mapped.size();) {
    uint32_t cp;
    const int len = DecodeUtf8(mapped, pos, &cp);
    const int i = static_cast<int>(sym.size());
    sym.push_back({pos, static_cast<size_t>(len), i - 1, -1});
    if (i > 0) sym[i - 1].next = i;
    pos += len;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  std::string key;
  const auto consider = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    key.assign(mapped, sym[l].begin, sym[l].len);
    key.push_back(' ');
    key.append(mapped, sym[r].begin, sym[r].len);
    const auto it = ranks_.find(key);
    if (it != ranks_.end()) queue.push({it->second, l, r, sym[l].len, sym[r].len});
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) consider(i, i + 1);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Sym& l = sym[c.left];
    Sym& r = sym[c.right];
    if (l.len == 0 || r.len == 0 || l.next != c.right || l.len != c.left_len || r.len != c.right_len) continue;
    l.len += r.len;
    r.len = 0;  // dead
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
  for (int i = 0; i >= 0; i = sym[i].next) {
    const std::string_view s(mapped.data() + sym[i].begin, sym[i].len);
    const auto it = ids_.find(s);
    if (it != ids_.end()) {
      out->push_back(it->second);
      continue;
    }
    // A merge whose result is not in the vocabulary: fall back to its bytes
    // (every byte symbol is in the vocabulary, checked in Create).
    for (size_t pos = 0; pos < s.size();) {
      uint32_t cp;
      const int len = DecodeUtf8(s, pos, &cp);
      out->push_back(ids_.find(s.substr(pos, len))->second);
      pos += len;
    }
  }
}

StatusOr<std::vector<int>> Gpt2Tokenizer::Encode(std::string_view text, bool add_bos) const {
  const size_t bad = FindInvalidUtf8(text);
  if (bad != kUtf8Valid) {
    return InvalidArgument("invalid UTF-8 at byte " + std::to_string(bad) + " of the prompt");
  }
  std::vector<int> out;
  if (add_bos && bos_ >= 0) out.push_back(bos_);
  std::vector<uint32_t> cps;
  std::vector<size_t> offsets;
  Split(text, &cps, &offsets);
  for (size_t i = 0; i < cps.size();) {
    const size_t len = PreTokenLength(cps, i);
    EncodeWord(text.substr(offsets[i], offsets[i + len] - offsets[i]), &out);
    i += len;
  }
  return out;
}

}  // namespace kvedge
