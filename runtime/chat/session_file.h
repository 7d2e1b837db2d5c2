// Session files: the whole state of a Session (and its sampler's random
// generator) saved to disk and restored exactly, so that a restored stream
// gives bit-identical logits and the same samples as one never stopped.
//
// Format (version 1, little-endian; docs/session-files.md):
//   header   32 bytes: "KVEDGESF", u32 version, u32 section count,
//            u64 file bytes, u64 XXH3-64 of the 24 bytes before it
//   sections, each {u32 tag, u32 0, u64 length, payload, u64 XXH3-64 of the
//            16-byte section header and the payload}, in this order:
//     MODL   the model fingerprint (runtime/model/fingerprint.h) and its description
//     KVCF   the KV cache layout: shape, policy, formats, S/H/W, blocks, bytes
//     STRM   tokens fed; token history: count, chained hash, recent ids
//     SRNG   the sampler's generator state (empty: none saved)
//     LOGT   the last logits, f32 [vocab] (empty before the first token)
//     KVST   the cache's per-layer cursors (KvCache::LayerCursor)
//     KVDT   the arena bytes holding tokens, as they are (KvCache::ForEachHeldSpan)
// Save and load cost ∝ the bytes the cache holds (at most the arena), never
// the stream's length.
#ifndef KVEDGE_RUNTIME_CHAT_SESSION_FILE_H_
#define KVEDGE_RUNTIME_CHAT_SESSION_FILE_H_

#include <cstdint>
#include <string>

#include "platform/status.h"
#include "runtime/engine/sampler.h"
#include "runtime/engine/session.h"

namespace kvedge {

inline constexpr uint32_t kSessionFileVersion = 1;

// Writes `session` (and `sampler`'s generator state, if not null) to `path`
// atomically: a temporary file in the same directory (PATH.tmp.XXXXXX),
// fsync, rename over `path`, fsync of the directory. Killed at any moment,
// `path` holds either its old content or the new file, never a mix (a
// killed save may leave its temporary file behind). Errors: IoError naming
// the step and the OS reason; `path` is then untouched. Reads the session
// only; allocates a 1 MiB write buffer.
Status SaveSession(const Session& session, const Sampler* sampler, const std::string& path);

// Restores `session` — created over the same model with the same KV
// configuration (threads and batch size may differ) — and, if `sampler` is
// not null and the file holds a generator state, the sampler's generator
// (its options stay the caller's). Every check runs before anything
// changes: on error the session and sampler are as before, except when the
// file changes on disk between the checksum pass and the copy (then the
// session is left empty). Errors, each naming the file and what:
//   NotFound      no such file
//   DataLoss      not a session file, truncated, a checksum mismatch, an
//                 inconsistent section
//   Unsupported   written by a newer kvedge (a higher format version)
//   InvalidArgument  saved for another model (fingerprints differ) or
//                 another KV configuration (names the first field that differs)
//   IoError       the OS refused to read
Status LoadSession(const std::string& path, Session* session, Sampler* sampler);

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_CHAT_SESSION_FILE_H_
