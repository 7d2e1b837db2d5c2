// Session files: sections written through one buffered, hashed writer into a
// temporary file that is renamed into place; read back in two passes (all
// checksums and checks, then the copy into the arena).
#include "runtime/chat/session_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kvcache/kv_cache.h"
#include "runtime/model/fingerprint.h"

namespace kvedge {
namespace {

static_assert(std::endian::native == std::endian::little, "session files are little-endian; add byte swapping");

constexpr char kMagic[8] = {'K', 'V', 'E', 'D', 'G', 'E', 'S', 'F'};
constexpr size_t kHeaderBytes = 32;
constexpr size_t kSectionHeaderBytes = 16;
constexpr size_t kSectionTrailerBytes = 8;
constexpr size_t kBufferBytes = size_t{1} << 20;

constexpr uint32_t Tag(const char (&s)[5]) {
  return static_cast<uint32_t>(s[0]) | static_cast<uint32_t>(s[1]) << 8 | static_cast<uint32_t>(s[2]) << 16 |
         static_cast<uint32_t>(s[3]) << 24;
}
struct SectionKind {
  uint32_t tag;
  const char* name;
};
// Version 1: every section, in this order.
constexpr SectionKind kSections[] = {
    {Tag("MODL"), "MODL (model fingerprint)"},   {Tag("KVCF"), "KVCF (KV configuration)"},
    {Tag("STRM"), "STRM (stream and token history)"}, {Tag("SRNG"), "SRNG (sampler state)"},
    {Tag("LOGT"), "LOGT (last logits)"},          {Tag("KVST"), "KVST (KV cursors)"},
    {Tag("KVDT"), "KVDT (KV arena bytes)"},
};
constexpr size_t kSectionCount = std::size(kSections);
enum SectionIndex { kModel, kKvConfig, kStream, kRng, kLogits, kKvState, kKvData };

std::string Errno(int e) { return std::strerror(e); }

// ---------------------------------------------------------------------------
// The KV configuration a file is bound to: every plan field that shapes the
// arena's bytes or how they are read. Threads (scratch only) are not.

enum class FieldKind { kInt, kPolicy, kPositions, kFormat, kScore, kAxis, kRope, kBool, kF32, kF64 };
struct ConfigField {
  const char* name;
  FieldKind kind;
  uint64_t value;
};

uint64_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
uint64_t Bits(double d) { return std::bit_cast<uint64_t>(d); }
uint64_t Int(int64_t v) { return static_cast<uint64_t>(v); }

std::vector<ConfigField> ConfigFields(const KvCachePlan& p) {
  return {
      {"layers", FieldKind::kInt, Int(p.shape.n_layers)},
      {"query heads", FieldKind::kInt, Int(p.shape.n_heads)},
      {"kv heads", FieldKind::kInt, Int(p.shape.n_kv_heads)},
      {"head dim", FieldKind::kInt, Int(p.shape.head_dim)},
      {"rope dim", FieldKind::kInt, Int(p.shape.rope_dim)},
      {"rope theta", FieldKind::kF64, Bits(p.shape.rope_theta)},
      {"policy", FieldKind::kPolicy, Int(static_cast<int>(p.policy))},
      {"positions", FieldKind::kPositions, Int(static_cast<int>(p.positions))},
      {"key format", FieldKind::kFormat, Int(static_cast<int>(p.key_format))},
      {"value format", FieldKind::kFormat, Int(static_cast<int>(p.value_format))},
      {"tail format", FieldKind::kFormat, Int(static_cast<int>(p.tail_format))},
      {"h2o decay", FieldKind::kF32, Bits(p.h2o_decay)},
      {"h2o score", FieldKind::kScore, Int(static_cast<int>(p.h2o_score))},
      {"h2o lifetime", FieldKind::kInt, Int(p.h2o_lifetime)},
      {"key quantization axis", FieldKind::kAxis, Int(static_cast<int>(p.key_axis))},
      {"key rope", FieldKind::kRope, Int(static_cast<int>(p.key_rope))},
      {"hot tail", FieldKind::kBool, Int(p.hot_tail ? 1 : 0)},
      {"sinks", FieldKind::kInt, Int(p.sinks)},
      {"heavy hitters", FieldKind::kInt, Int(p.heavy)},
      {"window", FieldKind::kInt, Int(p.window)},
      {"capacity", FieldKind::kInt, Int(p.capacity)},
      {"heavy blocks", FieldKind::kInt, Int(p.heavy_blocks)},
      {"ring blocks", FieldKind::kInt, Int(p.ring_blocks)},
      {"key block bytes", FieldKind::kInt, Int(static_cast<int64_t>(p.key_block_bytes))},
      {"value block bytes", FieldKind::kInt, Int(static_cast<int64_t>(p.value_block_bytes))},
      {"tail key bytes", FieldKind::kInt, Int(static_cast<int64_t>(p.tail_key_bytes))},
      {"tail value bytes", FieldKind::kInt, Int(static_cast<int64_t>(p.tail_value_bytes))},
      {"lane bytes", FieldKind::kInt, Int(static_cast<int64_t>(p.lane_bytes))},
  };
}

std::string FieldText(FieldKind kind, uint64_t v) {
  const auto name = [&](auto count, auto fn) -> std::string {
    if (v < static_cast<uint64_t>(count)) return fn(v);
    return "#" + std::to_string(v);
  };
  switch (kind) {
    case FieldKind::kInt: return std::to_string(static_cast<int64_t>(v));
    case FieldKind::kPolicy: return name(4, [](uint64_t x) { return EvictionPolicyName(static_cast<EvictionPolicy>(x)); });
    case FieldKind::kPositions: return name(2, [](uint64_t x) { return PositionModeName(static_cast<PositionMode>(x)); });
    case FieldKind::kFormat: return name(4, [](uint64_t x) { return KvFormatName(static_cast<KvFormat>(x)); });
    case FieldKind::kScore: return name(3, [](uint64_t x) { return H2OScoreName(static_cast<H2OScore>(x)); });
    case FieldKind::kAxis: return name(2, [](uint64_t x) { return KeyQuantAxisName(static_cast<KeyQuantAxis>(x)); });
    case FieldKind::kRope: return name(3, [](uint64_t x) { return KeyRopeName(static_cast<KeyRope>(x)); });
    case FieldKind::kBool: return v == 0 ? "no" : v == 1 ? "yes" : "#" + std::to_string(v);
    case FieldKind::kF32: return std::to_string(std::bit_cast<float>(static_cast<uint32_t>(v)));
    case FieldKind::kF64: return std::to_string(std::bit_cast<double>(v));
  }
  return std::to_string(v);
}

// ---------------------------------------------------------------------------
// Little-endian payload building and bounds-checked parsing.

class Bytes {
 public:
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void I64(int64_t v) { Raw(&v, 8); }
  void I32(int32_t v) { Raw(&v, 4); }
  void Raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    data_.insert(data_.end(), b, b + n);
  }
  const std::vector<uint8_t>& data() const { return data_; }

 private:
  std::vector<uint8_t> data_;
};

class Parser {
 public:
  Parser(const std::vector<uint8_t>& data, const char* section) : data_(data), section_(section) {}
  template <typename T>
  Status Read(T* out) {
    if (data_.size() - pos_ < sizeof(T)) return Short(sizeof(T));
    std::memcpy(out, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return OkStatus();
  }
  Status Span(size_t n, const uint8_t** out) {
    if (data_.size() - pos_ < n) return Short(n);
    *out = data_.data() + pos_;
    pos_ += n;
    return OkStatus();
  }
  Status Done() const {
    if (pos_ != data_.size()) {
      return DataLoss(std::string("section ") + section_ + " has " + std::to_string(data_.size() - pos_) +
                      " unexpected trailing bytes");
    }
    return OkStatus();
  }
  size_t remaining() const { return data_.size() - pos_; }

 private:
  Status Short(size_t n) const {
    return DataLoss(std::string("section ") + section_ + " ends early: " + std::to_string(n) + " bytes needed at " +
                    std::to_string(pos_) + ", " + std::to_string(data_.size() - pos_) + " left");
  }
  const std::vector<uint8_t>& data_;
  const char* section_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------
// Writing.

// Buffered writes to a file descriptor, hashing what a section holds.
class Writer {
 public:
  explicit Writer(int fd) : fd_(fd), buffer_(kBufferBytes) {}
  Status Write(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    if (hashing_) XXH3_64bits_update(&hash_, b, n);
    if (used_ + n > buffer_.size()) KVEDGE_RETURN_IF_ERROR(Flush());
    if (n >= buffer_.size()) return WriteAll(b, n);
    std::memcpy(buffer_.data() + used_, b, n);
    used_ += n;
    return OkStatus();
  }
  void BeginHash() {
    XXH3_64bits_reset(&hash_);
    hashing_ = true;
  }
  uint64_t EndHash() {
    hashing_ = false;
    return XXH3_64bits_digest(&hash_);
  }
  Status Flush() {
    const Status s = WriteAll(buffer_.data(), used_);
    used_ = 0;
    return s;
  }

 private:
  Status WriteAll(const uint8_t* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return IoError("write failed: " + Errno(errno));
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return OkStatus();
  }
  int fd_;
  std::vector<uint8_t> buffer_;
  size_t used_ = 0;
  XXH3_state_t hash_;
  bool hashing_ = false;
};

std::vector<uint8_t> ModelPayload(const ModelFingerprint& f) {
  Bytes b;
  b.U64(f.hash);
  b.U32(static_cast<uint32_t>(f.description.size()));
  b.Raw(f.description.data(), f.description.size());
  return b.data();
}

std::vector<uint8_t> ConfigPayload(const KvCachePlan& plan) {
  const std::vector<ConfigField> fields = ConfigFields(plan);
  Bytes b;
  b.U32(static_cast<uint32_t>(fields.size()));
  for (const ConfigField& f : fields) b.U64(f.value);
  return b.data();
}

std::vector<uint8_t> StreamPayload(const Session& s) {
  const TokenHistory& h = s.history();
  Bytes b;
  b.U64(s.tokens_fed());
  b.U64(h.size());
  b.U64(h.hash());
  b.U32(static_cast<uint32_t>(h.held()));
  for (size_t i = 0; i < h.held(); ++i) b.I32(h.Recent(i));
  return b.data();
}

std::vector<uint8_t> CursorPayload(const std::vector<KvCache::LayerCursor>& cursors) {
  Bytes b;
  b.U32(static_cast<uint32_t>(cursors.size()));
  for (const KvCache::LayerCursor& c : cursors) {
    b.I64(c.seen);
    b.I64(c.evicted);
    b.I64(c.tail_start);
    for (int32_t v : {c.sinks_filled, c.heavy_count, c.ring_head, c.ring_count, c.first_valid, c.tail_count}) b.I32(v);
  }
  return b.data();
}

// One section: header, payload from `body` (exactly `length` bytes), hash.
Status WriteSection(Writer& w, uint32_t tag, uint64_t length, const std::function<Status()>& body) {
  w.BeginHash();
  uint8_t header[kSectionHeaderBytes] = {};
  std::memcpy(header, &tag, 4);
  std::memcpy(header + 8, &length, 8);
  KVEDGE_RETURN_IF_ERROR(w.Write(header, sizeof(header)));
  KVEDGE_RETURN_IF_ERROR(body());
  const uint64_t hash = w.EndHash();
  return w.Write(&hash, sizeof(hash));
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status WriteFile(int fd, const Session& session, const Sampler* sampler) {
  const KvCache& cache = session.cache();
  const std::vector<KvCache::LayerCursor> cursors = cache.Cursors();
  const std::vector<uint8_t> payloads[] = {
      ModelPayload(FingerprintModel(session.model())),
      ConfigPayload(cache.plan()),
      StreamPayload(session),
      {},
      {},
      CursorPayload(cursors),
  };
  const std::string rng = sampler != nullptr ? sampler->RngState() : std::string();
  const size_t logits_bytes =
      session.tokens_fed() > 0 ? static_cast<size_t>(session.vocab_size()) * sizeof(float) : 0;
  uint64_t lengths[kSectionCount];
  for (size_t i = 0; i < kSectionCount; ++i) lengths[i] = i < std::size(payloads) ? payloads[i].size() : 0;
  lengths[kRng] = rng.size();
  lengths[kLogits] = logits_bytes;
  lengths[kKvData] = cache.HeldSpanBytes(cursors);
  uint64_t file_bytes = kHeaderBytes;
  for (uint64_t n : lengths) file_bytes += kSectionHeaderBytes + n + kSectionTrailerBytes;

  Writer w(fd);
  uint8_t header[kHeaderBytes] = {};
  std::memcpy(header, kMagic, 8);
  const uint32_t version = kSessionFileVersion, count = kSectionCount;
  std::memcpy(header + 8, &version, 4);
  std::memcpy(header + 12, &count, 4);
  std::memcpy(header + 16, &file_bytes, 8);
  const uint64_t header_hash = XXH3_64bits(header, 24);
  std::memcpy(header + 24, &header_hash, 8);
  KVEDGE_RETURN_IF_ERROR(w.Write(header, sizeof(header)));
  for (size_t i = 0; i < kSectionCount; ++i) {
    KVEDGE_RETURN_IF_ERROR(WriteSection(w, kSections[i].tag, lengths[i], [&]() -> Status {
      switch (i) {
        case kRng: return w.Write(rng.data(), rng.size());
        case kLogits: return w.Write(session.Logits(), logits_bytes);
        case kKvData: {
          Status status;
          cache.ForEachHeldSpan([&](const uint8_t* p, size_t n) {
            if (status.ok()) status = w.Write(p, n);
          });
          return status;
        }
        default: return w.Write(payloads[i].data(), payloads[i].size());
      }
    }));
  }
  return w.Flush();
}

// ---------------------------------------------------------------------------
// Reading.

class FileReader {
 public:
  explicit FileReader(int fd) : fd_(fd) {}
  // Reads exactly n bytes at `offset` (the caller checked the file size).
  Status ReadAt(uint64_t offset, void* dst, size_t n) const {
    auto* p = static_cast<uint8_t*>(dst);
    while (n > 0) {
      const ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (r < 0) {
        if (errno == EINTR) continue;
        return IoError("read failed at offset " + std::to_string(offset) + ": " + Errno(errno));
      }
      if (r == 0) return DataLoss("the file shrank while being read (offset " + std::to_string(offset) + ")");
      p += r;
      n -= static_cast<size_t>(r);
      offset += static_cast<uint64_t>(r);
    }
    return OkStatus();
  }

 private:
  int fd_;
};

// Sequential reads from `offset` through a buffer, hashing every byte handed out.
class StreamReader {
 public:
  StreamReader(const FileReader& file, uint64_t offset, uint64_t length, std::vector<uint8_t>& buffer)
      : file_(file), next_(offset), left_(length), buffer_(buffer) {
    XXH3_64bits_reset(&hash_);
  }
  void Hash(const void* p, size_t n) { XXH3_64bits_update(&hash_, p, n); }
  // Copies the next n bytes to dst (null: skip them, hashing only).
  Status Read(uint8_t* dst, size_t n) {
    while (n > 0) {
      if (pos_ == filled_) {
        const size_t chunk = static_cast<size_t>(std::min<uint64_t>(left_, buffer_.size()));
        if (chunk == 0) return DataLoss("section data ends early");
        KVEDGE_RETURN_IF_ERROR(file_.ReadAt(next_, buffer_.data(), chunk));
        next_ += chunk;
        left_ -= chunk;
        pos_ = 0;
        filled_ = chunk;
      }
      const size_t take = std::min(n, filled_ - pos_);
      XXH3_64bits_update(&hash_, buffer_.data() + pos_, take);
      if (dst != nullptr) {
        std::memcpy(dst, buffer_.data() + pos_, take);
        dst += take;
      }
      pos_ += take;
      n -= take;
    }
    return OkStatus();
  }
  uint64_t Digest() const { return XXH3_64bits_digest(&hash_); }

 private:
  const FileReader& file_;
  uint64_t next_;
  uint64_t left_;
  std::vector<uint8_t>& buffer_;
  size_t pos_ = 0, filled_ = 0;
  XXH3_state_t hash_;
};

struct SectionRef {
  uint64_t offset = 0;  // of the payload
  uint64_t length = 0;
  uint64_t hash = 0;    // stored (and verified) section hash
  std::vector<uint8_t> payload;  // all but KVDT
};

class Loader {
 public:
  Loader(int fd, uint64_t size, Session& session, Sampler* sampler)
      : file_(fd), size_(size), session_(session), sampler_(sampler), buffer_(kBufferBytes) {}

  Status Run() {
    KVEDGE_RETURN_IF_ERROR(ReadHeader());
    KVEDGE_RETURN_IF_ERROR(ReadSections());
    KVEDGE_RETURN_IF_ERROR(CheckModel());
    KVEDGE_RETURN_IF_ERROR(CheckConfig());
    KVEDGE_RETURN_IF_ERROR(ParseCursors());
    KVEDGE_RETURN_IF_ERROR(ParseStream());
    KVEDGE_RETURN_IF_ERROR(ParseRngAndLogits());
    return Apply();
  }

 private:
  Status ReadHeader() {
    if (size_ < kHeaderBytes) {
      return DataLoss("truncated: " + std::to_string(size_) + " bytes, shorter than the 32-byte header");
    }
    uint8_t h[kHeaderBytes];
    KVEDGE_RETURN_IF_ERROR(file_.ReadAt(0, h, sizeof(h)));
    if (std::memcmp(h, kMagic, 8) != 0) return DataLoss("not a kvedge session file (no KVEDGESF magic)");
    uint32_t version, count;
    uint64_t file_bytes, hash;
    std::memcpy(&version, h + 8, 4);
    std::memcpy(&count, h + 12, 4);
    std::memcpy(&file_bytes, h + 16, 8);
    std::memcpy(&hash, h + 24, 8);
    if (XXH3_64bits(h, 24) != hash) return DataLoss("header checksum mismatch (the file is damaged)");
    if (version > kSessionFileVersion) {
      return Unsupported("written by a newer kvedge: format version " + std::to_string(version) +
                         ", this build reads version " + std::to_string(kSessionFileVersion) + " and older");
    }
    if (version == 0) return DataLoss("format version 0 does not exist");
    if (count != kSectionCount) {
      return DataLoss("the header lists " + std::to_string(count) + " sections; version 1 has " +
                      std::to_string(kSectionCount));
    }
    if (file_bytes != size_) {
      return DataLoss(size_ < file_bytes ? "truncated: " + std::to_string(size_) + " bytes, the header says " +
                                               std::to_string(file_bytes)
                                         : std::to_string(size_ - file_bytes) + " bytes after the end the header gives (" +
                                               std::to_string(file_bytes) + ")");
    }
    return OkStatus();
  }

  // Pass 1: walks every section, verifying its checksum; keeps the small ones.
  Status ReadSections() {
    uint64_t at = kHeaderBytes;
    for (size_t i = 0; i < kSectionCount; ++i) {
      const SectionKind& kind = kSections[i];
      if (size_ - at < kSectionHeaderBytes + kSectionTrailerBytes) {
        return DataLoss(std::string("section ") + kind.name + " at offset " + std::to_string(at) + " is cut short");
      }
      uint8_t h[kSectionHeaderBytes];
      KVEDGE_RETURN_IF_ERROR(file_.ReadAt(at, h, sizeof(h)));
      uint32_t tag, reserved;
      uint64_t length;
      std::memcpy(&tag, h, 4);
      std::memcpy(&reserved, h + 4, 4);
      std::memcpy(&length, h + 8, 8);
      if (tag != kind.tag || reserved != 0) {
        return DataLoss("expected section " + std::string(kind.name) + " at offset " + std::to_string(at) +
                        ", found tag 0x" + Hex(tag));
      }
      if (length > size_ - at - kSectionHeaderBytes - kSectionTrailerBytes) {
        return DataLoss(std::string("section ") + kind.name + " at offset " + std::to_string(at) + " claims " +
                        std::to_string(length) + " bytes; the file has " +
                        std::to_string(size_ - at - kSectionHeaderBytes - kSectionTrailerBytes) + " left");
      }
      SectionRef& s = sections_[i];
      s.offset = at + kSectionHeaderBytes;
      s.length = length;
      StreamReader in(file_, s.offset, length, buffer_);
      in.Hash(h, sizeof(h));
      if (i != kKvData) {
        s.payload.resize(static_cast<size_t>(length));
        KVEDGE_RETURN_IF_ERROR(in.Read(s.payload.data(), s.payload.size()));
      } else {
        KVEDGE_RETURN_IF_ERROR(in.Read(nullptr, static_cast<size_t>(length)));
      }
      KVEDGE_RETURN_IF_ERROR(file_.ReadAt(s.offset + length, &s.hash, sizeof(s.hash)));
      if (in.Digest() != s.hash) {
        return DataLoss(std::string("section ") + kind.name + " at offset " + std::to_string(at) +
                        ": checksum mismatch (the file is damaged)");
      }
      at = s.offset + length + kSectionTrailerBytes;
    }
    if (at != size_) return DataLoss(std::to_string(size_ - at) + " bytes after the last section");
    return OkStatus();
  }

  Status CheckModel() {
    Parser p(sections_[kModel].payload, kSections[kModel].name);
    uint64_t hash = 0;
    uint32_t len = 0;
    const uint8_t* text = nullptr;
    KVEDGE_RETURN_IF_ERROR(p.Read(&hash));
    KVEDGE_RETURN_IF_ERROR(p.Read(&len));
    KVEDGE_RETURN_IF_ERROR(p.Span(len, &text));
    KVEDGE_RETURN_IF_ERROR(p.Done());
    const ModelFingerprint here = FingerprintModel(session_.model());
    if (hash != here.hash) {
      return InvalidArgument("saved for another model: '" + std::string(reinterpret_cast<const char*>(text), len) +
                             "' (fingerprint " + Hex(hash) + "); this session runs '" + here.description +
                             "' (fingerprint " + Hex(here.hash) + ")");
    }
    return OkStatus();
  }

  Status CheckConfig() {
    Parser p(sections_[kKvConfig].payload, kSections[kKvConfig].name);
    const std::vector<ConfigField> here = ConfigFields(session_.cache().plan());
    uint32_t count = 0;
    KVEDGE_RETURN_IF_ERROR(p.Read(&count));
    if (count != here.size()) {
      return DataLoss("section KVCF lists " + std::to_string(count) + " fields; version 1 has " +
                      std::to_string(here.size()));
    }
    for (const ConfigField& f : here) {
      uint64_t saved = 0;
      KVEDGE_RETURN_IF_ERROR(p.Read(&saved));
      if (saved != f.value) {
        return InvalidArgument(std::string("saved with another KV configuration: ") + f.name + " is " +
                               FieldText(f.kind, saved) + " in the file, " + FieldText(f.kind, f.value) +
                               " in this session (" + session_.cache().plan().Describe() + ")");
      }
    }
    return p.Done();
  }

  Status ParseCursors() {
    Parser p(sections_[kKvState].payload, kSections[kKvState].name);
    uint32_t n = 0;
    KVEDGE_RETURN_IF_ERROR(p.Read(&n));
    if (n != static_cast<uint32_t>(session_.model().config.n_layers)) {
      return DataLoss("section KVST holds " + std::to_string(n) + " layers; the model has " +
                      std::to_string(session_.model().config.n_layers));
    }
    cursors_.resize(n);
    for (KvCache::LayerCursor& c : cursors_) {
      KVEDGE_RETURN_IF_ERROR(p.Read(&c.seen));
      KVEDGE_RETURN_IF_ERROR(p.Read(&c.evicted));
      KVEDGE_RETURN_IF_ERROR(p.Read(&c.tail_start));
      for (int32_t* v : {&c.sinks_filled, &c.heavy_count, &c.ring_head, &c.ring_count, &c.first_valid, &c.tail_count}) {
        KVEDGE_RETURN_IF_ERROR(p.Read(v));
      }
    }
    KVEDGE_RETURN_IF_ERROR(p.Done());
    KVEDGE_RETURN_IF_ERROR(session_.cache().CheckCursors(cursors_));
    for (const KvCache::LayerCursor& c : cursors_) {
      if (c.seen != cursors_[0].seen) return DataLoss("section KVST: layers saw different token counts");
    }
    const uint64_t expected = session_.cache().HeldSpanBytes(cursors_);
    if (sections_[kKvData].length != expected) {
      return DataLoss("section KVDT holds " + std::to_string(sections_[kKvData].length) +
                      " bytes; the KV cursors imply " + std::to_string(expected));
    }
    return OkStatus();
  }

  Status ParseStream() {
    Parser p(sections_[kStream].payload, kSections[kStream].name);
    uint32_t n = 0;
    KVEDGE_RETURN_IF_ERROR(p.Read(&tokens_fed_));
    KVEDGE_RETURN_IF_ERROR(p.Read(&history_size_));
    KVEDGE_RETURN_IF_ERROR(p.Read(&history_hash_));
    KVEDGE_RETURN_IF_ERROR(p.Read(&n));
    if (p.remaining() != static_cast<size_t>(n) * sizeof(int32_t)) {
      return DataLoss("section STRM: " + std::to_string(n) + " recent ids need " +
                      std::to_string(static_cast<uint64_t>(n) * 4) + " bytes, it holds " +
                      std::to_string(p.remaining()));
    }
    recent_.resize(n);
    const int vocab = session_.vocab_size();
    for (int32_t& id : recent_) {
      KVEDGE_RETURN_IF_ERROR(p.Read(&id));
      if (id < TokenHistory::kSyntheticToken || id >= vocab) {
        return DataLoss("section STRM: token id " + std::to_string(id) + " is outside the vocabulary");
      }
    }
    if (tokens_fed_ != static_cast<uint64_t>(cursors_[0].seen) || history_size_ != tokens_fed_ || n > tokens_fed_) {
      return DataLoss("section STRM: " + std::to_string(tokens_fed_) + " tokens fed, a history of " +
                      std::to_string(history_size_) + " (" + std::to_string(n) + " kept), the cache saw " +
                      std::to_string(cursors_[0].seen));
    }
    return OkStatus();
  }

  Status ParseRngAndLogits() {
    const std::vector<uint8_t>& rng = sections_[kRng].payload;
    if (sampler_ != nullptr && !rng.empty()) {
      probe_ = *sampler_;
      const Status s = probe_->SetRngState(std::string_view(reinterpret_cast<const char*>(rng.data()), rng.size()));
      if (!s.ok()) return DataLoss("section SRNG: " + s.message());
    }
    const uint64_t expected = tokens_fed_ > 0 ? static_cast<uint64_t>(session_.vocab_size()) * sizeof(float) : 0;
    if (sections_[kLogits].length != expected) {
      return DataLoss("section LOGT holds " + std::to_string(sections_[kLogits].length) + " bytes; expected " +
                      std::to_string(expected) + " (" + std::to_string(session_.vocab_size()) + " logits)");
    }
    return OkStatus();
  }

  // Pass 2: every check passed; copy. The arena bytes are hashed again on the
  // way in, so a file changed since pass 1 cannot leave a silent mix.
  Status Apply() {
    const SectionRef& data = sections_[kKvData];
    StreamReader in(file_, data.offset, data.length, buffer_);
    uint8_t header[kSectionHeaderBytes] = {};
    const uint32_t tag = kSections[kKvData].tag;
    std::memcpy(header, &tag, 4);
    std::memcpy(header + 8, &data.length, 8);
    in.Hash(header, sizeof(header));
    KvCache& cache = session_.mutable_cache();
    Status s = cache.Restore(cursors_, [&](uint8_t* dst, size_t n) { return in.Read(dst, n); });
    if (s.ok() && in.Digest() != data.hash) s = DataLoss("the file changed while it was being loaded");
    if (!s.ok()) {
      cache.Reset();
      session_.mutable_history().Clear();
      session_.RestoreStream(0, nullptr);
      return DataLoss(s.message() + " (the session was reset to empty)");
    }
    KVEDGE_CHECK(session_.mutable_history().Restore(history_size_, history_hash_, recent_.data(), recent_.size()).ok());
    const std::vector<uint8_t>& logits = sections_[kLogits].payload;
    session_.RestoreStream(tokens_fed_, logits.empty() ? nullptr : reinterpret_cast<const float*>(logits.data()));
    if (probe_.has_value()) *sampler_ = std::move(*probe_);
    return OkStatus();
  }

  static std::string Hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
    return buf;
  }

  FileReader file_;
  uint64_t size_;
  Session& session_;
  Sampler* sampler_;
  std::vector<uint8_t> buffer_;
  SectionRef sections_[kSectionCount];
  std::vector<KvCache::LayerCursor> cursors_;
  uint64_t tokens_fed_ = 0, history_size_ = 0, history_hash_ = 0;
  std::vector<int32_t> recent_;
  std::optional<Sampler> probe_;
};

}  // namespace

Status SaveSession(const Session& session, const Sampler* sampler, const std::string& path) {
  const std::string where = "session file '" + path + "': ";
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return IoError(where + "cannot create a temporary file beside it: " + Errno(errno));
  // A replaced file keeps its permissions; a new one is private (0600, as
  // mkstemp creates it): it holds a conversation.
  struct stat old;
  Status s;
  if (::stat(path.c_str(), &old) == 0 && ::fchmod(fd, old.st_mode & 07777) != 0) {
    s = IoError("cannot give the temporary file the permissions of the old one: " + Errno(errno));
  }
  if (s.ok()) s = WriteFile(fd, session, sampler);
  if (s.ok() && ::fsync(fd) != 0) s = IoError("fsync failed: " + Errno(errno));
  if (::close(fd) != 0 && s.ok()) s = IoError("close failed: " + Errno(errno));
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = IoError("rename into place failed: " + Errno(errno));
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return Status(s.code(), where + s.message() + " (the previous file, if any, is untouched)");
  }
  // The rename is durable once the directory entry is.
  const std::string dir = DirectoryOf(path);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return IoError(where + "saved, but cannot open directory '" + dir + "' to sync it: " + Errno(errno));
  const bool synced = ::fsync(dfd) == 0;
  const int e = errno;
  ::close(dfd);
  if (!synced) return IoError(where + "saved, but syncing directory '" + dir + "' failed: " + Errno(e));
  return OkStatus();
}

Status LoadSession(const std::string& path, Session* session, Sampler* sampler) {
  const std::string where = "session file '" + path + "': ";
  KVEDGE_CHECK(session != nullptr);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return NotFound("no session file '" + path + "'");
    return IoError(where + "cannot open: " + Errno(e));
  }
  struct stat st;
  Status s;
  if (::fstat(fd, &st) != 0) {
    s = IoError("cannot stat: " + Errno(errno));
  } else if (!S_ISREG(st.st_mode)) {
    s = InvalidArgument("not a regular file");
  } else {
    s = Loader(fd, static_cast<uint64_t>(st.st_size), *session, sampler).Run();
  }
  ::close(fd);
  if (!s.ok()) return Status(s.code(), where + s.message());
  return OkStatus();
}

}  // namespace kvedge
