// The chat page served at GET / (one static HTML file embedded in the binary).
#ifndef KVEDGE_RUNTIME_SERVER_CHAT_PAGE_H_
#define KVEDGE_RUNTIME_SERVER_CHAT_PAGE_H_

#include <string_view>

namespace kvedge::server {

std::string_view ChatPageHtml();

}  // namespace kvedge::server

#endif  // KVEDGE_RUNTIME_SERVER_CHAT_PAGE_H_
