/* kvedge C API: load a Llama-family model once, run any number of independent
 * generation sessions over it, each with its own bounded, compressed KV cache. */
#ifndef KVEDGE_H_
#define KVEDGE_H_

#include <stddef.h>
#include <stdint.h>

/* The symbols libkvedge.so exports; everything else in it is hidden. */
#if defined(__GNUC__)
#define KVEDGE_API __attribute__((visibility("default")))
#else
#define KVEDGE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Conventions
 *
 * Errors: every fallible function returns a kvedge_status. On failure,
 * kvedge_last_error() gives a message for the calling thread ("function:
 * what, where, expected"); out-parameters are left untouched unless stated.
 * A NULL pointer where an object is required is KVEDGE_INVALID_ARGUMENT with
 * a message naming the argument, never a crash.
 *
 * Ownership: handles are created by *_load / *_create and released by the
 * matching *_free. Pointers returned through out-parameters (names, logits,
 * token pieces) are borrowed: never free them; their lifetime is stated.
 *
 * Threads: a kvedge_model is immutable and may be used from any number of
 * threads at once. A kvedge_session is used by one thread at a time (it may
 * move between threads); different sessions never share mutable state, so
 * they run fully in parallel, even over the same model.
 *
 * Allocation: all memory of a session is reserved by kvedge_session_create.
 * kvedge_session_feed_tokens, _sample, _generate, _logits, _stats and
 * kvedge_token_piece allocate nothing on success.
 *
 * ABI: handles are opaque. Every struct passed by pointer starts with
 * `size`, the bytes of the struct as the caller's code knows it, so later
 * versions can append fields: kvedge reads and writes only the fields that
 * fit, and an output struct's `size` is set to the bytes kvedge filled. The
 * inline functions below (kvedge_session_config_init, kvedge_model_get_info,
 * kvedge_session_stats) set `size` to the sizeof your code was compiled with
 * and call the exported *_sized function; bindings set `size` themselves.
 * ------------------------------------------------------------------------ */

/* The ABI this header describes: the number in libkvedge.so's SONAME. It
 * changes when a function or struct changes incompatibly; adding functions,
 * statuses or appended struct fields keeps it. */
#define KVEDGE_ABI_VERSION 0

/* The ABI of the loaded library; compare with KVEDGE_ABI_VERSION. */
KVEDGE_API int32_t kvedge_abi_version(void);

typedef enum kvedge_status {
  KVEDGE_OK = 0,
  KVEDGE_INVALID_ARGUMENT = 1, /* unusable argument: NULL, range, name, bad UTF-8 */
  KVEDGE_NOT_FOUND = 2,        /* a file does not exist */
  KVEDGE_CORRUPT = 3,          /* a file is truncated, corrupt or inconsistent */
  KVEDGE_UNSUPPORTED = 4,      /* well-formed, but not something kvedge implements */
  KVEDGE_OUT_OF_BUDGET = 5,    /* the byte budget / capacity cannot hold the cache */
  KVEDGE_CONTEXT_FULL = 6,     /* a "full" policy cache cannot take more tokens */
  KVEDGE_BUFFER_TOO_SMALL = 7, /* a caller buffer is too small; the size is reported */
  KVEDGE_FAILED_PRECONDITION = 8, /* wrong state, e.g. sampling before any token was fed */
  KVEDGE_IO = 9,               /* the OS refused (permissions, mmap, read) */
  KVEDGE_OUT_OF_MEMORY = 10,   /* the heap is exhausted */
  KVEDGE_INTERNAL = 11         /* a bug in kvedge */
} kvedge_status;

/* A static, human-readable name of a status ("ok", "not found", ...). Never NULL. */
KVEDGE_API const char* kvedge_status_name(kvedge_status status);

/* The message of the most recent failed call made by the calling thread, or ""
 * if none failed yet. Successful calls leave it unchanged. The pointer stays
 * valid for the thread's life; its text changes with the thread's next failure. */
KVEDGE_API const char* kvedge_last_error(void);

/* The library version, "MAJOR.MINOR.PATCH". Static storage. */
KVEDGE_API const char* kvedge_version(void);

/* ------------------------------------------------------------------------
 * Models
 * ------------------------------------------------------------------------ */

/* A loaded model (weights memory-mapped, used in place) and its tokenizer. */
typedef struct kvedge_model kvedge_model;

/* Loads a GGUF file or a llama2.c checkpoint (detected by content) and its
 * tokenizer: `tokenizer_path` names a llama2.c tokenizer.bin, or is NULL to
 * use the vocabulary embedded in a GGUF (llama2.c checkpoints need the path).
 * On success *out owns the model; release it with kvedge_model_free.
 * Errors: NOT_FOUND (message names the path), CORRUPT, UNSUPPORTED, IO,
 * INVALID_ARGUMENT (NULL model_path or out; a file that is no model; no
 * tokenizer for a llama2.c checkpoint; vocabulary sizes differ).
 * Thread-safe. */
KVEDGE_API kvedge_status kvedge_model_load(const char* model_path, const char* tokenizer_path,
                                           kvedge_model** out);

/* Releases the caller's reference. Sessions created from the model keep it
 * alive until they are freed, so models and sessions may be freed in any
 * order. NULL is a no-op. Must not race with other calls on the same handle. */
KVEDGE_API void kvedge_model_free(kvedge_model* model);

typedef struct kvedge_model_info {
  size_t size;              /* see "ABI" above */
  const char* name;         /* general.name or the file's base name; lives as long as the model */
  const char* format;       /* "gguf" or "llama2c"; lives as long as the model */
  int32_t vocab_size;
  int32_t context_length;   /* trained context, tokens */
  int32_t n_layers;
  int32_t dim;              /* embedding width */
  int32_t hidden_dim;       /* FFN inner width */
  int32_t n_heads;
  int32_t n_kv_heads;
  int32_t head_dim;
  int32_t bos_token;        /* -1 if the vocabulary has none */
  int32_t eos_token;        /* -1 if the vocabulary has none */
  uint64_t weight_bytes;    /* bytes of all weight tensors */
} kvedge_model_info;

/* Fills the first info->size bytes of *info and sets info->size to the bytes
 * filled. Errors: INVALID_ARGUMENT (NULL; info->size below the first
 * version's struct). Thread-safe. */
KVEDGE_API kvedge_status kvedge_model_get_info_sized(const kvedge_model* model, kvedge_model_info* info);

/* Fills *info (kvedge_model_get_info_sized with info->size = sizeof *info). */
static inline kvedge_status kvedge_model_get_info(const kvedge_model* model, kvedge_model_info* info) {
  if (info != NULL) info->size = sizeof(*info);
  return kvedge_model_get_info_sized(model, info);
}

/* Encodes NUL-terminated UTF-8 `text` into token ids, BOS first if `add_bos`
 * is non-zero. *n_tokens receives the number of ids the text needs; they are
 * written to out[0 .. *n_tokens) if that fits in `capacity`, else
 * KVEDGE_BUFFER_TOO_SMALL is returned and nothing is written (so out = NULL,
 * capacity = 0 asks for the size). Bytes that are not valid UTF-8 are
 * tokenized as llama.cpp does (byte tokens, or U+FFFD in byte-level BPE).
 * Errors: INVALID_ARGUMENT (NULL text or n_tokens, out NULL with
 * capacity > 0). Thread-safe. */
KVEDGE_API kvedge_status kvedge_tokenize(const kvedge_model* model, const char* text, int add_bos, int32_t* out,
                                         size_t capacity, size_t* n_tokens);

/* The bytes token `token` contributes to text when it follows `prev_token`
 * (pass -1 for none): the leading space of the first word after BOS is
 * dropped, byte-fallback tokens yield their raw byte, BOS/EOS yield nothing.
 * *piece points into the model (no copy, no allocation) and stays valid
 * while the model lives; it is followed by a NUL byte, but may itself hold
 * a NUL (the <0x00> token), so use *len. A piece may be part of a UTF-8
 * sequence that the next pieces complete. Errors: INVALID_ARGUMENT (NULL,
 * token outside the vocabulary). Thread-safe. */
KVEDGE_API kvedge_status kvedge_token_piece(const kvedge_model* model, int32_t prev_token, int32_t token,
                                            const char** piece, size_t* len);

/* ------------------------------------------------------------------------
 * Sessions
 * ------------------------------------------------------------------------ */

/* One token stream over a model: its KV cache, scratch, threads, sampler. */
typedef struct kvedge_session kvedge_session;

/* Session settings. Always start from kvedge_session_config_init, then
 * change fields. Strings are read during kvedge_session_create only; a NULL
 * string means its default. */
typedef struct kvedge_session_config {
  size_t size;              /* see "ABI" above; set by kvedge_session_config_init */
  /* KV cache */
  /* NULL policy / formats: the measured defaults, the same as the kvedge CLI's
   * (README "Defaults"): int8, or int4 when budget_bytes cannot hold the model's
   * context in int8; "sinks" with 2 sinks from 128 tokens, else "window". */
  const char* policy;       /* "full", "window", "sinks" (StreamingLLM), "h2o"; default NULL */
  const char* key_format;   /* "f32", "f16", "int8", "int4"; default NULL */
  const char* value_format; /* as key_format; default NULL */
  int32_t sinks;            /* pinned first tokens (sinks, h2o); -1: 4 for a given policy */
  int32_t heavy;            /* heavy-hitter slots (h2o); -1: policy default */
  int32_t window;           /* recent tokens kept; -1: what capacity leaves */
  int32_t capacity_tokens;  /* tokens per lane; 0: derive from budget_bytes */
  uint64_t budget_bytes;    /* KV arena bytes, used when capacity_tokens is 0.
                               Both 0 (and window -1): capacity = the model's context length */
  const char* positions;    /* "in-cache" (StreamingLLM, default) or "absolute" */
  float h2o_decay;          /* h2o score decay per step, (0, 1]; default 1 */
  /* Compute */
  int32_t threads;          /* 1 .. 256; default 1 */
  int32_t max_batch;        /* tokens per prefill chunk, 1 .. 4096; default 32 */
  /* Sampling (kvedge_session_sample / _generate) */
  float temperature;        /* 0: greedy; default 0.8 */
  int32_t top_k;            /* <= 0: no cut; default 40 */
  float top_p;              /* (0, 1], 1: no cut; default 0.95 */
  uint64_t seed;            /* default 0; the same seed reproduces the same stream */
} kvedge_session_config;

/* Writes the defaults above into the first config->size bytes of *config
 * and sets config->size to the bytes written. Errors: INVALID_ARGUMENT (NULL;
 * config->size below the first version's struct: nothing written). */
KVEDGE_API kvedge_status kvedge_session_config_init_sized(kvedge_session_config* config);

/* Writes the defaults above into *config. NULL is a no-op. */
static inline void kvedge_session_config_init(kvedge_session_config* config) {
  if (config == NULL) return;
  config->size = sizeof(*config);
  (void)kvedge_session_config_init_sized(config);
}

/* Creates a session over `model` (which it keeps alive) and reserves all its
 * memory. `config` NULL means the defaults; fields past config->size take
 * their defaults. Any number of sessions may exist
 * per model, created from any threads. On success *out owns the session.
 * Errors: INVALID_ARGUMENT (NULL model/out, unknown names, out-of-range
 * numbers, threads 0, config->size below the first version's struct), OUT_OF_BUDGET (budget or capacity below the minimum
 * the policy needs; the message names the minimum), OUT_OF_MEMORY. */
KVEDGE_API kvedge_status kvedge_session_create(const kvedge_model* model, const kvedge_session_config* config,
                                               kvedge_session** out);

/* Releases the session and its memory. NULL is a no-op. */
KVEDGE_API void kvedge_session_free(kvedge_session* session);

/* Feeds n token ids (tokens may be NULL when n is 0); afterwards the logits
 * are those after the last id. Allocates nothing. Errors: INVALID_ARGUMENT
 * (NULL, an id outside the vocabulary: nothing fed), CONTEXT_FULL (a "full"
 * cache lacks room for all n: nothing fed). */
KVEDGE_API kvedge_status kvedge_session_feed_tokens(kvedge_session* session, const int32_t* tokens, size_t n);

/* Tokenizes NUL-terminated UTF-8 `text` (BOS first if add_bos is non-zero)
 * and feeds the ids. Errors: as kvedge_tokenize and kvedge_session_feed_tokens;
 * on any error nothing is fed. */
KVEDGE_API kvedge_status kvedge_session_feed_text(kvedge_session* session, const char* text, int add_bos);

/* Picks the next token from the current logits with the session's sampler.
 * Does not feed it. Allocates nothing. Errors: INVALID_ARGUMENT (NULL),
 * FAILED_PRECONDITION (nothing fed yet). */
KVEDGE_API kvedge_status kvedge_session_sample(kvedge_session* session, int32_t* token);

/* The logits after the last fed token: *logits points to *n_vocab floats
 * owned by the session, valid until the next feed or kvedge_session_free.
 * Errors: INVALID_ARGUMENT (NULL), FAILED_PRECONDITION (nothing fed yet). */
KVEDGE_API kvedge_status kvedge_session_logits(const kvedge_session* session, const float** logits,
                                               int32_t* n_vocab);

/* The last token fed to the session, or -1 before the first; pass it as
 * prev_token to kvedge_token_piece. Errors: INVALID_ARGUMENT (NULL). */
KVEDGE_API kvedge_status kvedge_session_last_token(const kvedge_session* session, int32_t* token);

/* The model a session runs (borrowed; valid while the session lives). NULL
 * for a NULL session. */
KVEDGE_API const kvedge_model* kvedge_session_model(const kvedge_session* session);

typedef struct kvedge_stats {
  size_t size;              /* see "ABI" above */
  uint64_t tokens_seen;     /* tokens fed over the session's life */
  uint64_t tokens_held;     /* tokens in the cache now */
  uint64_t tokens_evicted;
  uint64_t capacity_tokens; /* tokens the cache holds at most */
  uint64_t arena_bytes;     /* KV arena, reserved once */
  uint64_t held_bytes;      /* cache storage holding tokens now */
  uint64_t f16_full_bytes;  /* what an f16 cache of every token seen would need */
  uint64_t reserved_bytes;  /* everything the session reserved: arena + scratch */
  double compression;       /* f16_full_bytes / held_bytes; 0 before any token */
} kvedge_stats;

/* Fills the first stats->size bytes of *stats and sets stats->size to the
 * bytes filled. Errors: INVALID_ARGUMENT (NULL; stats->size below the first
 * version's struct). */
KVEDGE_API kvedge_status kvedge_session_stats_sized(const kvedge_session* session, kvedge_stats* stats);

/* Fills *stats (kvedge_session_stats_sized with stats->size = sizeof *stats). */
static inline kvedge_status kvedge_session_stats(const kvedge_session* session, kvedge_stats* stats) {
  if (stats != NULL) stats->size = sizeof(*stats);
  return kvedge_session_stats_sized(session, stats);
}

/* Receives generated text (not NUL-terminated in general), always in whole
 * UTF-8 characters. Return 0 to continue, non-zero to stop. */
typedef int (*kvedge_piece_callback)(const char* piece, size_t len, void* user);

/* Generates up to max_tokens tokens: sample, feed, then hand the text to
 * `callback` (may be NULL), so every token whose text the callback saw is in
 * the session. A token that ends inside a UTF-8 character is passed on with
 * the token that completes it (the text may lag one token); when generation
 * ends mid-character, U+FFFD stands for the unfinished bytes (to see raw
 * bytes, drive decoding with _sample, _feed_tokens and kvedge_token_piece).
 * Stops early at EOS (which is neither fed nor passed on) or when the
 * callback returns non-zero. *n_generated (may be NULL) receives the number
 * of tokens fed, also on error. Errors: as kvedge_session_sample and
 * kvedge_session_feed_tokens (CONTEXT_FULL when a "full" cache fills up). */
KVEDGE_API kvedge_status kvedge_session_generate(kvedge_session* session, int32_t max_tokens,
                                                 kvedge_piece_callback callback, void* user, int32_t* n_generated);

/* ------------------------------------------------------------------------
 * Session files
 * ------------------------------------------------------------------------ */

/* Saves the session's whole state to `path`: the KV cache's bytes as they
 * are (no re-quantization), its positions and heavy-hitter scores, the token
 * history (count, hash and recent ids), the sampler's random state and the
 * last logits. The file is bound to the model (a fingerprint of its
 * configuration, tensor layout and some weights) and to the KV
 * configuration. Atomic: the file is written beside `path`, synced and
 * renamed over it, so a crash or kill leaves the old file or the new one.
 * Costs time in proportion to the bytes the cache holds; allocates a 1 MiB
 * buffer. Errors: INVALID_ARGUMENT (NULL), IO (the message names the step
 * and the OS reason; `path` is untouched). docs/session-files.md has the format. */
KVEDGE_API kvedge_status kvedge_session_save(const kvedge_session* session, const char* path);

/* Restores a state saved by kvedge_session_save into `session`, which must
 * run the same model with the same KV configuration (policy, formats, sizes;
 * threads and max_batch may differ). The next logits and, with the same
 * sampling settings, the next samples are bit-identical to those of the
 * saved session had it never stopped; the sampling settings themselves stay
 * the session's. All checks run before anything changes: on error the
 * session is as before. Errors: INVALID_ARGUMENT (NULL; a file saved for
 * another model or KV configuration — the message names what differs),
 * NOT_FOUND, CORRUPT (not a session file, truncated, a checksum mismatch),
 * UNSUPPORTED (written by a newer kvedge), IO. */
KVEDGE_API kvedge_status kvedge_session_load(kvedge_session* session, const char* path);

/* ------------------------------------------------------------------------
 * Chat templates
 * ------------------------------------------------------------------------ */

/* Renders a chat template for a conversation into the exact prompt text
 * Hugging Face transformers' apply_chat_template produces (Python jinja2
 * semantics; the template sees messages, add_generation_prompt, bos_token,
 * eos_token, and tools = documents = None; strftime_now() uses local time).
 *
 * template_source: NUL-terminated Jinja source, or NULL for the model's own
 *   tokenizer.chat_template; a model without one gets ChatML
 *   ("<|im_start|>role\ncontent<|im_end|>\n" per message, then
 *   "<|im_start|>assistant\n" with add_generation_prompt).
 * model: may be NULL when template_source and both tokens are given.
 * messages_json: NUL-terminated UTF-8 JSON array of message objects
 *   ([{"role": "user", "content": "Hi"}, ...]; other fields pass through).
 * bos_token, eos_token: NUL-terminated; NULL for the model's vocabulary
 *   strings ("" without a model).
 * out, capacity, out_len: *out_len receives the text's length in bytes
 *   (without the NUL). If capacity > *out_len the text and a NUL are written
 *   to out; otherwise KVEDGE_BUFFER_TOO_SMALL is returned and nothing is
 *   written (out = NULL, capacity = 0 asks for the size).
 *
 * Templates are untrusted input: nesting, evaluation steps, output (64 MiB)
 * and working memory are bounded. Errors: INVALID_ARGUMENT (NULL, invalid
 * JSON or UTF-8, a template syntax or runtime error; when the template calls
 * raise_exception(msg), kvedge_last_error() is
 * "kvedge_chat_template_render: " followed by msg), UNSUPPORTED (a jinja2
 * feature outside the subset kvedge implements), OUT_OF_BUDGET (a limit was
 * hit). Thread-safe. */
KVEDGE_API kvedge_status kvedge_chat_template_render(const kvedge_model* model, const char* template_source,
                                          const char* messages_json, int add_generation_prompt,
                                          const char* bos_token, const char* eos_token, char* out,
                                          size_t capacity, size_t* out_len);

/* ------------------------------------------------------------------------
 * Chat turns
 * ------------------------------------------------------------------------ */

/* A conversation on its own session: messages rendered through a chat
 * template; each reply feeds the cache only the text it has not seen yet.
 * Owns its session; holds a counted reference to the model. One thread at a
 * time per chat; different chats may run on different threads at once. */
typedef struct kvedge_chat kvedge_chat;

/* Creates a chat. `config`: as kvedge_session_create (NULL: defaults).
 * `system_prompt` (NULL or "": none) stays the first message across
 * kvedge_chat_reset. `template_source` (NULL: the model's chat template, or
 * ChatML when it has none). The template's end-of-turn text (what it writes
 * after an assistant message) stops replies, as do end-of-generation ids.
 * Errors: INVALID_ARGUMENT (NULL model/out, a bad config, a template that
 * cannot render a user/assistant exchange, invalid UTF-8), as
 * kvedge_session_create otherwise. */
KVEDGE_API kvedge_status kvedge_chat_create(const kvedge_model* model, const kvedge_session_config* config,
                                 const char* system_prompt, const char* template_source, kvedge_chat** out);
KVEDGE_API void kvedge_chat_free(kvedge_chat* chat);

/* Appends a message ("user", or any role the template accepts); nothing is
 * fed until kvedge_chat_generate_reply. Errors: INVALID_ARGUMENT (NULL, an
 * empty role, invalid UTF-8). */
KVEDGE_API kvedge_status kvedge_chat_add_message(kvedge_chat* chat, const char* role, const char* content);

/* Renders the chat with the assistant's turn opened, feeds what the cache has
 * not seen, and generates up to max_tokens (>= 0) tokens, passing text (whole
 * UTF-8 characters) to `callback` (may be NULL; a non-zero return stops). The
 * reply is appended as an "assistant" message. *n_generated (may be NULL)
 * receives the tokens generated. Errors: INVALID_ARGUMENT (NULL, a negative
 * max_tokens, a template error: nothing fed), CONTEXT_FULL (a "full" cache
 * filled up; the reply so far is kept). */
KVEDGE_API kvedge_status kvedge_chat_generate_reply(kvedge_chat* chat, int32_t max_tokens, kvedge_piece_callback callback,
                                         void* user, int32_t* n_generated);

/* Forgets every message but the system prompt and empties the cache. */
KVEDGE_API kvedge_status kvedge_chat_reset(kvedge_chat* chat);

/* The number of messages, and message i's role and content (NUL-terminated,
 * valid until the chat changes). Errors: INVALID_ARGUMENT (NULL, i out of range). */
KVEDGE_API kvedge_status kvedge_chat_message_count(const kvedge_chat* chat, size_t* count);
KVEDGE_API kvedge_status kvedge_chat_message(const kvedge_chat* chat, size_t i, const char** role, const char** content);

/* Saves the chat to `path` (its session, as kvedge_session_save) and to
 * `path`.chat (the messages and the text the cache holds, bound to the
 * session file by its token count and history hash), each file atomically.
 * Errors: INVALID_ARGUMENT (NULL), IO (the message names the step and the
 * OS reason; the old files are untouched). */
KVEDGE_API kvedge_status kvedge_chat_save(const kvedge_chat* chat, const char* path);

/* Restores a chat saved by kvedge_chat_save into `chat`, which must run the
 * same model with the same KV configuration: the messages, the cache and the
 * sampler's state, so the next reply is the one the saved chat would have
 * given. The chat's template and system prompt stay its own (give it the
 * same ones). The files are checked before anything changes: on error the
 * chat is as before, except when `path`.chat belongs to another state of
 * the session file (a save killed between its two renames), where the chat
 * is reset and CORRUPT returned. Errors: INVALID_ARGUMENT (NULL; a file
 * saved for another model or KV configuration), NOT_FOUND (no `path`),
 * CORRUPT (either file damaged or missing `path`.chat), UNSUPPORTED (written
 * by a newer kvedge), IO. */
KVEDGE_API kvedge_status kvedge_chat_load(kvedge_chat* chat, const char* path);

/* Memory and counters of the chat's session, as kvedge_session_stats_sized. */
KVEDGE_API kvedge_status kvedge_chat_stats_sized(const kvedge_chat* chat, kvedge_stats* stats);

/* Fills *stats (kvedge_chat_stats_sized with stats->size = sizeof *stats). */
static inline kvedge_status kvedge_chat_stats(const kvedge_chat* chat, kvedge_stats* stats) {
  if (stats != NULL) stats->size = sizeof(*stats);
  return kvedge_chat_stats_sized(chat, stats);
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVEDGE_H_ */
