/* kvedge from C: an assistant that survives a restart. Each run restores the
 * conversation saved at STATE (if any), adds one user message, streams the
 * reply and saves the conversation again (atomically; the cache as it is,
 * so the next run feeds only the new turn).
 * Usage: chat MODEL STATE MESSAGE   e.g.
 *   chat models/stories260K.gguf /tmp/chat.kvs "Tell me a story"
 *   chat models/stories260K.gguf /tmp/chat.kvs "And then?"   (continues it)
 * Greedy, so every build prints the same text. */
#include <stdio.h>

#include "kvedge.h"

static int Print(const char* piece, size_t len, void* user) {
  (void)user;
  fwrite(piece, 1, len, stdout);
  fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  kvedge_model* model = NULL;
  kvedge_chat* chat = NULL;
  kvedge_session_config config;
  kvedge_stats stats;
  size_t restored = 0; /* messages before this turn (the system prompt counts) */
  kvedge_status st;

  if (argc != 4) {
    fprintf(stderr, "usage: %s MODEL STATE MESSAGE\n", argv[0]);
    return 2;
  }
  st = kvedge_model_load(argv[1], NULL, &model);
  if (st == KVEDGE_OK) {
    kvedge_session_config_init(&config);
    config.budget_bytes = 256 * 1024; /* the whole conversation streams through this */
    config.temperature = 0.0f;
    /* NULL template: the model's own, or ChatML (with a warning) */
    st = kvedge_chat_create(model, &config, "You are a storyteller.", NULL, &chat);
  }
  if (st == KVEDGE_OK) {
    st = kvedge_chat_load(chat, argv[2]);
    if (st == KVEDGE_NOT_FOUND) st = KVEDGE_OK; /* the first run */
  }
  if (st == KVEDGE_OK) st = kvedge_chat_message_count(chat, &restored);
  if (st == KVEDGE_OK) st = kvedge_chat_add_message(chat, "user", argv[3]);
  if (st == KVEDGE_OK) st = kvedge_chat_generate_reply(chat, 48, Print, NULL, NULL);
  if (st == KVEDGE_OK) {
    putchar('\n');
    st = kvedge_chat_save(chat, argv[2]);
  }
  if (st == KVEDGE_OK) st = kvedge_chat_stats(chat, &stats);
  if (st == KVEDGE_OK) {
    printf("kvedge %s: %zu messages restored; %llu tokens seen, %llu held; KV %llu of %llu bytes\n", kvedge_version(),
           restored, (unsigned long long)stats.tokens_seen, (unsigned long long)stats.tokens_held,
           (unsigned long long)stats.held_bytes, (unsigned long long)stats.arena_bytes);
  } else {
    fprintf(stderr, "%s: %s\n", kvedge_status_name(st), kvedge_last_error());
  }
  kvedge_chat_free(chat);
  kvedge_model_free(model);
  return st == KVEDGE_OK ? 0 : 1;
}
