/* The C API end to end, compiled as C: reference greedy output of stories260K
 * through kvedge.h, and its error paths. Prints "N passed, M failed" last. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvedge.h"

static int g_passed = 0;
static int g_failed = 0;

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (cond) {                                                                  \
      ++g_passed;                                                                \
    } else {                                                                     \
      ++g_failed;                                                                \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n  last error: %s\n", __FILE__, \
              __LINE__, #cond, kvedge_last_error());                             \
    }                                                                            \
  } while (0)

/* True if the thread's last error contains `needle`. */
static int ErrorMentions(const char* needle) { return strstr(kvedge_last_error(), needle) != NULL; }

static const int32_t kPrompt[] = {1, 403, 407, 261, 378};
static const int32_t kGreedy50[] = {432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401,
                                    396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433,
                                    426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388,
                                    426, 338, 391, 266, 267, 337, 335, 312, 432, 398, 312};
static const char kGreedyText[] =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, "
    "she saw a big, red ball. She wanted to play with it, but it";
static const char kPromptText[] = "Once upon a time";

static char g_model_path[4096];
static char g_tokenizer_path[4096];

/* Text collected by the generate callback. */
typedef struct {
  char text[4096];
  size_t len;
  int calls;
  int stop_after; /* stop when calls reaches this; 0: never */
} Collector;

static int Collect(const char* piece, size_t len, void* user) {
  Collector* c = (Collector*)user;
  if (c->len + len < sizeof(c->text)) {
    memcpy(c->text + c->len, piece, len);
    c->len += len;
    c->text[c->len] = '\0';
  }
  ++c->calls;
  return c->stop_after > 0 && c->calls >= c->stop_after;
}

static kvedge_session_config GreedyF32Full(void) {
  kvedge_session_config config;
  kvedge_session_config_init(&config);
  config.policy = "full";
  config.key_format = "f32";
  config.value_format = "f32";
  config.temperature = 0.0f;
  return config;
}

static void TestVersionAndNames(void) {
  CHECK(strcmp(kvedge_version(), "") != 0);
  CHECK(strcmp(kvedge_status_name(KVEDGE_OK), "ok") == 0);
  CHECK(strcmp(kvedge_status_name(KVEDGE_NOT_FOUND), "not found") == 0);
  CHECK(strcmp(kvedge_status_name((kvedge_status)99), "unknown status") == 0);
}

static void TestModelInfoAndTokenize(const kvedge_model* model) {
  kvedge_model_info info;
  CHECK(kvedge_model_get_info(model, &info) == KVEDGE_OK);
  CHECK(info.vocab_size == 512);
  CHECK(info.context_length == 512);
  CHECK(info.n_layers == 5);
  CHECK(info.dim == 64);
  CHECK(info.n_heads == 8 && info.n_kv_heads == 4 && info.head_dim == 8);
  CHECK(info.bos_token == 1 && info.eos_token == 2);
  CHECK(info.name != NULL && info.name[0] != '\0');
  CHECK(strcmp(info.format, "llama2c") == 0);

  size_t n = 0;
  CHECK(kvedge_tokenize(model, kPromptText, 1, NULL, 0, &n) == KVEDGE_BUFFER_TOO_SMALL);
  CHECK(n == 5);
  int32_t ids[8] = {0};
  CHECK(kvedge_tokenize(model, kPromptText, 1, ids, 4, &n) == KVEDGE_BUFFER_TOO_SMALL);
  CHECK(ids[0] == 0); /* nothing written */
  CHECK(kvedge_tokenize(model, kPromptText, 1, ids, 8, &n) == KVEDGE_OK);
  CHECK(n == 5 && memcmp(ids, kPrompt, sizeof(kPrompt)) == 0);
  CHECK(kvedge_tokenize(model, "", 0, ids, 8, &n) == KVEDGE_OK && n == 0);
}

/* Sample + feed by hand: the reference ids, then their text through token pieces. */
static void TestReferenceGreedyIds(const kvedge_model* model) {
  const kvedge_session_config config = GreedyF32Full();
  kvedge_session* session = NULL;
  CHECK(kvedge_session_create(model, &config, &session) == KVEDGE_OK);
  if (session == NULL) return;
  int32_t last = 0;
  CHECK(kvedge_session_last_token(session, &last) == KVEDGE_OK && last == -1);
  CHECK(kvedge_session_feed_text(session, kPromptText, 1) == KVEDGE_OK);
  CHECK(kvedge_session_last_token(session, &last) == KVEDGE_OK && last == 378);

  int32_t ids[55];
  memcpy(ids, kPrompt, sizeof(kPrompt));
  int ok = 1;
  for (int i = 0; i < 50 && ok; ++i) {
    int32_t token = -1;
    ok = kvedge_session_sample(session, &token) == KVEDGE_OK &&
         kvedge_session_feed_tokens(session, &token, 1) == KVEDGE_OK;
    ids[5 + i] = token;
  }
  CHECK(ok);
  CHECK(memcmp(ids + 5, kGreedy50, sizeof(kGreedy50)) == 0);

  char text[1024];
  size_t len = 0;
  int32_t prev = -1;
  for (int i = 0; i < 55; ++i) {
    const char* piece = NULL;
    size_t piece_len = 0;
    CHECK(kvedge_token_piece(model, prev, ids[i], &piece, &piece_len) == KVEDGE_OK);
    if (piece != NULL && len + piece_len < sizeof(text)) {
      memcpy(text + len, piece, piece_len);
      len += piece_len;
    }
    prev = ids[i];
  }
  text[len] = '\0';
  CHECK(strcmp(text, kGreedyText) == 0);
  if (strcmp(text, kGreedyText) != 0) fprintf(stderr, "  got: %s\n", text);

  const float* logits = NULL;
  int32_t n_vocab = 0;
  CHECK(kvedge_session_logits(session, &logits, &n_vocab) == KVEDGE_OK);
  CHECK(logits != NULL && n_vocab == 512);

  kvedge_stats stats;
  CHECK(kvedge_session_stats(session, &stats) == KVEDGE_OK);
  CHECK(stats.tokens_seen == 55 && stats.tokens_held == 55 && stats.tokens_evicted == 0);
  CHECK(stats.capacity_tokens == 512); /* the model's context by default */
  CHECK(stats.arena_bytes > 0 && stats.reserved_bytes >= stats.arena_bytes);
  CHECK(stats.f16_full_bytes == 55ull * 5 * 4 * 8 * 2 * 2); /* tokens × lanes × head_dim × (K,V) × 2 bytes */
  /* Storage is held a block of 32 slots at a time: a sealed f32 block and the f32 tail, K and V, 20 lanes. */
  CHECK(stats.held_bytes == 20ull * 2 * 2 * 32 * 8 * 4);
  CHECK(stats.compression == (double)stats.f16_full_bytes / (double)stats.held_bytes);
  kvedge_session_free(session);
}

/* kvedge_session_generate: the same text through the callback; stopping early. */
static void TestGenerate(const kvedge_model* model) {
  const kvedge_session_config config = GreedyF32Full();
  kvedge_session* session = NULL;
  CHECK(kvedge_session_create(model, &config, &session) == KVEDGE_OK);
  if (session == NULL) return;
  CHECK(kvedge_session_feed_text(session, kPromptText, 1) == KVEDGE_OK);
  static Collector collector;
  memset(&collector, 0, sizeof(collector));
  int32_t n = -1;
  CHECK(kvedge_session_generate(session, 50, Collect, &collector, &n) == KVEDGE_OK);
  CHECK(n == 50 && collector.calls == 50);
  CHECK(strcmp(collector.text, kGreedyText + strlen(kPromptText)) == 0);

  memset(&collector, 0, sizeof(collector));
  collector.stop_after = 3;
  CHECK(kvedge_session_generate(session, 50, Collect, &collector, &n) == KVEDGE_OK);
  CHECK(n == 3 && collector.calls == 3);
  CHECK(strcmp(collector.text, " was too") == 0); /* the reference goes on "... but it was too high." */
  kvedge_stats stats;
  CHECK(kvedge_session_stats(session, &stats) == KVEDGE_OK && stats.tokens_seen == 58);
  CHECK(kvedge_session_generate(session, 0, NULL, NULL, &n) == KVEDGE_OK && n == 0);
  CHECK(kvedge_session_generate(session, -1, NULL, NULL, &n) == KVEDGE_INVALID_ARGUMENT);
  kvedge_session_free(session);
}

static void TestLoadErrors(void) {
  kvedge_model* model = NULL;
  const char* missing = "/nonexistent/kvedge/no_model.bin";
  CHECK(kvedge_model_load(missing, NULL, &model) == KVEDGE_NOT_FOUND);
  CHECK(ErrorMentions(missing));
  CHECK(model == NULL);
  CHECK(kvedge_model_load(g_model_path, "/nonexistent/tok.bin", &model) == KVEDGE_NOT_FOUND);
  CHECK(ErrorMentions("/nonexistent/tok.bin"));
  /* A llama2.c checkpoint carries no vocabulary. */
  CHECK(kvedge_model_load(g_model_path, NULL, &model) == KVEDGE_INVALID_ARGUMENT);
  /* The tokenizer is not a model. */
  CHECK(kvedge_model_load(g_tokenizer_path, NULL, &model) == KVEDGE_INVALID_ARGUMENT);
  CHECK(ErrorMentions("tok512.bin"));
  CHECK(model == NULL);
  CHECK(kvedge_model_load(NULL, NULL, &model) == KVEDGE_INVALID_ARGUMENT);
  CHECK(ErrorMentions("model_path"));
  CHECK(kvedge_model_load(g_model_path, g_tokenizer_path, NULL) == KVEDGE_INVALID_ARGUMENT);
  CHECK(ErrorMentions("'out'"));
}

static void TestNullArguments(const kvedge_model* model) {
  kvedge_session* session = NULL;
  int32_t token = 0;
  size_t n = 0;
  const char* piece = NULL;
  kvedge_stats stats;
  kvedge_model_info info;
  CHECK(kvedge_session_create(NULL, NULL, &session) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("'model'"));
  CHECK(kvedge_session_create(model, NULL, NULL) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("'out'"));
  CHECK(kvedge_session_feed_tokens(NULL, &token, 1) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("'session'"));
  CHECK(kvedge_session_feed_text(NULL, "x", 0) == KVEDGE_INVALID_ARGUMENT);
  CHECK(kvedge_session_sample(NULL, &token) == KVEDGE_INVALID_ARGUMENT);
  CHECK(kvedge_session_stats(NULL, &stats) == KVEDGE_INVALID_ARGUMENT);
  CHECK(kvedge_session_generate(NULL, 1, NULL, NULL, NULL) == KVEDGE_INVALID_ARGUMENT);
  CHECK(kvedge_model_get_info(NULL, &info) == KVEDGE_INVALID_ARGUMENT);
  CHECK(kvedge_model_get_info(model, NULL) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("'info'"));
  CHECK(kvedge_tokenize(model, NULL, 1, NULL, 0, &n) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("'text'"));
  CHECK(kvedge_tokenize(model, "x", 1, NULL, 4, &n) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("out"));
  CHECK(kvedge_token_piece(model, -1, 5, NULL, &n) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("'piece'"));
  CHECK(kvedge_token_piece(model, -1, 512, &piece, &n) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("512"));
  CHECK(kvedge_session_model(NULL) == NULL);
  kvedge_session_free(NULL);
  kvedge_model_free(NULL);
  kvedge_session_config_init(NULL);

  const kvedge_session_config config = GreedyF32Full();
  CHECK(kvedge_session_create(model, &config, &session) == KVEDGE_OK);
  if (session == NULL) return;
  CHECK(kvedge_session_model(session) == model);
  CHECK(kvedge_session_sample(session, NULL) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("'token'"));
  CHECK(kvedge_session_feed_text(session, NULL, 1) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("'text'"));
  CHECK(kvedge_session_feed_tokens(session, NULL, 3) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("'tokens'"));
  CHECK(kvedge_session_feed_tokens(session, NULL, 0) == KVEDGE_OK);
  kvedge_session_free(session);
}

static void TestSessionErrors(const kvedge_model* model) {
  kvedge_session_config config = GreedyF32Full();
  config.capacity_tokens = 40;
  kvedge_session* session = NULL;
  CHECK(kvedge_session_create(model, &config, &session) == KVEDGE_OK);
  if (session == NULL) return;
  int32_t token = 0;
  const float* logits = NULL;
  int32_t n_vocab = 0;
  CHECK(kvedge_session_sample(session, &token) == KVEDGE_FAILED_PRECONDITION);
  CHECK(kvedge_session_logits(session, &logits, &n_vocab) == KVEDGE_FAILED_PRECONDITION);
  CHECK(kvedge_session_generate(session, 5, NULL, NULL, NULL) == KVEDGE_FAILED_PRECONDITION);

  /* Bytes that are not UTF-8 are tokenized as llama.cpp does: <0xFF> here. */
  int32_t bad_ids[32];
  size_t n_bad = 0;
  CHECK(kvedge_tokenize(model, "bad \xff byte", 0, bad_ids, 32, &n_bad) == KVEDGE_OK && n_bad > 0);
  const int32_t out_of_range[] = {1, 7, 512};
  CHECK(kvedge_session_feed_tokens(session, out_of_range, 3) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("512"));
  const int32_t negative = -3;
  CHECK(kvedge_session_feed_tokens(session, &negative, 1) == KVEDGE_INVALID_ARGUMENT);
  kvedge_stats stats;
  CHECK(kvedge_session_stats(session, &stats) == KVEDGE_OK && stats.tokens_seen == 0);

  /* A "full" cache of 40 tokens: 41 are refused whole, 40 fit, then nothing more. */
  int32_t ids[41];
  for (int i = 0; i < 41; ++i) ids[i] = 5 + i;
  CHECK(kvedge_session_feed_tokens(session, ids, 41) == KVEDGE_CONTEXT_FULL && ErrorMentions("context full"));
  CHECK(kvedge_session_stats(session, &stats) == KVEDGE_OK && stats.tokens_seen == 0);
  CHECK(kvedge_session_feed_tokens(session, ids, 40) == KVEDGE_OK);
  CHECK(kvedge_session_feed_tokens(session, ids, 1) == KVEDGE_CONTEXT_FULL);
  int32_t n = -1;
  CHECK(kvedge_session_generate(session, 5, NULL, NULL, &n) == KVEDGE_CONTEXT_FULL && n == 0);
  CHECK(kvedge_session_stats(session, &stats) == KVEDGE_OK && stats.tokens_seen == 40);
  /* Successful calls leave the last error alone. */
  CHECK(kvedge_session_sample(session, &token) == KVEDGE_OK && ErrorMentions("context full"));
  kvedge_session_free(session);
}

static void TestBadConfigs(const kvedge_model* model) {
  kvedge_session* session = NULL;
  kvedge_session_config config;

  kvedge_session_config_init(&config);
  config.budget_bytes = 1000;
  CHECK(kvedge_session_create(model, &config, &session) == KVEDGE_OUT_OF_BUDGET && ErrorMentions("too small"));

  kvedge_session_config_init(&config);
  config.capacity_tokens = 8;
  CHECK(kvedge_session_create(model, &config, &session) == KVEDGE_OUT_OF_BUDGET && ErrorMentions("minimum"));

  kvedge_session_config_init(&config);
  config.key_format = "int3";
  CHECK(kvedge_session_create(model, &config, &session) == KVEDGE_INVALID_ARGUMENT);
  CHECK(ErrorMentions("key_format") && ErrorMentions("'int3'"));

  kvedge_session_config_init(&config);
  config.policy = "lru";
  CHECK(kvedge_session_create(model, &config, &session) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("'lru'"));

  kvedge_session_config_init(&config);
  config.positions = "relative";
  CHECK(kvedge_session_create(model, &config, &session) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("positions"));

  kvedge_session_config_init(&config);
  config.threads = 0;
  CHECK(kvedge_session_create(model, &config, &session) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("threads"));

  kvedge_session_config_init(&config);
  config.temperature = -1.0f;
  CHECK(kvedge_session_create(model, &config, &session) == KVEDGE_INVALID_ARGUMENT);

  kvedge_session_config_init(&config);
  config.h2o_decay = 0.0f;
  CHECK(kvedge_session_create(model, &config, &session) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("decay"));
  CHECK(session == NULL);

  /* The defaults work (the measured ones chosen from the size: NULL names), as does NULL. */
  kvedge_session_config_init(&config);
  CHECK(config.policy == NULL && config.key_format == NULL && config.value_format == NULL);
  CHECK(kvedge_session_create(model, &config, &session) == KVEDGE_OK);
  kvedge_session_free(session);
  session = NULL;
  CHECK(kvedge_session_create(model, NULL, &session) == KVEDGE_OK);
  kvedge_session_free(session);
}

/* ABI discipline: structs carry their size; too small is refused untouched,
 * a newer caller's larger struct gets the fields this library knows. */
static void TestAbiSizes(const kvedge_model* model) {
  CHECK(kvedge_abi_version() == KVEDGE_ABI_VERSION);

  kvedge_model_info info;
  memset(&info, 0xAB, sizeof(info));
  info.size = sizeof(info) - 1;
  CHECK(kvedge_model_get_info_sized(model, &info) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("info->size"));
  CHECK(info.size == sizeof(info) - 1 && info.vocab_size != 512);

  /* A caller compiled against a later header: its struct has more fields. */
  struct {
    kvedge_model_info known;
    unsigned char later[16];
  } bigger;
  memset(&bigger, 0xAB, sizeof(bigger));
  bigger.known.size = sizeof(bigger);
  CHECK(kvedge_model_get_info_sized(model, &bigger.known) == KVEDGE_OK);
  CHECK(bigger.known.size == sizeof(kvedge_model_info) && bigger.known.vocab_size == 512);
  CHECK(bigger.later[0] == 0xAB && bigger.later[15] == 0xAB);

  kvedge_session_config config;
  config.size = 4;
  CHECK(kvedge_session_config_init_sized(&config) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("config->size"));
  CHECK(kvedge_session_config_init_sized(NULL) == KVEDGE_INVALID_ARGUMENT);
  kvedge_session* session = NULL;
  CHECK(kvedge_session_create(model, &config, &session) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("config->size"));
  CHECK(session == NULL);
  kvedge_chat* chat = NULL;  /* chats read their config as sessions do */
  CHECK(kvedge_chat_create(model, &config, NULL, NULL, &chat) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("config->size"));
  CHECK(chat == NULL);
  kvedge_session_config_init(&config);
  CHECK(config.size == sizeof(config));

  struct {
    kvedge_session_config known;
    unsigned char later[16];
  } bigger_config;
  memset(&bigger_config, 0xAB, sizeof(bigger_config));
  bigger_config.known.size = sizeof(bigger_config);
  CHECK(kvedge_session_config_init_sized(&bigger_config.known) == KVEDGE_OK);
  CHECK(bigger_config.known.size == sizeof(kvedge_session_config) && bigger_config.later[0] == 0xAB);
  bigger_config.known.size = sizeof(bigger_config); /* fields past the known ones are not read */
  bigger_config.known.capacity_tokens = 64;
  CHECK(kvedge_session_create(model, &bigger_config.known, &session) == KVEDGE_OK);
  if (session == NULL) return;

  kvedge_stats stats;
  memset(&stats, 0, sizeof(stats));
  CHECK(kvedge_session_stats_sized(session, &stats) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("stats->size"));
  CHECK(kvedge_session_stats(session, &stats) == KVEDGE_OK);
  CHECK(stats.size == sizeof(stats) && stats.capacity_tokens == 64);
  kvedge_session_free(session);
}

/* Sessions keep their model alive: freeing the model first is allowed. */
static void TestModelOutlivedBySession(void) {
  kvedge_model* model = NULL;
  CHECK(kvedge_model_load(g_model_path, g_tokenizer_path, &model) == KVEDGE_OK);
  if (model == NULL) return;
  const kvedge_session_config config = GreedyF32Full();
  kvedge_session* session = NULL;
  CHECK(kvedge_session_create(model, &config, &session) == KVEDGE_OK);
  kvedge_model_free(model);
  if (session == NULL) return;
  CHECK(kvedge_session_feed_text(session, kPromptText, 1) == KVEDGE_OK);
  int32_t token = -1;
  CHECK(kvedge_session_sample(session, &token) == KVEDGE_OK && token == kGreedy50[0]);
  const char* piece = NULL;
  size_t len = 0;
  CHECK(kvedge_token_piece(kvedge_session_model(session), 378, token, &piece, &len) == KVEDGE_OK);
  CHECK(len == 1 && piece[0] == ',');
  kvedge_session_free(session);
}

/* Save, restore into a fresh session, and the same continuation; refusals. */
static void TestSessionFiles(const kvedge_model* model) {
  char path[512], junk[600];
  const char* tmp = getenv("TMPDIR");
  if (tmp == NULL || tmp[0] == '\0') tmp = "/tmp";
  snprintf(path, sizeof(path), "%s/kvedge_capi_session_%ld_%d.kvs", tmp, (long)time(NULL), (int)getpid());
  snprintf(junk, sizeof(junk), "%s.junk", path);

  kvedge_session_config config;
  kvedge_session_config_init(&config);
  config.capacity_tokens = 96; /* 4 sinks + 92 recent: the stream below evicts */
  config.key_format = "int4"; /* named: the mismatch check below must not depend on the defaults */
  config.value_format = "int4";
  config.seed = 42;
  kvedge_session* a = NULL;
  kvedge_session* b = NULL;
  CHECK(kvedge_session_create(model, &config, &a) == KVEDGE_OK);
  config.seed = 7; /* the file's generator state must win */
  CHECK(kvedge_session_create(model, &config, &b) == KVEDGE_OK);
  if (a == NULL || b == NULL) return;
  CHECK(kvedge_session_feed_text(a, kPromptText, 1) == KVEDGE_OK);
  CHECK(kvedge_session_generate(a, 120, NULL, NULL, NULL) == KVEDGE_OK);
  CHECK(kvedge_session_save(a, path) == KVEDGE_OK);
  CHECK(kvedge_session_load(b, path) == KVEDGE_OK);

  int32_t last_a = -2, last_b = -3;
  CHECK(kvedge_session_last_token(a, &last_a) == KVEDGE_OK && kvedge_session_last_token(b, &last_b) == KVEDGE_OK);
  CHECK(last_a == last_b && last_a >= 0);
  kvedge_stats sa, sb;
  CHECK(kvedge_session_stats(a, &sa) == KVEDGE_OK && kvedge_session_stats(b, &sb) == KVEDGE_OK);
  CHECK(sa.tokens_seen == sb.tokens_seen && sa.tokens_held == sb.tokens_held && sa.tokens_evicted > 0);
  const float* la = NULL;
  const float* lb = NULL;
  int32_t na = 0, nb = 0;
  CHECK(kvedge_session_logits(a, &la, &na) == KVEDGE_OK && kvedge_session_logits(b, &lb, &nb) == KVEDGE_OK);
  CHECK(na == nb && la != NULL && lb != NULL && memcmp(la, lb, (size_t)na * sizeof(float)) == 0);
  Collector ca, cb;
  memset(&ca, 0, sizeof(ca));
  memset(&cb, 0, sizeof(cb));
  CHECK(kvedge_session_generate(a, 60, Collect, &ca, NULL) == KVEDGE_OK);
  CHECK(kvedge_session_generate(b, 60, Collect, &cb, NULL) == KVEDGE_OK);
  CHECK(ca.len > 0 && ca.len == cb.len && strcmp(ca.text, cb.text) == 0);

  /* Refusals leave the session as it was. */
  CHECK(kvedge_session_save(NULL, path) == KVEDGE_INVALID_ARGUMENT);
  CHECK(kvedge_session_save(a, NULL) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("'path'"));
  CHECK(kvedge_session_load(b, NULL) == KVEDGE_INVALID_ARGUMENT);
  CHECK(kvedge_session_load(b, "/nonexistent/kvedge.kvs") == KVEDGE_NOT_FOUND);
  CHECK(ErrorMentions("kvedge_session_load: no session file"));
  FILE* f = fopen(junk, "wb");
  if (f != NULL) {
    fputs("this text is not a kvedge session file at all", f);
    fclose(f);
  }
  CHECK(kvedge_session_load(b, junk) == KVEDGE_CORRUPT && ErrorMentions("not a kvedge session file"));
  CHECK(kvedge_session_save(b, "/nonexistent/dir/x.kvs") == KVEDGE_IO);
  kvedge_session* c = NULL;
  config.key_format = "int8";
  CHECK(kvedge_session_create(model, &config, &c) == KVEDGE_OK);
  CHECK(kvedge_session_load(c, path) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("key format is int4 in the file"));
  kvedge_stats sc;
  CHECK(kvedge_session_stats(c, &sc) == KVEDGE_OK && sc.tokens_seen == 0);
  kvedge_session_free(c);
  kvedge_session_free(a);
  kvedge_session_free(b);
  remove(path);
  remove(junk);
}

/* Chat turns: replies stream, are remembered, reset keeps the system prompt,
 * the same seed gives the same reply. */
static void TestChat(const kvedge_model* model) {
  kvedge_session_config config;
  kvedge_session_config_init(&config);
  config.capacity_tokens = 256;
  config.seed = 5;
  kvedge_chat* chat = NULL;
  CHECK(kvedge_chat_create(model, &config, "You tell stories.", NULL, &chat) == KVEDGE_OK);
  if (chat == NULL) return;
  size_t count = 0;
  CHECK(kvedge_chat_message_count(chat, &count) == KVEDGE_OK && count == 1);
  CHECK(kvedge_chat_add_message(chat, "user", "Once upon a time") == KVEDGE_OK);
  Collector first;
  memset(&first, 0, sizeof(first));
  int32_t n = -1;
  CHECK(kvedge_chat_generate_reply(chat, 30, Collect, &first, &n) == KVEDGE_OK && n > 0);
  CHECK(kvedge_chat_message_count(chat, &count) == KVEDGE_OK && count == 3);
  const char* role = NULL;
  const char* content = NULL;
  CHECK(kvedge_chat_message(chat, 2, &role, &content) == KVEDGE_OK);
  CHECK(role != NULL && strcmp(role, "assistant") == 0 && content != NULL && strcmp(content, first.text) == 0);
  kvedge_stats st;
  CHECK(kvedge_chat_stats(chat, &st) == KVEDGE_OK && st.tokens_seen > (uint64_t)n);
  /* A second turn feeds only what the cache has not seen. */
  const uint64_t seen_before = st.tokens_seen;
  CHECK(kvedge_chat_add_message(chat, "user", "Then?") == KVEDGE_OK);
  CHECK(kvedge_chat_generate_reply(chat, 10, NULL, NULL, &n) == KVEDGE_OK);
  CHECK(kvedge_chat_stats(chat, &st) == KVEDGE_OK && st.tokens_seen > seen_before &&
        st.tokens_seen - seen_before < seen_before + (uint64_t)n);
  /* Errors. */
  CHECK(kvedge_chat_generate_reply(chat, -1, NULL, NULL, NULL) == KVEDGE_INVALID_ARGUMENT);
  CHECK(kvedge_chat_add_message(chat, "user", "bad \xff") == KVEDGE_INVALID_ARGUMENT);
  CHECK(kvedge_chat_add_message(chat, NULL, "x") == KVEDGE_INVALID_ARGUMENT && ErrorMentions("'role'"));
  CHECK(kvedge_chat_message(chat, 99, &role, &content) == KVEDGE_INVALID_ARGUMENT);
  CHECK(kvedge_chat_create(model, &config, NULL, "{% if %}", &chat) != KVEDGE_OK);
  /* Reset: only the system prompt; the first turn again gives the same reply. */
  CHECK(kvedge_chat_reset(chat) == KVEDGE_OK);
  CHECK(kvedge_chat_message_count(chat, &count) == KVEDGE_OK && count == 1);
  CHECK(kvedge_chat_stats(chat, &st) == KVEDGE_OK && st.tokens_held == 0);
  kvedge_chat* other = NULL;
  CHECK(kvedge_chat_create(model, &config, "You tell stories.", NULL, &other) == KVEDGE_OK);
  if (other != NULL) {
    Collector again;
    memset(&again, 0, sizeof(again));
    CHECK(kvedge_chat_add_message(other, "user", "Once upon a time") == KVEDGE_OK);
    CHECK(kvedge_chat_generate_reply(other, 30, Collect, &again, NULL) == KVEDGE_OK);
    CHECK(strcmp(again.text, first.text) == 0);
  }
  kvedge_chat_free(other);
  kvedge_chat_free(chat);
  kvedge_chat_free(NULL);
}

/* Copies the first `keep` bytes of src (-1: all) to dst, inverting the byte
 * at `flip` (-1: none). Returns 0 on success. */
static int CopyDamaged(const char* src, const char* dst, long flip, long keep) {
  FILE* in = fopen(src, "rb");
  if (in == NULL) return -1;
  FILE* out = fopen(dst, "wb");
  if (out == NULL) {
    fclose(in);
    return -1;
  }
  long i = 0;
  int c;
  while ((keep < 0 || i < keep) && (c = fgetc(in)) != EOF) {
    fputc(i == flip ? (c ^ 0xff) : c, out);
    ++i;
  }
  fclose(in);
  return fclose(out) == 0 ? 0 : -1;
}

static long FileSize(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return -1;
  fseek(f, 0, SEEK_END);
  const long n = ftell(f);
  fclose(f);
  return n;
}

/* What a chat holds, to compare before and after a refused load. */
typedef struct ChatState {
  size_t messages;
  uint64_t tokens_seen, tokens_held;
  char last[4096];
} ChatState;

static ChatState GetChatState(const kvedge_chat* chat) {
  ChatState st;
  memset(&st, 0, sizeof(st));
  kvedge_stats stats;
  CHECK(kvedge_chat_message_count(chat, &st.messages) == KVEDGE_OK && st.messages > 0);
  CHECK(kvedge_chat_stats(chat, &stats) == KVEDGE_OK);
  st.tokens_seen = stats.tokens_seen;
  st.tokens_held = stats.tokens_held;
  const char* role = NULL;
  const char* content = NULL;
  if (st.messages > 0 && kvedge_chat_message(chat, st.messages - 1, &role, &content) == KVEDGE_OK) {
    snprintf(st.last, sizeof(st.last), "%s: %s", role, content);
  }
  return st;
}

static int SameChatState(ChatState a, ChatState b) {
  return a.messages == b.messages && a.tokens_seen == b.tokens_seen && a.tokens_held == b.tokens_held &&
         strcmp(a.last, b.last) == 0;
}

/* Chat files: save, a new chat loads, and its next turn is the one the saved
 * chat gives uninterrupted; damaged files are refused with the chat unchanged. */
static void TestChatFiles(const kvedge_model* model) {
  char path[512], bad[600], bad_chat[620], src_chat[620];
  const char* tmp = getenv("TMPDIR");
  if (tmp == NULL || tmp[0] == '\0') tmp = "/tmp";
  snprintf(path, sizeof(path), "%s/kvedge_capi_chat_%ld_%d.kvs", tmp, (long)time(NULL), (int)getpid());
  snprintf(src_chat, sizeof(src_chat), "%s.chat", path);
  snprintf(bad, sizeof(bad), "%s.bad", path);
  snprintf(bad_chat, sizeof(bad_chat), "%s.chat", bad);

  kvedge_session_config config;
  kvedge_session_config_init(&config);
  config.capacity_tokens = 96; /* 2 sinks + a window: the turns below evict */
  config.seed = 11;            /* sampled (temperature 0.8): the RNG state must travel */
  kvedge_chat* a = NULL;
  kvedge_chat* b = NULL;
  CHECK(kvedge_chat_create(model, &config, "You tell stories.", NULL, &a) == KVEDGE_OK);
  config.seed = 99; /* the file's sampler state must win */
  CHECK(kvedge_chat_create(model, &config, "You tell stories.", NULL, &b) == KVEDGE_OK);
  if (a == NULL || b == NULL) {
    kvedge_chat_free(a);
    kvedge_chat_free(b);
    return;
  }
  CHECK(kvedge_chat_add_message(a, "user", "Once upon a time") == KVEDGE_OK);
  CHECK(kvedge_chat_generate_reply(a, 60, NULL, NULL, NULL) == KVEDGE_OK);
  CHECK(kvedge_chat_save(a, path) == KVEDGE_OK);
  CHECK(kvedge_chat_load(b, path) == KVEDGE_OK);
  const ChatState saved = GetChatState(a);
  CHECK(SameChatState(saved, GetChatState(b)));
  kvedge_stats stats;
  CHECK(kvedge_chat_stats(b, &stats) == KVEDGE_OK && stats.tokens_evicted > 0);
  /* The next turn: the same reply from the restored chat as from the one never stopped. */
  Collector ra, rb;
  memset(&ra, 0, sizeof(ra));
  memset(&rb, 0, sizeof(rb));
  CHECK(kvedge_chat_add_message(a, "user", "Then?") == KVEDGE_OK);
  CHECK(kvedge_chat_add_message(b, "user", "Then?") == KVEDGE_OK);
  CHECK(kvedge_chat_generate_reply(a, 40, Collect, &ra, NULL) == KVEDGE_OK);
  CHECK(kvedge_chat_generate_reply(b, 40, Collect, &rb, NULL) == KVEDGE_OK);
  CHECK(ra.len > 0 && strcmp(ra.text, rb.text) == 0);
  CHECK(SameChatState(GetChatState(a), GetChatState(b)));

  /* Refusals leave the chat as it was. */
  const ChatState before = GetChatState(b);
  CHECK(kvedge_chat_save(NULL, path) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("'chat'"));
  CHECK(kvedge_chat_save(a, NULL) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("'path'"));
  CHECK(kvedge_chat_load(NULL, path) == KVEDGE_INVALID_ARGUMENT);
  CHECK(kvedge_chat_load(b, NULL) == KVEDGE_INVALID_ARGUMENT);
  CHECK(kvedge_chat_save(a, "/nonexistent/dir/chat.kvs") == KVEDGE_IO && ErrorMentions("kvedge_chat_save: "));
  CHECK(kvedge_chat_load(b, "/nonexistent/chat.kvs") == KVEDGE_NOT_FOUND);
  CHECK(ErrorMentions("kvedge_chat_load: no session file"));
  /* A bit flipped in the middle of the session file: its checksum. */
  CHECK(CopyDamaged(path, bad, FileSize(path) / 2, -1) == 0 && CopyDamaged(src_chat, bad_chat, -1, -1) == 0);
  CHECK(kvedge_chat_load(b, bad) == KVEDGE_CORRUPT && ErrorMentions("kvedge_chat_load: "));
  CHECK(SameChatState(before, GetChatState(b)));
  /* A truncated session file. */
  CHECK(CopyDamaged(path, bad, -1, FileSize(path) - 7) == 0);
  CHECK(kvedge_chat_load(b, bad) == KVEDGE_CORRUPT);
  CHECK(SameChatState(before, GetChatState(b)));
  /* An intact session file beside a damaged conversation file, then none. */
  CHECK(CopyDamaged(path, bad, -1, -1) == 0 && CopyDamaged(src_chat, bad_chat, 3, -1) == 0);
  CHECK(kvedge_chat_load(b, bad) == KVEDGE_CORRUPT && ErrorMentions("conversation file"));
  CHECK(SameChatState(before, GetChatState(b)));
  remove(bad_chat);
  CHECK(kvedge_chat_load(b, bad) == KVEDGE_CORRUPT && ErrorMentions("has no conversation file"));
  CHECK(SameChatState(before, GetChatState(b)));
  /* Another KV configuration: named, and refused before anything changes. */
  kvedge_chat* c = NULL;
  config.value_format = "f16";
  CHECK(kvedge_chat_create(model, &config, "You tell stories.", NULL, &c) == KVEDGE_OK);
  if (c != NULL) {
    CHECK(kvedge_chat_load(c, path) == KVEDGE_INVALID_ARGUMENT && ErrorMentions("value format"));
    size_t count = 0;
    CHECK(kvedge_chat_message_count(c, &count) == KVEDGE_OK && count == 1);
  }
  kvedge_chat_free(c);
  kvedge_chat_free(a);
  kvedge_chat_free(b);
  remove(path);
  remove(src_chat);
  remove(bad);
}

static void TestChatTemplate(const kvedge_model* model) {
  static const char kMessages[] = "[{\"role\": \"user\", \"content\": \"H\u00e9llo\"}]";
  static const char kChatMl[] = "<|im_start|>user\nH\xc3\xa9llo<|im_end|>\n<|im_start|>assistant\n";
  char buf[256];
  size_t len = 0;
  /* The model has no chat template: ChatML. Size first, then the text. */
  CHECK(kvedge_chat_template_render(model, NULL, kMessages, 1, NULL, NULL, NULL, 0, &len) == KVEDGE_BUFFER_TOO_SMALL);
  CHECK(len == strlen(kChatMl));
  CHECK(kvedge_chat_template_render(model, NULL, kMessages, 1, NULL, NULL, buf, len, &len) == KVEDGE_BUFFER_TOO_SMALL);
  CHECK(kvedge_chat_template_render(model, NULL, kMessages, 1, NULL, NULL, buf, sizeof(buf), &len) == KVEDGE_OK);
  CHECK(strcmp(buf, kChatMl) == 0);
  /* A template of the caller's, the model's bos/eos unless given. */
  CHECK(kvedge_chat_template_render(NULL, "{{ bos_token }}{{ messages[0].content|upper }}{{ eos_token }}", kMessages,
                                    0, "<s>", "</s>", buf, sizeof(buf), &len) == KVEDGE_OK);
  CHECK(strcmp(buf, "<s>H\xc3\x89LLO</s>") == 0);
  /* raise_exception carries the template's message. */
  CHECK(kvedge_chat_template_render(NULL, "{{ raise_exception('Roles must alternate') }}", kMessages, 0, NULL, NULL,
                                    buf, sizeof(buf), &len) == KVEDGE_INVALID_ARGUMENT);
  CHECK(strcmp(kvedge_last_error(), "kvedge_chat_template_render: Roles must alternate") == 0);
  CHECK(kvedge_chat_template_render(NULL, "{% for %}", kMessages, 0, NULL, NULL, buf, sizeof(buf), &len) ==
        KVEDGE_INVALID_ARGUMENT);
  CHECK(kvedge_chat_template_render(NULL, "{% include 'x' %}", kMessages, 0, NULL, NULL, buf, sizeof(buf), &len) ==
        KVEDGE_UNSUPPORTED);
  CHECK(kvedge_chat_template_render(NULL, "{{ 'x' * 1000000000 }}", kMessages, 0, NULL, NULL, buf, sizeof(buf),
                                    &len) == KVEDGE_OUT_OF_BUDGET);
  CHECK(kvedge_chat_template_render(NULL, "x", "[{", 0, NULL, NULL, buf, sizeof(buf), &len) == KVEDGE_INVALID_ARGUMENT);
  CHECK(ErrorMentions("messages JSON"));
  CHECK(kvedge_chat_template_render(NULL, NULL, kMessages, 0, NULL, NULL, buf, sizeof(buf), &len) ==
        KVEDGE_INVALID_ARGUMENT);
  CHECK(kvedge_chat_template_render(model, NULL, NULL, 0, NULL, NULL, buf, sizeof(buf), &len) == KVEDGE_INVALID_ARGUMENT);
  CHECK(kvedge_chat_template_render(model, NULL, kMessages, 0, NULL, NULL, NULL, 4, &len) == KVEDGE_INVALID_ARGUMENT);
}

/* A GGUF model's vocabulary gives bos_token/eos_token. */
static void TestChatTemplateGguf(const char* shared) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/models/stories260K_llamacpp.gguf", shared);
  kvedge_model* model = NULL;
  CHECK(kvedge_model_load(path, NULL, &model) == KVEDGE_OK);
  if (model == NULL) return;
  char buf[64];
  size_t len = 0;
  CHECK(kvedge_chat_template_render(model, "{{ bos_token }}|{{ eos_token }}", "[]", 0, NULL, NULL, buf, sizeof(buf),
                                    &len) == KVEDGE_OK);
  CHECK(strcmp(buf, "<s>|</s>") == 0);
  kvedge_model_free(model);
}

int main(void) {
  const char* shared = getenv("KVEDGE_SHARED");
  if (shared == NULL || shared[0] == '\0') shared = KVEDGE_SHARED_DIR_DEFAULT;
  snprintf(g_model_path, sizeof(g_model_path), "%s/models/stories260K.bin", shared);
  snprintf(g_tokenizer_path, sizeof(g_tokenizer_path), "%s/models/tok512.bin", shared);

  TestVersionAndNames();
  TestLoadErrors();
  kvedge_model* model = NULL;
  CHECK(kvedge_model_load(g_model_path, g_tokenizer_path, &model) == KVEDGE_OK);
  if (model != NULL) {
    TestModelInfoAndTokenize(model);
    TestReferenceGreedyIds(model);
    TestGenerate(model);
    TestNullArguments(model);
    TestSessionErrors(model);
    TestBadConfigs(model);
    TestSessionFiles(model);
    TestAbiSizes(model);
    TestChatTemplate(model);
    TestChat(model);
    TestChatFiles(model);
    kvedge_model_free(model);
  }
  TestChatTemplateGguf(shared);
  TestModelOutlivedBySession();
  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 && g_passed > 0 ? 0 : 1;
}
