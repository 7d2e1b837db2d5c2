// Lexer and recursive-descent parser of the Jinja subset, after jinja2's
// lexer.py and parser.py (the same whitespace rules, token order and operator
// precedence).
#include "runtime/chat/jinja_parser.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace kvedge::jinja {
namespace {

enum class Tok { kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok type;
  std::string text;  // data, name, string value or operator
  int64_t i = 0;
  double d = 0;
  int line = 1;
};

std::string At(int line) { return " (line " + std::to_string(line) + ")"; }

// jinja2 splits the source on \r\n, \r and \n, drops one trailing newline and
// joins the lines with \n.
std::string NormalizeSource(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Length of the Python whitespace code point at s[pos], or 0.
size_t WhitespaceAt(std::string_view s, size_t pos) {
  size_t p = pos;
  return IsPyWhitespace(NextCodePoint(s, &p)) ? p - pos : 0;
}

std::string_view RStripPy(std::string_view s) {
  while (!s.empty()) {
    // Step back to the start of the last code point.
    size_t start = s.size() - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
    size_t p = start;
    if (!IsPyWhitespace(NextCodePoint(s, &p))) break;
    s.remove_suffix(s.size() - start);
  }
  return s;
}

bool AllPyWhitespace(std::string_view s) {
  if (s.empty()) return false;
  size_t pos = 0;
  while (pos < s.size()) {
    if (!IsPyWhitespace(NextCodePoint(s, &pos))) return false;
  }
  return true;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(NormalizeSource(source)) {}

  std::vector<Token> Run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t idx = pos;
      for (;;) {
        idx = src_.find('{', idx);
        if (idx == std::string::npos || idx + 1 >= src_.size()) {
          idx = std::string::npos;
          break;
        }
        const char k = src_[idx + 1];
        if (k == '{' || k == '%' || k == '#') break;
        ++idx;
      }
      if (idx == std::string::npos) {
        Emit(Tok::kData, src_.substr(pos));
        break;
      }
      const char kind = src_[idx + 1];
      const char mod = idx + 2 < src_.size() && (src_[idx + 2] == '-' || src_[idx + 2] == '+') ? src_[idx + 2] : 0;
      std::string_view text(src_.data() + pos, idx - pos);
      if (mod == '-') {
        text = RStripPy(text);
      } else if (mod != '+' && kind != '{') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && AllPyWhitespace(text.substr(l_pos))) text = text.substr(0, l_pos);
      }
      if (!text.empty()) Emit(Tok::kData, std::string(text));
      CountLines(pos, idx);
      size_t p = idx + 2 + (mod ? 1 : 0);
      if (kind == '#') {
        const size_t e = src_.find("#}", p);
        if (e == std::string::npos) Fail("Missing end of comment tag" + At(line_));
        CountLines(idx, e);
        pos = e + 2;
        if (e > p && src_[e - 1] == '-') {
          pos = SkipWhitespace(pos);
        } else if (!(e > p && src_[e - 1] == '+') && pos < src_.size() && src_[pos] == '\n') {
          ++pos;
        }
        CountLines(e, pos);
        line_starting = src_[pos - 1] == '\n';
        continue;
      }
      if (kind == '%' && TryRaw(p, &pos)) {
        line_starting = src_[pos - 1] == '\n';
        continue;
      }
      Emit(kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, "");
      pos = LexTag(kind == '{', p);
      line_starting = src_[pos - 1] == '\n';
    }
    Emit(Tok::kEof, "");
    return std::move(tokens_);
  }

 private:
  void Emit(Tok type, std::string text) {
    Token t;
    t.type = type;
    t.line = line_;
    t.text = std::move(text);
    tokens_.push_back(std::move(t));
  }
  void CountLines(size_t from, size_t to) {
    line_ += static_cast<int>(std::count(src_.begin() + from, src_.begin() + to, '\n'));
  }
  size_t SkipWhitespace(size_t pos) const {
    while (pos < src_.size()) {
      const size_t n = WhitespaceAt(src_, pos);
      if (!n) break;
      pos += n;
    }
    return pos;
  }
  // After "{%" and its modifier at p: the end of the tag if src_[p..] closes
  // the block (returns the position past it), else npos.
  size_t BlockEndAt(size_t p, bool trim) const {
    if (src_.compare(p, 3, "-%}") == 0) return SkipWhitespace(p + 3);
    if (src_.compare(p, 3, "+%}") == 0) return p + 3;
    if (src_.compare(p, 2, "%}") == 0) {
      return trim && p + 2 < src_.size() && src_[p + 2] == '\n' ? p + 3 : p + 2;
    }
    return std::string::npos;
  }
  static bool IsNameChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }
  // {% raw %}…{% endraw %}: the content is data, verbatim.
  bool TryRaw(size_t p, size_t* pos) {
    size_t q = SkipWhitespace(p);
    if (src_.compare(q, 3, "raw") != 0 || (q + 3 < src_.size() && IsNameChar(src_[q + 3]))) return false;
    q = SkipWhitespace(q + 3);
    size_t body;
    if (src_.compare(q, 3, "-%}") == 0) {
      body = SkipWhitespace(q + 3);
    } else if (src_.compare(q, 2, "%}") == 0) {
      body = q + 2;  // raw_begin takes no trim_blocks newline
    } else {
      return false;
    }
    // Find "{%" [-+] ws "endraw" ws ("+%}" | "-%}" ws | "%}" "\n"?).
    for (size_t s = src_.find("{%", body); s != std::string::npos; s = src_.find("{%", s + 2)) {
      const char m = s + 2 < src_.size() && (src_[s + 2] == '-' || src_[s + 2] == '+') ? src_[s + 2] : 0;
      size_t r = SkipWhitespace(s + 2 + (m ? 1 : 0));
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r = SkipWhitespace(r + 6);
      const size_t end = BlockEndAt(r, true);
      if (end == std::string::npos) continue;
      std::string_view text(src_.data() + body, s - body);
      if (m == '-') {
        text = RStripPy(text);
      } else if (m != '+') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        if (l_pos > 0 && AllPyWhitespace(text.substr(l_pos))) text = text.substr(0, l_pos);
      }
      if (!text.empty()) Emit(Tok::kData, std::string(text));
      CountLines(p, end);
      *pos = end;
      return true;
    }
    Fail("Missing end of raw directive" + At(line_));
  }

  // Tokens of one {{ }} or {% %} tag from p; returns the position past its end.
  size_t LexTag(bool variable, size_t p) {
    std::vector<char> balance;
    for (;;) {
      if (p >= src_.size()) Fail(std::string("unexpected end of template, expected '") + (variable ? "}}" : "%}") + "'" + At(line_));
      if (balance.empty()) {
        if (variable) {
          if (src_.compare(p, 3, "-}}") == 0) {
            Emit(Tok::kVarEnd, "");
            const size_t end = SkipWhitespace(p + 3);
            CountLines(p, end);
            return end;
          }
          if (src_.compare(p, 2, "}}") == 0) {
            Emit(Tok::kVarEnd, "");
            return p + 2;
          }
        } else {
          const size_t end = BlockEndAt(p, true);
          if (end != std::string::npos) {
            Emit(Tok::kBlockEnd, "");
            CountLines(p, end);
            return end;
          }
        }
      }
      const char c = src_[p];
      if (const size_t ws = WhitespaceAt(src_, p)) {
        if (c == '\n') ++line_;
        p += ws;
        continue;
      }
      if (c >= '0' && c <= '9') {
        p = LexNumber(p);
        continue;
      }
      if (IsNameChar(c)) {
        size_t e = p;
        while (e < src_.size() && IsNameChar(src_[e])) ++e;
        Emit(Tok::kName, src_.substr(p, e - p));
        p = e;
        continue;
      }
      if (c == '\'' || c == '"') {
        p = LexString(p);
        continue;
      }
      static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]",
                                         "(",  ")",  "{",  "}",  ">",  "<",  "=", ".", ":", "|", ",", ";"};
      const char* op = nullptr;
      for (const char* o : kOps) {
        if (src_.compare(p, std::strlen(o), o) == 0) {
          op = o;
          break;
        }
      }
      if (!op) Fail(std::string("unexpected char '") + c + "'" + At(line_));
      const std::string o(op);
      if (o == "(" || o == "[" || o == "{") {
        if (balance.size() >= 256) FailExhausted("brackets nested deeper than 256" + At(line_));
        balance.push_back(o == "(" ? ')' : o == "[" ? ']' : '}');
      } else if (o == ")" || o == "]" || o == "}") {
        if (balance.empty()) Fail("unexpected '" + o + "'" + At(line_));
        if (balance.back() != o[0]) Fail("unexpected '" + o + "', expected '" + balance.back() + "'" + At(line_));
        balance.pop_back();
      }
      Emit(Tok::kOp, o);
      p += o.size();
    }
  }

  static bool Digit(char c) { return c >= '0' && c <= '9'; }
  // Digits with single '_' separators from p; returns the end (p if none).
  size_t Digits(size_t p) const {
    size_t e = p;
    while (e < src_.size() && Digit(src_[e])) {
      ++e;
      if (e + 1 < src_.size() && src_[e] == '_' && Digit(src_[e + 1])) ++e;
    }
    return e;
  }

  size_t LexNumber(size_t p) {
    const size_t int_end = Digits(p);
    size_t e = int_end;
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && Digit(src_[e + 1])) {
      e = Digits(e + 1);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && Digit(src_[x])) {
        e = Digits(x);
        is_float = true;
      }
    }
    std::string digits;
    for (size_t i = p; i < e; ++i) {
      if (src_[i] != '_') digits += src_[i];
    }
    Token t;
    t.line = line_;
    if (is_float) {
      t.type = Tok::kFloat;
      t.d = std::strtod(digits.c_str(), nullptr);
    } else {
      // jinja2's integer rule: no leading zeros except for zero itself.
      if (digits.size() > 1 && digits[0] == '0') {
        if (digits.find_first_not_of('0') != std::string::npos) Fail("invalid integer literal '" + digits + "'" + At(line_));
      }
      t.type = Tok::kInt;
      if (digits.size() > 18) FailUnsupported("integer literal " + digits + " exceeds 64 bits" + At(line_));
      t.i = std::stoll(digits);
    }
    t.text = digits;
    tokens_.push_back(std::move(t));
    return e;
  }

  static int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // A quoted string with Python's unicode-escape decoding (jinja2 decodes
  // string literals that way; unknown escapes keep their backslash).
  size_t LexString(size_t p) {
    const char quote = src_[p];
    const int start_line = line_;
    std::string out;
    size_t i = p + 1;
    for (;;) {
      if (i >= src_.size()) Fail("unexpected end of template, unterminated string" + At(start_line));
      const char c = src_[i];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out += c;
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) Fail("unterminated string" + At(start_line));
      const char e = src_[i + 1];
      i += 2;
      switch (e) {
        case '\n': ++line_; break;  // line continuation
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int k = 0; k < n; ++k) {
            const int h = i + k < src_.size() ? HexValue(src_[i + k]) : -1;
            if (h < 0) Fail(std::string("truncated \\") + e + " escape in a string" + At(line_));
            cp = cp * 16 + h;
          }
          i += n;
          if (cp > 0x10ffff) Fail("illegal Unicode character in a string escape" + At(line_));
          if (cp >= 0xd800 && cp <= 0xdfff) FailUnsupported("a surrogate code point in a string escape" + At(line_));
          AppendCodePoint(cp, &out);
          break;
        }
        case 'N':
          FailUnsupported("\\N{...} escapes in strings" + At(line_));
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = e - '0';
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k) cp = cp * 8 + (src_[i++] - '0');
            AppendCodePoint(cp, &out);
          } else {
            out += '\\';
            i -= 1;  // the escaped character is kept as written
          }
      }
    }
    Token t;
    t.type = Tok::kString;
    t.text = std::move(out);
    t.line = start_line;
    tokens_.push_back(std::move(t));
    return i + 1;
  }

  std::string src_;
  std::vector<Token> tokens_;
  int line_ = 1;
};

const char* const kFilterNames[] = {
    "abs",     "attr",      "batch",   "capitalize", "center", "count",      "d",          "default",
    "dictsort", "e",        "escape",  "filesizeformat", "first", "float",   "forceescape", "format",
    "groupby", "indent",    "int",     "items",      "join",   "last",       "length",     "list",
    "lower",   "map",       "max",     "min",        "pprint", "random",     "reject",     "rejectattr",
    "replace", "reverse",   "round",   "safe",       "select", "selectattr", "slice",      "sort",
    "string",  "striptags", "sum",     "title",      "tojson", "trim",       "truncate",   "unique",
    "upper",   "urlencode", "urlize",  "wordcount",  "wordwrap", "xmlattr"};
const char* const kTestNames[] = {
    "odd",    "even",   "divisibleby", "defined", "undefined", "filter", "test",  "none",  "boolean",
    "false",  "true",   "integer",     "float",   "number",    "string", "mapping", "sequence", "iterable",
    "callable", "sameas", "escaped",   "in",      "lower",     "upper",  "==",    "eq",    "equalto",
    "!=",     "ne",     ">",           "gt",      "greaterthan", "ge",   ">=",    "<",     "lt",
    "lessthan", "<=",   "le"};

class Parser {
 public:
  Parser(std::vector<Token> tokens, const ParseLimits& limits) : toks_(std::move(tokens)), limits_(limits) {}

  NodeList Run() {
    NodeList nodes = Subparse({});
    if (cur().type != Tok::kEof) Fail("unexpected tag" + At(cur().line));
    return nodes;
  }

 private:
  // Left-associative loops (a + b + c, x|f|g, x.a.b(c)[d]) deepen the tree
  // one level per step without recursing: each step counts as nesting.
  struct ChainGuard {
    explicit ChainGuard(Parser* p) : p(p) {}
    void Step() {
      ++steps;
      if (++p->depth_ > p->limits_.max_nesting) {
        FailExhausted("template nesting deeper than " + std::to_string(p->limits_.max_nesting) + At(p->cur().line));
      }
    }
    ~ChainGuard() { p->depth_ -= steps; }
    Parser* p;
    int steps = 0;
  };

  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p(p) {
      if (++p->depth_ > p->limits_.max_nesting) {
        FailExhausted("template nesting deeper than " + std::to_string(p->limits_.max_nesting) + At(p->cur().line));
      }
    }
    ~DepthGuard() { --p->depth_; }
    Parser* p;
  };

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool IsOp(const char* op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool IsName(const char* name) const { return cur().type == Tok::kName && cur().text == name; }
  bool SkipOp(const char* op) {
    if (!IsOp(op)) return false;
    next();
    return true;
  }
  bool SkipName(const char* name) {
    if (!IsName(name)) return false;
    next();
    return true;
  }
  static std::string Describe(const Token& t) {
    switch (t.type) {
      case Tok::kData: return "template data";
      case Tok::kVarBegin: return "'{{'";
      case Tok::kVarEnd: return "end of print statement";
      case Tok::kBlockBegin: return "'{%'";
      case Tok::kBlockEnd: return "end of statement block";
      case Tok::kName: return "'" + t.text + "'";
      case Tok::kString: return "string";
      case Tok::kInt:
      case Tok::kFloat: return "number";
      case Tok::kOp: return "'" + t.text + "'";
      case Tok::kEof: return "end of template";
    }
    return "token";
  }
  [[noreturn]] void Unexpected(const char* expected) const {
    Fail("expected " + std::string(expected) + ", got " + Describe(cur()) + At(cur().line));
  }
  void ExpectOp(const char* op) {
    if (!SkipOp(op)) Unexpected((std::string("'") + op + "'").c_str());
  }
  void ExpectBlockEnd() {
    if (cur().type != Tok::kBlockEnd) Unexpected("end of statement block");
    next();
  }
  std::string ExpectName() {
    if (cur().type != Tok::kName) Unexpected("a name");
    std::string n = cur().text;
    next();
    return n;
  }

  ExprPtr Make(Expr::Type type, int line) {
    auto e = std::make_unique<Expr>();
    e->type = type;
    e->line = line;
    return e;
  }

  // Nodes until a {% name %} with name in `end` (left unconsumed: the caller
  // reads the tag name) or the end of the template.
  NodeList Subparse(const std::vector<std::string>& end) {
    NodeList nodes;
    for (;;) {
      const Token& t = cur();
      if (t.type == Tok::kEof) {
        if (!end.empty()) Fail("unexpected end of template, expected '" + end.front() + "'");
        return nodes;
      }
      if (t.type == Tok::kData) {
        auto n = std::make_unique<Node>();
        n->type = Node::kData;
        n->line = t.line;
        n->text = t.text;
        nodes.push_back(std::move(n));
        next();
      } else if (t.type == Tok::kVarBegin) {
        next();
        auto n = std::make_unique<Node>();
        n->type = Node::kOutput;
        n->line = cur().line;
        n->expr = ParseTuple(false, true, {});
        if (cur().type != Tok::kVarEnd) Unexpected("end of print statement");
        next();
        nodes.push_back(std::move(n));
      } else if (t.type == Tok::kBlockBegin) {
        const Token& name = peek();
        if (name.type == Tok::kName &&
            std::find(end.begin(), end.end(), name.text) != end.end()) {
          next();  // at the tag name
          return nodes;
        }
        next();
        nodes.push_back(ParseStatement());
      } else {
        Fail("unexpected " + Describe(t) + At(t.line));
      }
    }
  }

  NodePtr ParseStatement() {
    DepthGuard guard(this);
    if (cur().type != Tok::kName) Fail("tag name expected" + At(cur().line));
    const std::string tag = cur().text;
    const int line = cur().line;
    auto n = std::make_unique<Node>();
    n->line = line;
    next();
    if (tag == "for") {
      n->type = Node::kFor;
      ParseTargets(n.get(), "in");
      if (!SkipName("in")) Unexpected("'in'");
      n->expr = ParseTuple(false, false, {"recursive"});
      if (SkipName("if")) n->filter = ParseExpression();
      if (IsName("recursive")) FailUnsupported("recursive for loops" + At(line));
      ExpectBlockEnd();
      ++loop_depth_;
      n->body = Subparse({"endfor", "else"});
      --loop_depth_;
      if (SkipName("else")) {
        ExpectBlockEnd();
        n->else_body = Subparse({"endfor"});
      }
      next();
    } else if (tag == "if") {
      n->type = Node::kIf;
      n->expr = ParseTuple(false, false, {});
      ExpectBlockEnd();
      Node* node = n.get();
      for (;;) {
        node->body = Subparse({"elif", "else", "endif"});
        if (SkipName("elif")) {
          auto elif = std::make_unique<Node>();
          elif->type = Node::kIf;
          elif->line = cur().line;
          elif->expr = ParseTuple(false, false, {});
          ExpectBlockEnd();
          Node* next_node = elif.get();
          node->else_body.push_back(std::move(elif));
          node = next_node;
          continue;
        }
        if (SkipName("else")) {
          ExpectBlockEnd();
          node->else_body = Subparse({"endif"});
        }
        next();  // endif
        break;
      }
    } else if (tag == "set") {
      if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == "." && peek(2).type == Tok::kName) {
        n->targets.push_back(cur().text);
        n->attr = peek(2).text;
        next();
        next();
        next();
      } else {
        ParseTargets(n.get(), nullptr);
      }
      if (SkipOp("=")) {
        n->type = Node::kSet;
        n->expr = ParseTuple(false, true, {});
      } else {
        if (!n->attr.empty() || n->tuple_target) Fail("expected '='" + At(line));
        n->type = Node::kSetBlock;
        if (IsOp("|")) n->filter = ParseFilterChain(nullptr);
        ExpectBlockEnd();
        n->body = Subparse({"endset"});
        next();
      }
    } else if (tag == "macro") {
      n->type = Node::kMacro;
      n->text = ExpectName();
      ParseSignature(n.get());
      ExpectBlockEnd();
      ParseFunctionBody(n.get(), "endmacro");
    } else if (tag == "call") {
      n->type = Node::kCallBlock;
      if (IsOp("(")) ParseSignature(n.get());
      n->expr = ParseExpression();
      if (n->expr->type != Expr::kCall) Fail("expected call" + At(line));
      ExpectBlockEnd();
      ParseFunctionBody(n.get(), "endcall");
    } else if (tag == "filter") {
      n->type = Node::kFilterBlock;
      n->filter = ParseFilterChain(nullptr, /*leading_pipe=*/false);
      ExpectBlockEnd();
      n->body = Subparse({"endfilter"});
      next();
    } else if (tag == "with") {
      n->type = Node::kWith;
      while (cur().type != Tok::kBlockEnd) {
        if (!n->targets.empty()) ExpectOp(",");
        n->targets.push_back(ExpectName());
        ExpectOp("=");
        n->values.push_back(ParseExpression());
      }
      ExpectBlockEnd();
      n->body = Subparse({"endwith"});
      next();
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) Fail("'" + tag + "' outside of a loop" + At(line));
      n->type = tag == "break" ? Node::kBreak : Node::kContinue;
    } else if (tag == "generation") {
      n->type = Node::kScope;
      ExpectBlockEnd();
      n->body = Subparse({"endgeneration"});
      next();
    } else if (tag == "include" || tag == "import" || tag == "from" || tag == "extends" || tag == "block" ||
               tag == "autoescape" || tag == "trans" || tag == "do") {
      FailUnsupported("the '" + tag + "' tag" + At(line));
    } else {
      Fail("Encountered unknown tag '" + tag + "'" + At(line));
    }
    ExpectBlockEnd();
    return n;
  }

  void ParseFunctionBody(Node* n, const char* end) {
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    function_uses_.push_back({});
    n->body = Subparse({end});
    const auto uses = function_uses_.back();
    function_uses_.pop_back();
    n->uses_caller = uses[0];
    n->uses_varargs = uses[1];
    n->uses_kwargs = uses[2];
    loop_depth_ = saved_loop_depth;
    next();
  }

  // Assignment targets: a name or a tuple of names (parentheses allowed).
  void ParseTargets(Node* n, const char* end_name) {
    const bool paren = SkipOp("(");
    for (;;) {
      n->targets.push_back(ExpectName());
      if (!IsOp(",")) break;
      next();
      n->tuple_target = true;
      if ((end_name && IsName(end_name)) || IsOp("=") || IsOp(")") || cur().type == Tok::kBlockEnd) break;
    }
    if (paren) {
      n->tuple_target = true;
      ExpectOp(")");
    }
  }

  // (a, b='x', …) with literal-or-expression defaults.
  void ParseSignature(Node* n) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (!n->targets.empty()) ExpectOp(",");
      if (IsOp(")")) break;
      n->targets.push_back(ExpectName());
      n->values.push_back(SkipOp("=") ? ParseExpression() : nullptr);
    }
    next();
  }

  bool IsTupleEnd(const std::vector<std::string>& extra_end) const {
    if (cur().type == Tok::kVarEnd || cur().type == Tok::kBlockEnd || IsOp(")")) return true;
    return cur().type == Tok::kName &&
           std::find(extra_end.begin(), extra_end.end(), cur().text) != extra_end.end();
  }

  ExprPtr ParseTuple(bool explicit_parens, bool with_condexpr, const std::vector<std::string>& extra_end) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    for (;;) {
      if (!items.empty()) ExpectOp(",");
      if (IsTupleEnd(extra_end)) break;
      items.push_back(with_condexpr ? ParseExpression() : ParseOr());
      if (IsOp(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) Fail("Expected an expression, got " + Describe(cur()) + At(cur().line));
    }
    auto t = Make(Expr::kTuple, line);
    t->args = std::move(items);
    return t;
  }

  ExprPtr ParseExpression() {
    DepthGuard guard(this);
    ExprPtr expr = ParseOr();
    ChainGuard chain(this);
    while (IsName("if")) {
      chain.Step();
      const int line = cur().line;
      next();
      auto cond = Make(Expr::kCondExpr, line);
      cond->args.push_back(ParseOr());
      cond->args.push_back(std::move(expr));
      cond->args.push_back(SkipName("else") ? ParseExpression() : nullptr);
      expr = std::move(cond);
    }
    return expr;
  }

  ExprPtr Binary(Expr::Type type, std::string op, ExprPtr a, ExprPtr b) {
    auto e = Make(type, a->line);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr ParseOr() {
    ExprPtr left = ParseAnd();
    ChainGuard chain(this);
    while (SkipName("or") && (chain.Step(), true)) left = Binary(Expr::kOr, "or", std::move(left), ParseAnd());
    return left;
  }
  ExprPtr ParseAnd() {
    ExprPtr left = ParseNot();
    ChainGuard chain(this);
    while (SkipName("and") && (chain.Step(), true)) left = Binary(Expr::kAnd, "and", std::move(left), ParseNot());
    return left;
  }
  ExprPtr ParseNot() {
    if (IsName("not")) {
      DepthGuard guard(this);
      auto e = Make(Expr::kNot, cur().line);
      next();
      e->args.push_back(ParseNot());
      return e;
    }
    return ParseCompare();
  }
  ExprPtr ParseCompare() {
    ExprPtr first = ParseMath1();
    ExprPtr cmp;
    for (;;) {
      std::string op;
      if (cur().type == Tok::kOp && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                     cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (IsName("in")) {
        op = "in";
        next();
      } else if (IsName("not") && peek().type == Tok::kName && peek().text == "in") {
        op = "notin";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = Make(Expr::kCompare, first->line);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(ParseMath1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  ExprPtr ParseMath1() {
    ExprPtr left = ParseConcat();
    ChainGuard chain(this);
    while (IsOp("+") || IsOp("-")) {
      chain.Step();
      const std::string op = cur().text;
      next();
      left = Binary(Expr::kBinary, op, std::move(left), ParseConcat());
    }
    return left;
  }
  ExprPtr ParseConcat() {
    ExprPtr first = ParseMath2();
    if (!IsOp("~")) return first;
    auto e = Make(Expr::kConcat, first->line);
    e->args.push_back(std::move(first));
    while (SkipOp("~")) e->args.push_back(ParseMath2());
    return e;
  }
  ExprPtr ParseMath2() {
    ExprPtr left = ParsePow();
    ChainGuard chain(this);
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      chain.Step();
      const std::string op = cur().text;
      next();
      left = Binary(Expr::kBinary, op, std::move(left), ParsePow());
    }
    return left;
  }
  ExprPtr ParsePow() {
    ExprPtr left = ParseUnary(true);
    ChainGuard chain(this);
    while (SkipOp("**") && (chain.Step(), true)) left = Binary(Expr::kBinary, "**", std::move(left), ParseUnary(true));
    return left;
  }
  ExprPtr ParseUnary(bool with_filter) {
    DepthGuard guard(this);
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      auto e = Make(Expr::kUnary, cur().line);
      e->name = cur().text;
      next();
      e->args.push_back(ParseUnary(false));
      node = std::move(e);
    } else {
      node = ParsePrimary();
    }
    node = ParsePostfix(std::move(node));
    if (with_filter) node = ParseFilterExpr(std::move(node));
    return node;
  }

  ExprPtr ParsePrimary() {
    DepthGuard guard(this);
    const Token& t = cur();
    const int line = t.line;
    if (t.type == Tok::kName) {
      auto e = Make(Expr::kLiteral, line);
      if (t.text == "true" || t.text == "True") {
        e->literal = Value::Bool(true);
      } else if (t.text == "false" || t.text == "False") {
        e->literal = Value::Bool(false);
      } else if (t.text == "none" || t.text == "None") {
        e->literal = Value::None();
      } else {
        e->type = Expr::kName;
        e->name = t.text;
        if (!function_uses_.empty()) {
          auto& uses = function_uses_.back();
          uses[0] = uses[0] || t.text == "caller";
          uses[1] = uses[1] || t.text == "varargs";
          uses[2] = uses[2] || t.text == "kwargs";
        }
      }
      next();
      return e;
    }
    if (t.type == Tok::kString) {
      std::string s;
      while (cur().type == Tok::kString) {
        s += cur().text;
        next();
      }
      auto e = Make(Expr::kLiteral, line);
      e->literal = Value::Str(std::move(s));
      return e;
    }
    if (t.type == Tok::kInt || t.type == Tok::kFloat) {
      auto e = Make(Expr::kLiteral, line);
      e->literal = t.type == Tok::kInt ? Value::Int(t.i) : Value::Float(t.d);
      next();
      return e;
    }
    if (SkipOp("(")) {
      ExprPtr e = ParseTuple(true, true, {});
      ExpectOp(")");
      return e;
    }
    if (SkipOp("[")) {
      auto e = Make(Expr::kList, line);
      while (!IsOp("]")) {
        if (!e->args.empty()) ExpectOp(",");
        if (IsOp("]")) break;
        e->args.push_back(ParseExpression());
      }
      next();
      return e;
    }
    if (SkipOp("{")) {
      auto e = Make(Expr::kDict, line);
      while (!IsOp("}")) {
        if (!e->args.empty()) ExpectOp(",");
        if (IsOp("}")) break;
        e->args.push_back(ParseExpression());
        ExpectOp(":");
        e->args.push_back(ParseExpression());
      }
      next();
      return e;
    }
    Fail("unexpected " + Describe(t) + At(line));
  }

  ExprPtr ParsePostfix(ExprPtr node) {
    ChainGuard chain(this);
    for (;; chain.Step()) {
      if (IsOp(".") || IsOp("[")) {
        node = ParseSubscript(std::move(node));
      } else if (IsOp("(")) {
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr ParseFilterExpr(ExprPtr node) {
    ChainGuard chain(this);
    for (;; chain.Step()) {
      if (IsOp("|")) {
        node = ParseFilterChain(std::move(node));
      } else if (IsName("is")) {
        node = ParseTest(std::move(node));
      } else if (IsOp("(")) {
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr ParseSubscript(ExprPtr node) {
    DepthGuard guard(this);
    const int line = cur().line;
    if (SkipOp(".")) {
      if (cur().type == Tok::kName) {
        auto e = Make(Expr::kGetAttr, line);
        e->name = cur().text;
        e->args.push_back(std::move(node));
        next();
        return e;
      }
      if (cur().type == Tok::kInt) {
        auto e = Make(Expr::kGetItem, line);
        e->args.push_back(std::move(node));
        auto idx = Make(Expr::kLiteral, line);
        idx->literal = Value::Int(cur().i);
        e->args.push_back(std::move(idx));
        next();
        return e;
      }
      Unexpected("name or number");
    }
    ExpectOp("[");
    std::vector<ExprPtr> parts;
    while (!IsOp("]")) {
      if (!parts.empty()) ExpectOp(",");
      if (IsOp("]")) break;
      parts.push_back(ParseSubscribed());
    }
    next();
    if (parts.empty()) Fail("expected subscript expression" + At(line));
    ExprPtr index;
    if (parts.size() == 1) {
      index = std::move(parts[0]);
    } else {
      index = Make(Expr::kTuple, line);
      index->args = std::move(parts);
    }
    if (index->type == Expr::kSlice) {
      index->args.insert(index->args.begin(), std::move(node));
      return index;
    }
    auto e = Make(Expr::kGetItem, line);
    e->args.push_back(std::move(node));
    e->args.push_back(std::move(index));
    return e;
  }

  // An index or a slice (a kSlice whose args are start, stop, step; the
  // subject is inserted by the caller).
  ExprPtr ParseSubscribed() {
    const int line = cur().line;
    std::vector<ExprPtr> args;
    if (SkipOp(":")) {
      args.push_back(nullptr);
    } else {
      ExprPtr node = ParseExpression();
      if (!SkipOp(":")) return node;
      args.push_back(std::move(node));
    }
    if (IsOp(":") || IsOp("]") || IsOp(",")) {
      args.push_back(nullptr);
    } else {
      args.push_back(ParseExpression());
    }
    if (SkipOp(":")) {
      args.push_back(IsOp("]") || IsOp(",") ? nullptr : ParseExpression());
    } else {
      args.push_back(nullptr);
    }
    auto e = Make(Expr::kSlice, line);
    e->args = std::move(args);
    return e;
  }

  void ParseArgs(Expr* e) {
    ExpectOp("(");
    bool first = true;
    while (!IsOp(")")) {
      if (!first) ExpectOp(",");
      first = false;
      if (IsOp(")")) break;
      if (IsOp("*") || IsOp("**")) FailUnsupported("*args and **kwargs in calls" + At(cur().line));
      if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == "=") {
        std::string key = cur().text;
        next();
        next();
        e->kwargs.emplace_back(std::move(key), ParseExpression());
      } else {
        if (!e->kwargs.empty()) Fail("invalid syntax for function call expression" + At(cur().line));
        e->args.push_back(ParseExpression());
      }
    }
    next();
  }

  ExprPtr ParseCall(ExprPtr node) {
    DepthGuard guard(this);
    auto e = Make(Expr::kCall, cur().line);
    e->args.push_back(std::move(node));
    ParseArgs(e.get());
    return e;
  }

  std::string DottedName() {
    std::string name = ExpectName();
    while (IsOp(".") && peek().type == Tok::kName) {
      next();
      name += "." + cur().text;
      next();
    }
    return name;
  }

  // One or more |filter(args) applied to node (null for filter blocks).
  ExprPtr ParseFilterChain(ExprPtr node, bool leading_pipe = true) {
    DepthGuard guard(this);
    ChainGuard chain(this);
    bool first = true;
    while (first ? (!leading_pipe || IsOp("|")) : IsOp("|")) {
      chain.Step();
      if (leading_pipe || !first) ExpectOp("|");
      first = false;
      const int line = cur().line;
      auto e = Make(Expr::kFilter, line);
      e->name = DottedName();
      e->args.push_back(std::move(node));
      if (IsOp("(")) ParseArgs(e.get());
      node = std::move(e);
    }
    return node;
  }

  ExprPtr ParseTest(ExprPtr node) {
    DepthGuard guard(this);
    const int line = cur().line;
    next();  // is
    auto e = Make(Expr::kTest, line);
    e->negated = SkipName("not");
    e->name = DottedName();
    e->args.push_back(std::move(node));
    if (IsOp("(")) {
      ParseArgs(e.get());
    } else if ((cur().type == Tok::kName || cur().type == Tok::kString || cur().type == Tok::kInt ||
                cur().type == Tok::kFloat || IsOp("(") || IsOp("[") || IsOp("{")) &&
               !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) Fail("You cannot chain multiple tests with is" + At(line));
      e->args.push_back(ParsePostfix(ParsePrimary()));
    }
    return e;
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  ParseLimits limits_;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<std::array<bool, 3>> function_uses_;  // caller, varargs, kwargs per open macro/call body
  friend struct DepthGuard;
  friend struct ChainGuard;
};

// jinja2 rejects unknown filters and tests when it compiles the template,
// except inside an if statement or an inline if (a "soft" frame), where the
// error waits until the filter runs. Loops, macros and blocks start anew.
void CheckNames(const Expr* e, bool soft) {
  if (!e) return;
  if (!soft && e->type == Expr::kFilter && !IsJinjaFilterName(e->name)) {
    Fail("No filter named '" + e->name + "'." + At(e->line));
  }
  if (!soft && e->type == Expr::kTest && !IsJinjaTestName(e->name)) {
    Fail("No test named '" + e->name + "'." + At(e->line));
  }
  const bool inner_soft = soft || e->type == Expr::kCondExpr;
  for (const auto& a : e->args) CheckNames(a.get(), inner_soft);
  for (const auto& kv : e->kwargs) CheckNames(kv.second.get(), inner_soft);
}

void CheckNames(const NodeList& nodes, bool soft) {
  for (const auto& n : nodes) {
    switch (n->type) {
      case Node::kIf:
        CheckNames(n->expr.get(), true);
        CheckNames(n->body, true);
        CheckNames(n->else_body, true);
        break;
      case Node::kFor:
        CheckNames(n->expr.get(), soft);
        CheckNames(n->filter.get(), false);
        CheckNames(n->body, false);
        CheckNames(n->else_body, soft);
        break;
      case Node::kMacro:
      case Node::kCallBlock:
        for (const auto& v : n->values) CheckNames(v.get(), false);
        CheckNames(n->expr.get(), soft);
        CheckNames(n->body, false);
        break;
      case Node::kSetBlock:
      case Node::kFilterBlock:
      case Node::kWith:
        for (const auto& v : n->values) CheckNames(v.get(), soft);
        CheckNames(n->filter.get(), false);
        CheckNames(n->body, false);
        break;
      default:
        CheckNames(n->expr.get(), soft);
        CheckNames(n->body, soft);
        break;
    }
  }
}

}  // namespace

bool IsJinjaFilterName(std::string_view name) {
  for (const char* f : kFilterNames) {
    if (name == f) return true;
  }
  return false;
}

bool IsJinjaTestName(std::string_view name) {
  for (const char* t : kTestNames) {
    if (name == t) return true;
  }
  return false;
}

NodeList ParseTemplate(std::string_view source, const ParseLimits& limits) {
  const size_t bad = FindInvalidUtf8(source);
  if (bad != std::string_view::npos) Fail("template is not valid UTF-8 at byte " + std::to_string(bad));
  Parser parser(Lexer(source).Run(), limits);
  NodeList nodes = parser.Run();
  CheckNames(nodes, false);
  return nodes;
}

}  // namespace kvedge::jinja
