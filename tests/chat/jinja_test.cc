// Jinja semantics beyond the conformance cases: whitespace control, scoping,
// loops, filters, tests, errors and the limits that keep hostile templates
// bounded. Expected texts were checked against Python jinja2 3.1 configured
// as transformers configures it.
#include <string>

#include "gtest/gtest.h"
#include "runtime/chat/chat_template.h"
#include "runtime/chat/jinja_render.h"

namespace kvedge::jinja {
namespace {

// Renders `source` with the variables of `vars_json` (a JSON object).
StatusOr<std::string> Render(const std::string& source, const std::string& vars_json = "{}",
                             const RenderLimits& limits = {}) {
  auto tmpl = Template::Parse(source);
  if (!tmpl.ok()) return tmpl.status();
  auto vars = chat::ParseMessagesJson("{\"messages\": [" + vars_json + "]}");
  if (!vars.ok()) return vars.status();
  RenderOptions options;
  options.limits = limits;
  return tmpl->Render(vars->items()[0].dict(), options);
}

TEST(Jinja, Smoke) {
  auto r = Render("{{ 1 + 2 }}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "3");
}

}  // namespace
}  // namespace kvedge::jinja
