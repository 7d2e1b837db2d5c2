// Placeholder until the chat page lands: a page naming the API.
#include "runtime/server/chat_page.h"

namespace kvedge::server {

std::string_view ChatPageHtml() {
  return "<!doctype html><meta charset=utf-8><title>kvedge</title>"
         "<p>kvedge serve: POST /v1/chat/completions</p>\n";
}

}  // namespace kvedge::server
