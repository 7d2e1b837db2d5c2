// Values of the Jinja interpreter (runtime/chat): Python's data model as far
// as chat templates reach — None, bool, int, float, str, list, tuple, dict,
// jinja2's Undefined, namespaces and loop objects, callables. Strings are
// valid UTF-8; lengths, indices and slices count code points like Python.
#ifndef KVEDGE_RUNTIME_CHAT_JINJA_VALUE_H_
#define KVEDGE_RUNTIME_CHAT_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "platform/status.h"

namespace kvedge::jinja {

// Raised inside the interpreter and turned into a Status at its API
// (jinja_render.h); never crosses it.
struct Error {
  StatusCode code;
  std::string message;
};
[[noreturn]] void Fail(std::string message);                  // kInvalidArgument: a template error
[[noreturn]] void FailUnsupported(std::string message);       // kUnsupported
[[noreturn]] void FailExhausted(std::string message);         // kResourceExhausted

class Value;
struct CallArgs;
class Interpreter;

enum class Kind : uint8_t {
  kUndefined,  // jinja2's default Undefined: prints '', iterates empty, fails on most operations
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,       // Python list
  kTuple,      // Python tuple
  kIterator,   // a generator/iterator (select, map, reverse…): iterable once, no len, always true
  kDict,       // insertion-ordered
  kObject,     // attribute bag: namespace() (assignable with set) and loop
  kCallable,
};

struct DictData;
struct ObjectData;
struct Callable;

// Immutable from the template's point of view (as in transformers'
// ImmutableSandboxedEnvironment) except namespaces; copies share storage.
class Value {
 public:
  Value() = default;  // Undefined
  static Value Undefined(std::string hint = {});
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value Str(std::string s);
  static Value List(std::vector<Value> items, Kind kind = Kind::kList);
  static Value Dict(std::shared_ptr<DictData> dict);
  static Value Object(std::shared_ptr<ObjectData> object);
  static Value Function(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_sequence_like() const { return kind_ == Kind::kList || kind_ == Kind::kTuple || kind_ == Kind::kIterator; }

  bool boolean() const { return b_; }
  int64_t integer() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double number() const { return kind_ == Kind::kFloat ? d_ : static_cast<double>(integer()); }
  const std::string& string() const { return *s_; }  // kString; the hint for kUndefined
  const std::vector<Value>& items() const { return *list_; }
  const DictData& dict() const { return *dict_; }
  DictData& mutable_dict() const { return *dict_; }
  ObjectData& object() const { return *object_; }
  const Callable& callable() const { return *fn_; }

  // Python truthiness (Undefined is false, iterators are true).
  bool Truthy() const;
  // Python str() (jinja2's rendering of {{ value }}; Undefined renders '').
  std::string Str() const;
  // Python repr().
  std::string Repr() const;
  // Python type names for messages: 'str', 'int', 'list', 'dict'…
  const char* TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const std::vector<Value>> list_;
  std::shared_ptr<DictData> dict_;
  std::shared_ptr<ObjectData> object_;
  std::shared_ptr<const Callable> fn_;
};

struct DictData {
  std::vector<std::pair<Value, Value>> entries;  // insertion order, keys unique
  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  void Set(Value key, Value value);
};

struct ObjectData {
  bool is_namespace = false;
  std::vector<std::pair<std::string, Value>> attrs;
  const Value* Find(std::string_view name) const;
  void Set(std::string_view name, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The argument named `name`, at position `index` if not given by keyword;
  // Undefined if absent. Consumed arguments are not checked for extras.
  Value Get(size_t index, std::string_view name) const;
  bool Has(size_t index, std::string_view name) const;
};

struct Callable {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> fn;
};

// Python ==, hash-free (dict keys compare with it too).
bool Equals(const Value& a, const Value& b);
// Python <, for numbers, strings and sequences; a template error otherwise.
bool Less(const Value& a, const Value& b);

// Python's float repr: shortest round-trip digits, '1.0', '1e+16', 'inf'.
std::string FloatRepr(double d);
// Python's str repr with quotes chosen like Python's.
std::string StringRepr(std::string_view s);

struct JsonOptions {
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_indent = false;
  std::string indent;           // one level of indentation when has_indent
  std::string item_separator;   // default ", " (or "," with an indent)
  std::string key_separator;    // default ": "
};
// Python json.dumps(value, ...) as transformers' tojson filter calls it.
void DumpJson(const Value& value, const JsonOptions& options, int depth, std::string* out);

// UTF-8 helpers (input is valid UTF-8: templates and messages are checked).
// Decodes the code point at s[*pos] and advances *pos.
uint32_t NextCodePoint(std::string_view s, size_t* pos);
void AppendCodePoint(uint32_t cp, std::string* out);
std::vector<uint32_t> CodePoints(std::string_view s);
std::string FromCodePoints(const uint32_t* cps, size_t n);
size_t CodePointCount(std::string_view s);
// Python str.isspace() for one code point.
bool IsPyWhitespace(uint32_t cp);
// Case mappings for Latin (ASCII, Latin-1, Extended-A and -B), Greek,
// Cyrillic and fullwidth Latin, with Python's special cases there (ß → SS,
// İ → i̇, titlecase digraphs, final sigma); other scripts are left as they
// are. ToUpper/ToLower are the one-code-point simple mappings.
uint32_t ToUpper(uint32_t cp);
uint32_t ToLower(uint32_t cp);
bool IsCased(uint32_t cp);
void AppendUpper(uint32_t cp, std::string* out);
void AppendLower(uint32_t cp, std::string* out);
void AppendTitle(uint32_t cp, std::string* out);
bool IsAlpha(uint32_t cp);
bool IsDigit(uint32_t cp);
std::string Upper(std::string_view s);
std::string Lower(std::string_view s);
// Index of the first invalid UTF-8 byte, or npos.
size_t FindInvalidUtf8(std::string_view s);

}  // namespace kvedge::jinja

#endif  // KVEDGE_RUNTIME_CHAT_JINJA_VALUE_H_
