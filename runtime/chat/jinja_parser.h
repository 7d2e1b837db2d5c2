// Lexer and parser of the Jinja interpreter: template source → syntax tree,
// following jinja2 3.x as transformers configures it (trim_blocks,
// lstrip_blocks, one trailing newline dropped, loop controls, the
// {% generation %} tag). The source is untrusted: nesting is bounded and
// every malformed construct is an Error naming the line.
#ifndef KVEDGE_RUNTIME_CHAT_JINJA_PARSER_H_
#define KVEDGE_RUNTIME_CHAT_JINJA_PARSER_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/chat/jinja_value.h"

namespace kvedge::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum Type {
    kLiteral,  // literal
    kName,     // name
    kList,     // args: items
    kTuple,    // args: items
    kDict,     // args: key, value, key, value…
    kGetAttr,  // args[0].name
    kGetItem,  // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]] (null = omitted)
    kCall,     // args[0](args[1..], kwargs)
    kFilter,   // args[0]|name(args[1..], kwargs); args[0] null in {% filter %}
    kTest,     // args[0] is [not] name(args[1..], kwargs)
    kUnary,    // name ("-" or "+") args[0]
    kBinary,   // args[0] name args[1]: + - * / // % **
    kConcat,   // args joined with ~
    kAnd,
    kOr,
    kNot,
    kCompare,   // args[0] ops[0] args[1] ops[1] args[2]…: == != < <= > >= in notin
    kCondExpr,  // args[1] if args[0] else args[2] (args[2] null → Undefined)
  };
  Type type;
  int line = 0;
  Value literal;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

struct Node {
  enum Type {
    kData,         // text
    kOutput,       // {{ expr }}
    kIf,           // if expr: body else else_body (elif nests an kIf in else_body)
    kFor,          // for targets in expr [if filter]: body else else_body
    kSet,          // set targets = expr, or set targets[0].attr = expr
    kSetBlock,     // set targets[0] [| filter] body endset
    kMacro,        // macro name(params = defaults) body
    kCallBlock,    // call(params) expr body
    kFilterBlock,  // filter <filter chain on a null subject> body
    kWith,         // with targets[i] = values[i]: body
    kBreak,
    kContinue,
    kScope,  // {% generation %}: body rendered as is
  };
  Type type;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;                    // kFor's `if`, kSetBlock's filter
  std::vector<std::string> targets;  // assigned names (a tuple when several)
  std::string attr;                  // kSet on a namespace attribute
  bool tuple_target = false;
  std::vector<ExprPtr> values;  // kWith values, kMacro/kCallBlock parameter defaults (null: none)
  NodeList body;
  NodeList else_body;
  // kMacro / kCallBlock: whether the body reads caller, varargs or kwargs.
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
  // kFor: whether the body (or its filter) may read `loop` (else no loop object is built).
  bool uses_loop = false;
};

struct ParseLimits {
  int max_nesting = 128;  // brackets, unary operators and blocks, combined
};

// Parses a template. Throws Error (kInvalidArgument for syntax, kUnsupported
// for jinja2 features outside the subset, kResourceExhausted past the limits).
NodeList ParseTemplate(std::string_view source, const ParseLimits& limits);

// Whether jinja2 (with transformers' additions) defines the filter or test.
bool IsJinjaFilterName(std::string_view name);
bool IsJinjaTestName(std::string_view name);

}  // namespace kvedge::jinja

#endif  // KVEDGE_RUNTIME_CHAT_JINJA_PARSER_H_
