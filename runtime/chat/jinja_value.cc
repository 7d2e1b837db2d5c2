// Values of the Jinja interpreter: Python's str()/repr(), ==, <, json.dumps
// and the UTF-8 and case helpers the filters and string methods share.
#include "runtime/chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace kvedge::jinja {

void Fail(std::string message) { throw Error{StatusCode::kInvalidArgument, std::move(message)}; }
void FailUnsupported(std::string message) { throw Error{StatusCode::kUnsupported, std::move(message)}; }
void FailExhausted(std::string message) { throw Error{StatusCode::kResourceExhausted, std::move(message)}; }

Value Value::Undefined(std::string hint) {
  Value v;
  v.s_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}
Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}
Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.d_ = d;
  return v;
}
Value Value::Str(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::List(std::vector<Value> items, Kind kind) {
  Value v;
  v.kind_ = kind;
  v.list_ = std::make_shared<const std::vector<Value>>(std::move(items));
  return v;
}
Value Value::Dict(std::shared_ptr<DictData> dict) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::move(dict);
  return v;
}
Value Value::Object(std::shared_ptr<ObjectData> object) {
  Value v;
  v.kind_ = Kind::kObject;
  v.object_ = std::move(object);
  return v;
}
Value Value::Function(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.fn_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return d_ != 0;
    case Kind::kString:
      return !s_->empty();
    case Kind::kList:
    case Kind::kTuple:
      return !list_->empty();
    case Kind::kDict:
      return !dict_->entries.empty();
    case Kind::kIterator:
    case Kind::kObject:
    case Kind::kCallable:
      return true;
  }
  return false;
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return "list";
    case Kind::kTuple: return "tuple";
    case Kind::kIterator: return "generator";
    case Kind::kDict: return "dict";
    case Kind::kObject: return object_->is_namespace ? "Namespace" : "LoopContext";
    case Kind::kCallable: return "function";
  }
  return "object";
}

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: return *s_;
    default: return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "None";
    case Kind::kBool: return b_ ? "True" : "False";
    case Kind::kInt: return std::to_string(i_);
    case Kind::kFloat: return FloatRepr(d_);
    case Kind::kString: return StringRepr(*s_);
    case Kind::kList:
    case Kind::kTuple: {
      std::string out = kind_ == Kind::kList ? "[" : "(";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].Repr();
      }
      if (kind_ == Kind::kTuple && list_->size() == 1) out += ",";
      out += kind_ == Kind::kList ? "]" : ")";
      return out;
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict_->entries) {
        if (!first) out += ", ";
        first = false;
        out += k.Repr() + ": " + v.Repr();
      }
      return out + "}";
    }
    case Kind::kIterator:
      // Python prints an address here; no template output can depend on it.
      FailUnsupported("printing a generator (apply |list first)");
    case Kind::kObject: {
      if (!object_->is_namespace) return "<LoopContext>";
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [k, v] : object_->attrs) {
        if (!first) out += ", ";
        first = false;
        out += StringRepr(k) + ": " + v.Repr();
      }
      return out + "}>";
    }
    case Kind::kCallable:
      FailUnsupported("printing the function '" + fn_->name + "'");
  }
  return "";
}

const Value* DictData::Find(const Value& key) const {
  for (const auto& e : entries) {
    if (Equals(e.first, key)) return &e.second;
  }
  return nullptr;
}
const Value* DictData::Find(std::string_view key) const {
  for (const auto& e : entries) {
    if (e.first.is_string() && e.first.string() == key) return &e.second;
  }
  return nullptr;
}
void DictData::Set(Value key, Value value) {
  for (auto& e : entries) {
    if (Equals(e.first, key)) {
      e.second = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

const Value* ObjectData::Find(std::string_view name) const {
  for (const auto& a : attrs) {
    if (a.first == name) return &a.second;
  }
  return nullptr;
}
void ObjectData::Set(std::string_view name, Value value) {
  for (auto& a : attrs) {
    if (a.first == name) {
      a.second = std::move(value);
      return;
    }
  }
  attrs.emplace_back(std::string(name), std::move(value));
}

Value CallArgs::Get(size_t index, std::string_view name) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return v;
  }
  if (index < positional.size()) return positional[index];
  return Value();
}
bool CallArgs::Has(size_t index, std::string_view name) const {
  for (const auto& kv : keyword) {
    if (kv.first == name) return true;
  }
  return index < positional.size();
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return a.number() == b.number();
    return a.integer() == b.integer();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.string() == b.string();
    case Kind::kList:
    case Kind::kTuple: {
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (!Equals(a.items()[i], b.items()[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (a.dict().entries.size() != b.dict().entries.size()) return false;
      for (const auto& [k, v] : a.dict().entries) {
        const Value* other = b.dict().Find(k);
        if (!other || !Equals(v, *other)) return false;
      }
      return true;
    }
    case Kind::kIterator:
      return &a.items() == &b.items();
    case Kind::kObject:
      return &a.object() == &b.object();
    case Kind::kCallable:
      return &a.callable() == &b.callable();
    default:
      return false;
  }
}

bool Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return a.number() < b.number();
    return a.integer() < b.integer();
  }
  if (a.is_string() && b.is_string()) return a.string() < b.string();  // UTF-8 order is code point order
  if ((a.kind() == Kind::kList || a.kind() == Kind::kTuple) && a.kind() == b.kind()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equals(x[i], y[i])) return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  Fail(std::string("'<' not supported between instances of '") + a.TypeName() + "' and '" + b.TypeName() + "'");
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  // Shortest round-trip digits, as Python's repr: d.ddde±x.
  const auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string out;
  if (sci[0] == '-') {
    out += '-';
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  const int exp = std::atoi(sci.c_str() + e + 1);
  const int decpt = exp + 1;
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + eb;
  }
  if (decpt <= 0) return out + "0." + std::string(-decpt, '0') + digits;
  if (static_cast<size_t>(decpt) >= digits.size()) {
    return out + digits + std::string(decpt - digits.size(), '0') + ".0";
  }
  return out + digits.substr(0, decpt) + "." + digits.substr(decpt);
}

namespace {

bool IsPrintable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) return false;
  if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61c || cp == 0x6dd || cp == 0x70f || cp == 0x180e) return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f)) return false;
  if ((cp >= 0x205f && cp <= 0x206f) || cp == 0x3000 || cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb)) return false;
  if ((cp >= 0xd800 && cp <= 0xf8ff) || cp == 0xe0001 || (cp >= 0xe0020 && cp <= 0xe007f)) return false;
  if (cp >= 0xf0000) return false;
  return true;
}

}  // namespace

std::string StringRepr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  size_t pos = 0;
  while (pos < s.size()) {
    const uint32_t cp = NextCodePoint(s, &pos);
    char buf[16];
    if (cp == '\\' || cp == static_cast<uint32_t>(quote)) {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (IsPrintable(cp)) {
      AppendCodePoint(cp, &out);
    } else {
      if (cp < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
      } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", cp);
      }
      out += buf;
    }
  }
  out += quote;
  return out;
}

namespace {

void DumpJsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  *out += '"';
  size_t pos = 0;
  while (pos < s.size()) {
    const uint32_t cp = NextCodePoint(s, &pos);
    char buf[16];
    switch (cp) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (cp < 0x20 || (ensure_ascii && cp > 0x7e)) {
          if (cp >= 0x10000) {
            const uint32_t v = cp - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
          }
          *out += buf;
        } else {
          AppendCodePoint(cp, out);
        }
    }
  }
  *out += '"';
}

std::string JsonFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return FloatRepr(d);
}

void Newline(const JsonOptions& o, int depth, std::string* out) {
  *out += '\n';
  for (int i = 0; i < depth; ++i) *out += o.indent;
}

}  // namespace

void DumpJson(const Value& value, const JsonOptions& o, int depth, std::string* out) {
  if (depth > 200) FailExhausted("tojson: nesting deeper than 200 levels");
  switch (value.kind()) {
    case Kind::kNone: *out += "null"; return;
    case Kind::kBool: *out += value.boolean() ? "true" : "false"; return;
    case Kind::kInt: *out += std::to_string(value.integer()); return;
    case Kind::kFloat: *out += JsonFloat(value.number()); return;
    case Kind::kString: DumpJsonString(value.string(), o.ensure_ascii, out); return;
    case Kind::kList:
    case Kind::kTuple: {
      const auto& items = value.items();
      if (items.empty()) {
        *out += "[]";
        return;
      }
      *out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) *out += o.item_separator;
        if (o.has_indent) Newline(o, depth + 1, out);
        DumpJson(items[i], o, depth + 1, out);
      }
      if (o.has_indent) Newline(o, depth, out);
      *out += ']';
      return;
    }
    case Kind::kDict: {
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [k, v] : value.dict().entries) {
        std::string key;
        switch (k.kind()) {
          case Kind::kString: key = k.string(); break;
          case Kind::kInt: key = std::to_string(k.integer()); break;
          case Kind::kFloat: key = JsonFloat(k.number()); break;
          case Kind::kBool: key = k.boolean() ? "true" : "false"; break;
          case Kind::kNone: key = "null"; break;
          default:
            Fail(std::string("keys must be str, int, float, bool or None, not ") + k.TypeName());
        }
        entries.emplace_back(std::move(key), &v);
      }
      if (o.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      if (entries.empty()) {
        *out += "{}";
        return;
      }
      *out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) *out += o.item_separator;
        if (o.has_indent) Newline(o, depth + 1, out);
        DumpJsonString(entries[i].first, o.ensure_ascii, out);
        *out += o.key_separator;
        DumpJson(*entries[i].second, o, depth + 1, out);
      }
      if (o.has_indent) Newline(o, depth, out);
      *out += '}';
      return;
    }
    default:
      Fail(std::string("Object of type ") + value.TypeName() + " is not JSON serializable");
  }
}

uint32_t NextCodePoint(std::string_view s, size_t* pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = *pos;
  const uint32_t c = p[i];
  int len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
  if (i + len > n) len = 1;  // unreachable on valid UTF-8; never read past the end
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (p[i + k] & 0x3f);
  *pos = i + len;
  return cp;
}

void AppendCodePoint(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xc0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xe0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    *out += static_cast<char>(0xf0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::vector<uint32_t> CodePoints(std::string_view s) {
  std::vector<uint32_t> cps;
  size_t pos = 0;
  while (pos < s.size()) cps.push_back(NextCodePoint(s, &pos));
  return cps;
}

std::string FromCodePoints(const uint32_t* cps, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) AppendCodePoint(cps[i], &out);
  return out;
}

size_t CodePointCount(std::string_view s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

bool IsPyWhitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
         cp == 0x205f || cp == 0x3000;
}

namespace {

// Latin Extended-B: the titlecase digraph triples (upper, title, lower) and
// the ranges where upper/lower letters alternate.
bool IsDigraph(uint32_t c) { return (c >= 0x1c4 && c <= 0x1cc) || (c >= 0x1f1 && c <= 0x1f3); }
uint32_t DigraphBase(uint32_t c) { return c >= 0x1f1 ? 0x1f1 : 0x1c4 + (c - 0x1c4) / 3 * 3; }
// Whether c lies in an alternating range whose upper-case letters are odd.
int LatinBPairParity(uint32_t c) {
  if (c >= 0x1cd && c <= 0x1dc) return 1;
  if ((c >= 0x1de && c <= 0x1ef) || c == 0x1f4 || c == 0x1f5 || (c >= 0x1f8 && c <= 0x21f) ||
      (c >= 0x222 && c <= 0x233)) {
    return 0;
  }
  return -1;
}

}  // namespace

uint32_t ToUpper(uint32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
  if (c >= 0xe0 && c <= 0xfe && c != 0xf7) return c - 32;
  if (c == 0xff) return 0x178;
  if (c == 0xb5) return 0x39c;
  if (c >= 0x100 && c <= 0x17f) {
    if ((c <= 0x137 || (c >= 0x14a && c <= 0x177)) && (c & 1)) return c - 1;
    if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) && !(c & 1)) return c - 1;
    if (c == 0x131) return 'I';
    if (c == 0x17f) return 'S';
    return c;
  }
  if (IsDigraph(c)) return DigraphBase(c);
  if (const int parity = LatinBPairParity(c); parity >= 0) {
    return (c & 1) == static_cast<uint32_t>(parity) ? c : c - 1;
  }
  if (c >= 0x3b1 && c <= 0x3c9) return c == 0x3c2 ? 0x3a3 : c - 32;
  if (c == 0x3ac) return 0x386;
  if (c >= 0x3ad && c <= 0x3af) return c - 37;
  if (c == 0x3cc) return 0x38c;
  if (c == 0x3cd || c == 0x3ce) return c - 63;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  if (((c >= 0x460 && c <= 0x481) || (c >= 0x48a && c <= 0x4bf)) && (c & 1)) return c - 1;
  if (c >= 0xff41 && c <= 0xff5a) return c - 32;
  return c;
}

uint32_t ToLower(uint32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 32;
  if (c == 0x178) return 0xff;
  if (c >= 0x100 && c <= 0x17f) {
    if ((c <= 0x137 || (c >= 0x14a && c <= 0x177)) && !(c & 1)) return c == 0x130 ? c : c + 1;
    if (((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) && (c & 1)) return c + 1;
    return c;
  }
  if (IsDigraph(c)) return DigraphBase(c) + 2;
  if (const int parity = LatinBPairParity(c); parity >= 0) {
    return (c & 1) == static_cast<uint32_t>(parity) ? c + 1 : c;
  }
  if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
  if (c == 0x386) return 0x3ac;
  if (c >= 0x388 && c <= 0x38a) return c + 37;
  if (c == 0x38c) return 0x3cc;
  if (c == 0x38e || c == 0x38f) return c + 63;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  if (((c >= 0x460 && c <= 0x481) || (c >= 0x48a && c <= 0x4bf)) && !(c & 1)) return c + 1;
  if (c >= 0xff21 && c <= 0xff3a) return c + 32;
  return c;
}

bool IsCased(uint32_t c) { return ToUpper(c) != c || ToLower(c) != c || c == 0xdf || IsDigraph(c); }

void AppendUpper(uint32_t c, std::string* out) {
  if (c == 0xdf) {
    *out += "SS";
    return;
  }
  AppendCodePoint(ToUpper(c), out);
}

void AppendLower(uint32_t c, std::string* out) {
  if (c == 0x130) {
    *out += "i\xcc\x87";  // i + COMBINING DOT ABOVE
    return;
  }
  AppendCodePoint(ToLower(c), out);
}

void AppendTitle(uint32_t c, std::string* out) {
  if (c == 0xdf) {
    *out += "Ss";
    return;
  }
  if (IsDigraph(c)) {
    AppendCodePoint(DigraphBase(c) + 1, out);
    return;
  }
  AppendCodePoint(ToUpper(c), out);
}

bool IsAlpha(uint32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  // Letters of the common scripts (Python's str.isalpha covers all of Unicode's L*).
  return IsCased(c) || (c >= 0xc0 && c <= 0x24f && c != 0xd7 && c != 0xf7) || (c >= 0x370 && c <= 0x52f && c != 0x37e && c != 0x387) ||
         (c >= 0x5d0 && c <= 0x5ea) || (c >= 0x620 && c <= 0x64a) || (c >= 0x904 && c <= 0x939) ||
         (c >= 0xe01 && c <= 0xe30) || (c >= 0x3041 && c <= 0x3096) || (c >= 0x30a1 && c <= 0x30fa) ||
         (c >= 0x3400 && c <= 0x4dbf) || (c >= 0x4e00 && c <= 0x9fff) || (c >= 0xac00 && c <= 0xd7a3);
}

bool IsDigit(uint32_t c) { return c >= '0' && c <= '9'; }

std::string Upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) AppendUpper(NextCodePoint(s, &pos), &out);
  return out;
}

std::string Lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  uint32_t prev = 0;
  while (pos < s.size()) {
    const uint32_t c = NextCodePoint(s, &pos);
    if (c == 0x3a3) {
      // Final sigma: after a cased letter and not before one.
      size_t p = pos;
      const uint32_t next = pos < s.size() ? NextCodePoint(s, &p) : 0;
      AppendCodePoint(IsCased(prev) && !IsCased(next) ? 0x3c2 : 0x3c3, &out);
    } else {
      AppendLower(c, &out);
    }
    prev = c;
  }
  return out;
}

size_t FindInvalidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
      return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace kvedge::jinja
