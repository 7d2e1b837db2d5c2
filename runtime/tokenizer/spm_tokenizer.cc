// SentencePiece-style BPE with llama2.c's exact merge order, driven by a
// priority queue over adjacent symbol pairs (O(n log n) instead of llama2.c's
// O(n²) rescans).
#include "runtime/tokenizer/spm_tokenizer.h"

#include <algorithm>
#include <cstring>
#include <queue>
#include <utility>

#include "platform/mapped_file.h"
#include "runtime/tokenizer/utf8.h"

namespace kvedge {
namespace {

// llama2.c starts its best score at -1e10 and needs a strictly greater one.
constexpr float kMinMergeScore = -1e10f;


struct Symbol {
  int id;
  int prev;  // index of the previous live symbol, -1 at the start
  int next;  // index of the next live symbol, -1 at the end
  bool alive;
};

struct Candidate {
  float score;
  int left;      // symbol index; merged symbols keep the left index, so it orders by position
  int right;
  int id;        // the merged piece
  int left_id;   // ids when queued: a stale entry no longer matches
  int right_id;
};

// Highest score first; leftmost on ties (llama2.c scans left to right with '>').
struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  }
};

}  // namespace

StatusOr<std::unique_ptr<SpmTokenizer>> SpmTokenizer::Create(std::vector<std::string> pieces,
                                                              std::vector<float> scores,
                                                              const std::vector<bool>& mergeable, int bos, int eos,
                                                              int unk) {
  const int n = static_cast<int>(pieces.size());
  if (scores.size() != pieces.size() || (!mergeable.empty() && mergeable.size() != pieces.size())) {
    return InvalidArgument("tokenizer: " + std::to_string(pieces.size()) + " pieces but " +
                           std::to_string(scores.size()) + " scores");
  }
  for (const auto& [what, id] : {std::pair{"BOS", bos}, std::pair{"EOS", eos}, std::pair{"unknown", unk}}) {
    if (id < 0 || id >= n) {
      return InvalidArgument(std::string("tokenizer: ") + what + " id " + std::to_string(id) +
                             " is outside the vocabulary of " + std::to_string(n));
    }
  }
  std::unique_ptr<SpmTokenizer> t(new SpmTokenizer());
  t->pieces_ = std::move(pieces);
  t->scores_ = std::move(scores);
  t->bos_ = bos;
  t->eos_ = eos;
  t->unk_ = unk;
  t->strip_space_after_bos_ = true;
  t->attrs_.assign(n, kTokenAttrNormal);
  t->attrs_[unk] = kTokenAttrUnknown;
  t->attrs_[bos] = t->attrs_[eos] = kTokenAttrControl;
  t->eog_.assign(n, false);
  t->eog_[eos] = true;
  std::fill(std::begin(t->byte_ids_), std::end(t->byte_ids_), unk);
  t->decoded_.resize(n);
  t->ids_.reserve(n);
  for (int i = 0; i < n; ++i) {
    const std::string& p = t->pieces_[i];
    const int byte = ParseBytePiece(p);
    if (byte >= 0) {
      if (t->byte_ids_[byte] == unk) t->byte_ids_[byte] = i;
      if (t->attrs_[i] == kTokenAttrNormal) t->attrs_[i] = kTokenAttrByte;
      t->decoded_[i] = std::string(1, static_cast<char>(byte));
    } else {
      t->decoded_[i] = p;
    }
    if (mergeable.empty() || mergeable[i]) t->ids_.emplace(p, i);  // first id wins on duplicates
  }
  return t;
}

SpmVocabulary SpmTokenizer::Vocabulary() const {
  SpmVocabulary v;
  v.pieces.reserve(static_cast<size_t>(vocab_size()));
  for (int i = 0; i < vocab_size(); ++i) v.pieces.emplace_back(TokenText(i));
  v.scores = scores_;
  v.bos = bos();
  v.eos = eos();
  v.unk = unk_;
  return v;
}

int SpmTokenizer::Lookup(std::string_view piece) const {
  const auto it = ids_.find(piece);
  return it == ids_.end() ? -1 : it->second;
}

StatusOr<std::vector<int>> SpmTokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int> out;
  if (options.add_special) out.push_back(bos_);
  if (text.empty()) return out;

  std::vector<Symbol> sym;
  sym.reserve(text.size() + 1);
  const auto push = [&sym](int id) {
    const int i = static_cast<int>(sym.size());
    sym.push_back({id, i - 1, -1, true});
    if (i > 0) sym[i - 1].next = i;
  };
  const int dummy_prefix = Lookup(" ");
  if (dummy_prefix >= 0) push(dummy_prefix);
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp;
    const int len = std::max(DecodeUtf8(text, pos, &cp), 1);  // a byte that starts no valid sequence stands alone
    const int id = Lookup(text.substr(pos, len));
    if (id >= 0) {
      push(id);
    } else {
      for (int k = 0; k < len; ++k) push(byte_ids_[static_cast<uint8_t>(text[pos + k])]);
    }
    pos += len;
  }

  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  std::string buf;
  const auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    buf.assign(pieces_[sym[left].id]);
    buf.append(pieces_[sym[right].id]);
    const int id = Lookup(buf);
    if (id < 0 || !(scores_[id] > kMinMergeScore)) return;
    queue.push({scores_[id], left, right, id, sym[left].id, sym[right].id});
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) consider(i, i + 1);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = sym[c.left];
    Symbol& r = sym[c.right];
    if (!l.alive || !r.alive || l.next != c.right || l.id != c.left_id || r.id != c.right_id) continue;
    l.id = c.id;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    r.alive = false;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
  for (int i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
  return out;
}

StatusOr<std::unique_ptr<SpmTokenizer>> ParseLlama2cTokenizer(const uint8_t* data, size_t size, int vocab_size,
                                                              const std::string& name) {
  size_t pos = 0;
  const auto read = [&](void* out, size_t n) {
    if (size - pos < n) return false;
    std::memcpy(out, data + pos, n);
    pos += n;
    return true;
  };
  int32_t max_len;
  if (!read(&max_len, 4)) return DataLoss(name + ": truncated: a tokenizer.bin starts with a 4-byte max_token_length");
  if (max_len <= 0 || max_len > (1 << 16)) {
    return DataLoss(name + ": max_token_length " + std::to_string(max_len) + " is out of range (expected 1..65536)");
  }
  // Each record is at least 8 bytes (score and length).
  if (vocab_size < 0 || static_cast<size_t>(vocab_size) > (size - pos) / 8) {
    return DataLoss(name + ": " + std::to_string(size) + " bytes cannot hold " + std::to_string(vocab_size) +
                    " tokens (the model's vocab_size); is this the model's tokenizer?");
  }
  std::vector<std::string> pieces;
  std::vector<float> scores;
  pieces.reserve(vocab_size);
  scores.reserve(vocab_size);
  for (int i = 0; vocab_size == 0 ? pos < size : i < vocab_size; ++i) {
    const size_t at = pos;
    float score;
    int32_t len;
    if (!read(&score, 4) || !read(&len, 4)) {
      return DataLoss(name + ": truncated: token #" + std::to_string(i) + " record at offset " + std::to_string(at) +
                      " needs 8 bytes, " + std::to_string(size - at) + " remain");
    }
    if (len < 0 || static_cast<size_t>(len) > size - pos) {
      return DataLoss(name + ": token #" + std::to_string(i) + " at offset " + std::to_string(at) + " has length " +
                      std::to_string(len) + ", past the file end (" + std::to_string(size) + " bytes)");
    }
    pieces.emplace_back(reinterpret_cast<const char*>(data + pos), len);
    scores.push_back(score);
    pos += len;
  }
  if (pos != size) {
    return DataLoss(name + ": " + std::to_string(size - pos) + " bytes left after " + std::to_string(vocab_size) +
                    " tokens (the model's vocab_size); is this the model's tokenizer?");
  }
  if (pieces.size() < 3) {
    return DataLoss(name + ": " + std::to_string(pieces.size()) + " tokens; llama2.c needs at least <unk>, BOS, EOS");
  }
  auto t = SpmTokenizer::Create(std::move(pieces), std::move(scores), {}, 1, 2, 0);
  if (!t.ok()) return Status(t.status().code(), name + ": " + t.status().message());
  return t;
}

StatusOr<std::unique_ptr<SpmTokenizer>> LoadLlama2cTokenizer(const std::string& path, int vocab_size) {
  KVEDGE_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  return ParseLlama2cTokenizer(file.data(), file.size(), vocab_size, path);
}

}  // namespace kvedge
