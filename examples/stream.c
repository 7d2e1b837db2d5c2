/* kvedge from C: stream a story from a model under a fixed 64 KiB KV budget
 * (attention sinks, int4 keys and values), then print the cache's stats.
 * Usage: stream [MODEL [PROMPT [TOKENS]]]; MODEL defaults to the repository's
 * models/stories260K.gguf. Greedy, so every build prints the same text. */
#include <stdio.h>
#include <stdlib.h>

#include "kvedge.h"

static int Print(const char* piece, size_t len, void* user) {
  (void)user;
  fwrite(piece, 1, len, stdout); /* pieces are bytes, not NUL-terminated */
  fflush(stdout);
  return 0; /* non-zero stops generation */
}

int main(int argc, char** argv) {
  const char* model_path = argc > 1 ? argv[1] : "models/stories260K.gguf";
  const char* prompt = argc > 2 ? argv[2] : "Once upon a time";
  const int32_t tokens = argc > 3 ? (int32_t)atoi(argv[3]) : 200;
  kvedge_model* model = NULL;
  kvedge_session* session = NULL;
  kvedge_session_config config;
  kvedge_stats stats;
  kvedge_status st;

  if (kvedge_abi_version() != KVEDGE_ABI_VERSION) {
    fprintf(stderr, "libkvedge has ABI %d, this program was built for %d\n", (int)kvedge_abi_version(),
            KVEDGE_ABI_VERSION);
    return 1;
  }
  st = kvedge_model_load(model_path, NULL, &model); /* a GGUF carries its vocabulary */
  if (st != KVEDGE_OK) {
    fprintf(stderr, "%s\n", kvedge_last_error());
    return 1;
  }
  kvedge_session_config_init(&config); /* always start from the defaults */
  config.policy = "sinks";             /* 4 pinned first tokens + the most recent */
  config.key_format = "int4";
  config.value_format = "int4";
  config.budget_bytes = 64 * 1024; /* the cache never grows past this */
  config.temperature = 0.0f;       /* greedy */

  st = kvedge_session_create(model, &config, &session);
  if (st == KVEDGE_OK) st = kvedge_session_feed_text(session, prompt, /*add_bos=*/1);
  if (st == KVEDGE_OK) {
    fputs(prompt, stdout);
    st = kvedge_session_generate(session, tokens, Print, NULL, NULL);
    putchar('\n');
  }
  if (st == KVEDGE_OK) st = kvedge_session_stats(session, &stats);
  if (st == KVEDGE_OK) {
    printf("kvedge %s: %llu tokens seen, %llu held, %llu evicted; KV %llu of %llu bytes, %.2fx against f16\n",
           kvedge_version(), (unsigned long long)stats.tokens_seen, (unsigned long long)stats.tokens_held,
           (unsigned long long)stats.tokens_evicted, (unsigned long long)stats.held_bytes,
           (unsigned long long)stats.arena_bytes, stats.compression);
  } else {
    fprintf(stderr, "%s: %s\n", kvedge_status_name(st), kvedge_last_error());
  }
  kvedge_session_free(session);
  kvedge_model_free(model);
  return st == KVEDGE_OK ? 0 : 1;
}
