// The chat page served at GET /: runtime/server/chat_page.html, embedded at build time as a raw-string
// literal by cmake/embed_text.cmake (runtime/CMakeLists.txt), so the binary needs no files beside it.
#include "runtime/server/chat_page.h"

namespace kvedge::server {
namespace {

constexpr char kChatPageHtml[] =
#include "runtime/server/chat_page.html.inc"
    ;

}  // namespace

std::string_view ChatPageHtml() { return {kChatPageHtml, sizeof(kChatPageHtml) - 1}; }

}  // namespace kvedge::server
