// Fuzzes the Jinja interpreter: the input is a chat template, parsed and
// rendered (under tight limits) for a fixed conversation. Any input must give
// text or a Status — never a crash, hang or unbounded allocation — and a
// rendering must be deterministic.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "runtime/chat/chat_template.h"
#include "runtime/chat/jinja_render.h"

namespace {

const char kMessages[] =
    R"([{"role": "system", "content": "You are helpful.  "},
        {"role": "user", "content": "Héllo 😀 — ÄÖÜ ß\n\tline"},
        {"role": "assistant", "content": "ok", "tool_calls": [{"type": "function", "function":
          {"name": "f", "arguments": {"a": 1, "b": [1.5, true, null, "x"]}}}]},
        {"role": "tool", "content": "{\"r\": 2}", "n": 7},
        {"role": "user", "content": ""}])";

kvedge::jinja::DictData* g_vars = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto messages = kvedge::chat::ParseMessagesJson(kMessages);
  if (!messages.ok()) __builtin_trap();
  g_vars = new kvedge::jinja::DictData;
  g_vars->Set(kvedge::jinja::Value::Str("messages"), *messages);
  g_vars->Set(kvedge::jinja::Value::Str("tools"), kvedge::jinja::Value::None());
  g_vars->Set(kvedge::jinja::Value::Str("add_generation_prompt"), kvedge::jinja::Value::Bool(true));
  g_vars->Set(kvedge::jinja::Value::Str("bos_token"), kvedge::jinja::Value::Str("<s>"));
  g_vars->Set(kvedge::jinja::Value::Str("eos_token"), kvedge::jinja::Value::Str("</s>"));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto tmpl = kvedge::jinja::Template::Parse(source);
  if (!tmpl.ok()) return 0;
  kvedge::jinja::RenderOptions options;
  options.limits.max_steps = 200000;
  options.limits.max_output_bytes = 1 << 20;
  options.limits.max_work_bytes = 32 << 20;
  options.now = *kvedge::chat::ParseIsoTime("2025-03-05T00:00:00");
  const auto first = tmpl->Render(*g_vars, options);
  const auto second = tmpl->Render(*g_vars, options);
  if (first.ok() != second.ok() || (first.ok() && *first != *second)) {
    std::fprintf(stderr, "rendering is not deterministic\n");
    __builtin_trap();
  }
  if (first.ok() && first->size() > options.limits.max_output_bytes) __builtin_trap();
  return 0;
}
