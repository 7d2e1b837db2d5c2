// The Jinja interpreter's front door: parse a template once, render it with a
// set of variables. Semantics follow Python jinja2 3.x as Hugging Face
// transformers configures it for chat templates (ImmutableSandboxedEnvironment
// with trim_blocks, lstrip_blocks and loop controls; its own tojson filter;
// raise_exception() and strftime_now() as globals), so that rendered prompts
// are byte-identical to apply_chat_template's.
//
// Templates are untrusted: parsing and rendering are bounded (nesting, steps,
// output and working bytes, call depth) and every failure is a Status — a
// raise_exception() call yields kInvalidArgument carrying the template's
// message verbatim; other template errors name the construct and line.
#ifndef KVEDGE_RUNTIME_CHAT_JINJA_RENDER_H_
#define KVEDGE_RUNTIME_CHAT_JINJA_RENDER_H_

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "platform/status.h"
#include "runtime/chat/jinja_parser.h"
#include "runtime/chat/jinja_value.h"

namespace kvedge::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // the rendered text, and any one string built on the way
  size_t max_work_bytes = size_t{1} << 30;     // all strings and lists built, summed (bounds time and memory)
  uint64_t max_steps = 20'000'000;             // expressions and statements evaluated, loop iterations
  int max_call_depth = 64;                     // nested macro / caller() calls
  int max_eval_depth = 400;                    // nested evaluation of expressions and blocks
};

struct RenderOptions {
  RenderLimits limits;
  // What strftime_now() formats: the local time at the call when unset.
  std::optional<std::tm> now;
};

// A parsed template. Immutable after Parse; Render is const and may run on
// several threads at once. Copies share the syntax tree.
class Template {
 public:
  static StatusOr<Template> Parse(std::string_view source, const ParseLimits& limits = {});

  // Renders with `variables` (name → value; jinja2's builtins range, dict,
  // namespace and transformers' raise_exception, strftime_now are added).
  // Every string in `variables` must be valid UTF-8.
  StatusOr<std::string> Render(const DictData& variables, const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const NodeList> nodes) : nodes_(std::move(nodes)) {}
  std::shared_ptr<const NodeList> nodes_;
};

}  // namespace kvedge::jinja

#endif  // KVEDGE_RUNTIME_CHAT_JINJA_RENDER_H_
