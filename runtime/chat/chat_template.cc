// Chat templates: messages JSON → Jinja values, the render variables
// transformers passes, and the ChatML fallback.
#include "runtime/chat/chat_template.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace kvedge::chat {

const char kChatMlTemplate[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

namespace {

using Json = nlohmann::ordered_json;

StatusOr<jinja::Value> FromJson(const Json& j, int depth) {
  if (depth > 128) return InvalidArgument("messages JSON: nested deeper than 128 levels");
  switch (j.type()) {
    case Json::value_t::null:
      return jinja::Value::None();
    case Json::value_t::boolean:
      return jinja::Value::Bool(j.get<bool>());
    case Json::value_t::number_integer:
      return jinja::Value::Int(j.get<int64_t>());
    case Json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX))
        return Unsupported("messages JSON: integer " + std::to_string(u) + " exceeds 64 bits");
      return jinja::Value::Int(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return jinja::Value::Float(j.get<double>());
    case Json::value_t::string:
      return jinja::Value::Str(j.get<std::string>());
    case Json::value_t::array: {
      std::vector<jinja::Value> items;
      for (const auto& e : j) {
        KVEDGE_ASSIGN_OR_RETURN(jinja::Value v, FromJson(e, depth + 1));
        items.push_back(std::move(v));
      }
      return jinja::Value::List(std::move(items));
    }
    case Json::value_t::object: {
      auto d = std::make_shared<jinja::DictData>();
      for (const auto& [k, e] : j.items()) {
        KVEDGE_ASSIGN_OR_RETURN(jinja::Value v, FromJson(e, depth + 1));
        d->Set(jinja::Value::Str(k), std::move(v));
      }
      return jinja::Value::Dict(std::move(d));
    }
    default:
      return InvalidArgument("messages JSON: unsupported value type");
  }
}

}  // namespace

StatusOr<jinja::Value> ParseMessagesJson(std::string_view messages_json) {
  Json j = Json::parse(messages_json.begin(), messages_json.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("messages JSON: not valid JSON (or not valid UTF-8)");
  if (j.is_object()) {
    if (!j.contains("messages")) return InvalidArgument("messages JSON: an object must hold a \"messages\" array");
    Json inner = j["messages"];
    j = std::move(inner);
  }
  if (!j.is_array()) return InvalidArgument("messages JSON: expected an array of message objects");
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_object()) return InvalidArgument("messages JSON: message " + std::to_string(i) + " is not an object");
  }
  return FromJson(j, 0);
}

StatusOr<std::tm> ParseIsoTime(std::string_view text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char sep = 0;
  int consumed = 0;
  const std::string str(text);
  const int n = std::sscanf(str.c_str(), "%4d-%2d-%2d%c%2d:%2d%n", &y, &mo, &d, &sep, &h, &mi, &consumed);
  if (n < 6 || (sep != 'T' && sep != ' ')) {
    return InvalidArgument("time '" + str + "': expected YYYY-MM-DDTHH:MM[:SS]");
  }
  std::string_view rest = text.substr(consumed);
  if (!rest.empty() && rest[0] == ':') {
    int used = 0;
    if (std::sscanf(str.c_str() + consumed, ":%2d%n", &s, &used) != 1) {
      return InvalidArgument("time '" + str + "': bad seconds");
    }
    rest = rest.substr(used);
  }
  if (!rest.empty())
    return InvalidArgument("time '" + str + "': unexpected '" + std::string(rest) + "' (no zones or fractions)");
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 || y < 1) {
    return InvalidArgument("time '" + str + "': a field is out of range");
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  // Weekday and day of the year from the civil date (no time zone involved).
  std::tm probe = tm;
  probe.tm_hour = 12;
  const time_t t = timegm(&probe);
  std::tm check{};
  gmtime_r(&t, &check);
  if (check.tm_mday != d || check.tm_mon != mo - 1) return InvalidArgument("time '" + str + "': no such date");
  tm.tm_wday = check.tm_wday;
  tm.tm_yday = check.tm_yday;
  tm.tm_isdst = -1;
  return tm;
}

StatusOr<std::string> RenderChatTemplate(std::string_view template_source, const ChatTemplateInputs& inputs,
                                         const jinja::RenderLimits& limits) {
  KVEDGE_ASSIGN_OR_RETURN(jinja::Template tmpl, jinja::Template::Parse(template_source));
  KVEDGE_ASSIGN_OR_RETURN(jinja::Value messages, ParseMessagesJson(inputs.messages_json));
  for (const std::string* token : {&inputs.bos_token, &inputs.eos_token}) {
    if (jinja::FindInvalidUtf8(*token) != std::string_view::npos) {
      return InvalidArgument("bos/eos token is not valid UTF-8");
    }
  }
  jinja::DictData vars;
  vars.Set(jinja::Value::Str("messages"), messages);
  vars.Set(jinja::Value::Str("tools"), jinja::Value::None());
  vars.Set(jinja::Value::Str("documents"), jinja::Value::None());
  vars.Set(jinja::Value::Str("add_generation_prompt"), jinja::Value::Bool(inputs.add_generation_prompt));
  vars.Set(jinja::Value::Str("bos_token"), jinja::Value::Str(inputs.bos_token));
  vars.Set(jinja::Value::Str("eos_token"), jinja::Value::Str(inputs.eos_token));
  jinja::RenderOptions options;
  options.limits = limits;
  options.now = inputs.now;
  return tmpl.Render(vars, options);
}

}  // namespace kvedge::chat
