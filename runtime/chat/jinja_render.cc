// The Jinja interpreter: evaluates the syntax tree of jinja_parser.h with
// jinja2's scoping, Undefined and sandbox rules, its builtin filters and
// tests, and the str/dict/list methods templates call.
#include "runtime/chat/jinja_render.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <new>

namespace kvedge::jinja {

// The interpreter state of one Render call.
class Interpreter {
 public:
  Interpreter(const DictData& globals, const RenderOptions& options) : globals_(globals), options_(options) {
    frames_.push_back(Frame{{}, -1, 0});
  }

  enum class Flow { kNormal, kBreak, kContinue };

  void RunTemplate(const NodeList& nodes, std::string* out) { ExecList(nodes, out); }

  // ---- accounting ----
  void Step() {
    if (++steps_ > options_.limits.max_steps) {
      FailExhausted("template exceeded " + std::to_string(options_.limits.max_steps) + " evaluation steps");
    }
  }
  void Charge(size_t bytes) {
    work_ += bytes;
    if (work_ > options_.limits.max_work_bytes) {
      FailExhausted("template built more than " + std::to_string(options_.limits.max_work_bytes) +
                    " bytes of strings and lists");
    }
  }
  void CheckSize(size_t bytes) {
    if (bytes > options_.limits.max_output_bytes) {
      FailExhausted("template output or a string in it exceeds " + std::to_string(options_.limits.max_output_bytes) +
                    " bytes");
    }
  }
  Value MakeStr(std::string s) {
    CheckSize(s.size());
    Charge(s.size());
    return Value::Str(std::move(s));
  }
  Value MakeList(std::vector<Value> items, Kind kind = Kind::kList) {
    CheckSize(items.size() * 16);
    Charge(items.size() * 16);
    return Value::List(std::move(items), kind);
  }
  void Append(std::string* out, std::string_view s) {
    CheckSize(out->size() + s.size());
    Charge(s.size());
    out->append(s);
  }

  struct DepthGuard {
    explicit DepthGuard(Interpreter* in) : in(in) {
      if (++in->depth_ > in->options_.limits.max_eval_depth) {
        FailExhausted("template evaluation nested deeper than " + std::to_string(in->options_.limits.max_eval_depth));
      }
    }
    ~DepthGuard() { --in->depth_; }
    Interpreter* in;
  };

  // ---- scopes ----
  struct Frame {
    std::vector<std::pair<std::string, Value>> vars;
    int parent;   // frame where lookup continues; -1: the globals
    uint64_t id;  // unique over the render: tells a live frame from a reused slot
  };
  int PushFrame(int parent) {
    if (frames_.size() > 4096) FailExhausted("too many nested scopes");
    frames_.push_back(Frame{{}, parent, ++frame_ids_});
    return static_cast<int>(frames_.size()) - 1;
  }
  void PopFrame() { frames_.pop_back(); }
  int Top() const { return static_cast<int>(frames_.size()) - 1; }
  void Assign(const std::string& name, Value v) {
    auto& vars = frames_.back().vars;
    for (auto& kv : vars) {
      if (kv.first == name) {
        kv.second = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
  Value Lookup(const std::string& name) const {
    for (int f = Top(); f >= 0; f = frames_[f].parent) {
      for (const auto& kv : frames_[f].vars) {
        if (kv.first == name) return kv.second;
      }
    }
    if (const Value* v = globals_.Find(name)) return *v;
    if (const Value* v = Builtins().Find(name)) return *v;
    return Value::Undefined("'" + name + "' is undefined");
  }

  // ---- statements ----
  Flow ExecList(const NodeList& nodes, std::string* out) {
    for (const auto& n : nodes) {
      const Flow f = Exec(*n, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  std::string RenderBody(const NodeList& nodes) {
    std::string s;
    ExecList(nodes, &s);
    return s;
  }

  void AssignTargets(const Node& n, const Value& v) {
    if (!n.tuple_target) {
      Assign(n.targets[0], v);
      return;
    }
    std::vector<Value> items = Iterate(v);
    if (items.size() != n.targets.size()) {
      Fail(std::string(items.size() > n.targets.size() ? "too many" : "not enough") + " values to unpack (expected " +
           std::to_string(n.targets.size()) + ", got " + std::to_string(items.size()) + ")" + Line(n.line));
    }
    for (size_t i = 0; i < items.size(); ++i) Assign(n.targets[i], items[i]);
  }

  static std::string Line(int line) { return " (line " + std::to_string(line) + ")"; }

  Flow Exec(const Node& n, std::string* out) {
    Step();
    DepthGuard guard(this);
    switch (n.type) {
      case Node::kData:
        Append(out, n.text);
        return Flow::kNormal;
      case Node::kOutput: {
        const_output_ = IsConstant(*n.expr);
        const Value v = Eval(*n.expr);
        const_output_ = false;
        Append(out, ToOutput(v));
        return Flow::kNormal;
      }
      case Node::kIf:
        return Eval(*n.expr).Truthy() ? ExecList(n.body, out) : ExecList(n.else_body, out);
      case Node::kFor:
        return ExecFor(n, out);
      case Node::kSet: {
        Value v = Eval(*n.expr);
        if (!n.attr.empty()) {
          const Value ns = Lookup(n.targets[0]);
          if (ns.kind() != Kind::kObject || !ns.object().is_namespace) {
            Fail("cannot assign attribute on non-namespace object" + Line(n.line));
          }
          ns.object().Set(n.attr, std::move(v));
        } else {
          AssignTargets(n, v);
        }
        return Flow::kNormal;
      }
      case Node::kSetBlock: {
        Value v = MakeStr(RenderBody(n.body));
        if (n.filter) v = EvalFilterChain(*n.filter, v);
        Assign(n.targets[0], std::move(v));
        return Flow::kNormal;
      }
      case Node::kMacro: {
        Assign(n.text, MakeMacro(&n));
        return Flow::kNormal;
      }
      case Node::kCallBlock: {
        const Expr& call = *n.expr;
        const Value callee = Eval(*call.args[0]);
        CallArgs args = EvalArgs(call);
        const int scope = Top();
        const Node* body = &n;
        args.keyword.emplace_back("caller", Value::Function("caller", [this, body, scope](Interpreter&, CallArgs& a) {
                                    return CallMacroBody(*body, a, scope, Value());
                                  }));
        Append(out, ToOutput(CallValue(callee, args, call.line)));
        return Flow::kNormal;
      }
      case Node::kFilterBlock: {
        const Value v = EvalFilterChain(*n.filter, MakeStr(RenderBody(n.body)));
        Append(out, ToOutput(v));
        return Flow::kNormal;
      }
      case Node::kWith: {
        std::vector<Value> values;
        for (const auto& e : n.values) values.push_back(Eval(*e));
        PushFrame(Top());
        for (size_t i = 0; i < values.size(); ++i) Assign(n.targets[i], values[i]);
        const Flow f = ExecList(n.body, out);
        PopFrame();
        return f;
      }
      case Node::kBreak:
        return Flow::kBreak;
      case Node::kContinue:
        return Flow::kContinue;
      case Node::kScope:
        return ExecList(n.body, out);
    }
    return Flow::kNormal;
  }

  std::string ToOutput(const Value& v) { return v.Str(); }

  Flow ExecFor(const Node& n, std::string* out) {
    const Value seq = Eval(*n.expr);
    std::vector<Value> items = Iterate(seq);
    if (n.filter) {
      std::vector<Value> kept;
      PushFrame(Top());
      for (auto& item : items) {
        Step();
        AssignTargets(n, item);
        if (Eval(*n.filter).Truthy()) kept.push_back(std::move(item));
      }
      PopFrame();
      items = std::move(kept);
    }
    const int64_t count = static_cast<int64_t>(items.size());
    // loop.cycle() and loop.changed() are built once per loop and read the
    // current index through shared state.
    auto index = std::make_shared<int64_t>(0);
    auto last_changed = std::make_shared<std::optional<Value>>();
    Value cycle, changed;
    if (n.uses_loop) {
      cycle = Value::Function("cycle", [index](Interpreter&, CallArgs& a) {
        if (a.positional.empty()) Fail("no items for cycling given");
        return a.positional[static_cast<size_t>(*index) % a.positional.size()];
      });
      changed = Value::Function("changed", [last_changed](Interpreter&, CallArgs& a) {
        const Value v = Value::List(a.positional, Kind::kTuple);
        if (last_changed->has_value() && Equals(**last_changed, v)) return Value::Bool(false);
        *last_changed = v;
        return Value::Bool(true);
      });
    }
    Flow result = Flow::kNormal;
    for (int64_t i = 0; i < count; ++i) {
      Step();
      PushFrame(Top());
      *index = i;
      if (n.uses_loop) {
        auto loop = std::make_shared<ObjectData>();
        loop->attrs.reserve(13);
        loop->Set("index", Value::Int(i + 1));
        loop->Set("index0", Value::Int(i));
        loop->Set("revindex", Value::Int(count - i));
        loop->Set("revindex0", Value::Int(count - i - 1));
        loop->Set("first", Value::Bool(i == 0));
        loop->Set("last", Value::Bool(i == count - 1));
        loop->Set("length", Value::Int(count));
        loop->Set("depth", Value::Int(1));
        loop->Set("depth0", Value::Int(0));
        loop->Set("previtem", i > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
        loop->Set("nextitem", i + 1 < count ? items[i + 1] : Value::Undefined("there is no next item"));
        loop->Set("cycle", cycle);
        loop->Set("changed", changed);
        Assign("loop", Value::Object(std::move(loop)));
      }
      AssignTargets(n, items[i]);
      const Flow f = ExecList(n.body, out);
      PopFrame();
      if (f == Flow::kBreak) break;
    }
    if (count == 0) result = ExecList(n.else_body, out);
    return result;
  }

  // ---- macros ----
  // A macro sees the scope it was defined in while that scope lives (a macro
  // defined in a loop body sees the loop variable), else the top level.
  Value MakeMacro(const Node* macro) {
    const int def_scope = Top();
    const uint64_t def_id = frames_.back().id;
    return Value::Function(macro->text, [this, macro, def_scope, def_id](Interpreter&, CallArgs& a) {
      const int scope = def_scope < static_cast<int>(frames_.size()) && frames_[def_scope].id == def_id ? def_scope : 0;
      Value caller;
      for (auto it = a.keyword.begin(); it != a.keyword.end(); ++it) {
        if (it->first == "caller") {
          caller = it->second;
          a.keyword.erase(it);
          break;
        }
      }
      return CallMacroBody(*macro, a, scope, caller);
    });
  }

  // Runs a macro or {% call %} body with its parameters bound in a new scope
  // whose lookups continue at `scope`.
  Value CallMacroBody(const Node& fn, CallArgs& a, int scope, const Value& caller) {
    if (++call_depth_ > options_.limits.max_call_depth) {
      FailExhausted("macro calls nested deeper than " + std::to_string(options_.limits.max_call_depth));
    }
    const std::string name = fn.type == Node::kMacro ? "macro '" + fn.text + "'" : "caller";
    const size_t nparams = fn.targets.size();
    std::vector<Value> bound(nparams);
    std::vector<bool> given(nparams, false);
    for (size_t i = 0; i < a.positional.size() && i < nparams; ++i) {
      bound[i] = a.positional[i];
      given[i] = true;
    }
    std::vector<Value> varargs;
    for (size_t i = nparams; i < a.positional.size(); ++i) varargs.push_back(a.positional[i]);
    if (!varargs.empty() && !fn.uses_varargs) {
      Fail(name + " takes not more than " + std::to_string(nparams) + " argument(s)");
    }
    auto kwargs = std::make_shared<DictData>();
    for (auto& [k, v] : a.keyword) {
      size_t i = 0;
      while (i < nparams && fn.targets[i] != k) ++i;
      if (i < nparams) {
        if (given[i]) Fail(name + " got multiple values for argument '" + k + "'");
        bound[i] = v;
        given[i] = true;
      } else if (fn.uses_kwargs) {
        kwargs->Set(Value::Str(k), v);
      } else {
        Fail(name + " takes no keyword argument '" + k + "'");
      }
    }
    PushFrame(scope);
    for (size_t i = 0; i < nparams; ++i) {
      if (!given[i]) {
        bound[i] =
            fn.values[i] ? Eval(*fn.values[i]) : Value::Undefined("parameter '" + fn.targets[i] + "' was not provided");
      }
      Assign(fn.targets[i], bound[i]);
    }
    if (fn.uses_varargs) Assign("varargs", Value::List(std::move(varargs), Kind::kTuple));
    if (fn.uses_kwargs) Assign("kwargs", Value::Dict(kwargs));
    if (!caller.is_undefined()) Assign("caller", caller);
    std::string out;
    ExecList(fn.body, &out);
    PopFrame();
    --call_depth_;
    return MakeStr(std::move(out));
  }

  // ---- expressions ----
  CallArgs EvalArgs(const Expr& e, size_t first = 1) {
    CallArgs a;
    for (size_t i = first; i < e.args.size(); ++i) a.positional.push_back(Eval(*e.args[i]));
    for (const auto& [k, v] : e.kwargs) a.keyword.emplace_back(k, Eval(*v));
    return a;
  }

  Value CallValue(const Value& callee, CallArgs& args, int line) {
    if (callee.is_undefined()) Fail(UndefinedMessage(callee) + Line(line));
    if (callee.kind() != Kind::kCallable)
      Fail(std::string("'") + callee.TypeName() + "' object is not callable" + Line(line));
    DepthGuard guard(this);
    return callee.callable().fn(*this, args);
  }

  static std::string UndefinedMessage(const Value& v) {
    return v.string().empty() ? std::string("value is undefined") : v.string();
  }

  Value Eval(const Expr& e) {
    Step();
    DepthGuard guard(this);
    switch (e.type) {
      case Expr::kLiteral:
        return e.literal;
      case Expr::kName:
        return Lookup(e.name);
      case Expr::kList:
      case Expr::kTuple: {
        std::vector<Value> items;
        for (const auto& a : e.args) items.push_back(Eval(*a));
        return MakeList(std::move(items), e.type == Expr::kList ? Kind::kList : Kind::kTuple);
      }
      case Expr::kDict: {
        auto d = std::make_shared<DictData>();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = Eval(*e.args[i]);
          CheckHashable(k, e.line);
          d->Set(std::move(k), Eval(*e.args[i + 1]));
        }
        Charge(d->entries.size() * 32);
        return Value::Dict(std::move(d));
      }
      case Expr::kGetAttr:
        return GetAttr(Eval(*e.args[0]), e.name, e.line);
      case Expr::kGetItem:
        return GetItem(Eval(*e.args[0]), Eval(*e.args[1]), e.line);
      case Expr::kSlice:
        return EvalSlice(e);
      case Expr::kCall: {
        const Value callee = Eval(*e.args[0]);
        CallArgs args = EvalArgs(e);
        return CallValue(callee, args, e.line);
      }
      case Expr::kFilter:
        return EvalFilterChain(e, Value());
      case Expr::kTest: {
        const Value subject = Eval(*e.args[0]);
        CallArgs args = EvalArgs(e);
        const bool r = ApplyTest(e.name, subject, args, e.line);
        return Value::Bool(e.negated ? !r : r);
      }
      case Expr::kUnary: {
        const Value v = Eval(*e.args[0]);
        if (v.is_undefined()) Fail(UndefinedMessage(v) + Line(e.line));
        if (!v.is_number())
          Fail(std::string("bad operand type for unary ") + e.name + ": '" + v.TypeName() + "'" + Line(e.line));
        if (e.name == "+") return v.kind() == Kind::kBool ? Value::Int(v.integer()) : v;
        if (v.kind() == Kind::kFloat) return Value::Float(-v.number());
        if (v.integer() == INT64_MIN) FailUnsupported("integer overflow" + Line(e.line));
        return Value::Int(-v.integer());
      }
      case Expr::kBinary:
        return BinaryOp(e.name, Eval(*e.args[0]), Eval(*e.args[1]), e.line);
      case Expr::kConcat: {
        std::string s;
        for (const auto& a : e.args) {
          s += Eval(*a).Str();
          CheckSize(s.size());
        }
        return MakeStr(std::move(s));
      }
      case Expr::kAnd: {
        Value a = Eval(*e.args[0]);
        return a.Truthy() ? Eval(*e.args[1]) : a;
      }
      case Expr::kOr: {
        Value a = Eval(*e.args[0]);
        return a.Truthy() ? a : Eval(*e.args[1]);
      }
      case Expr::kNot:
        return Value::Bool(!Eval(*e.args[0]).Truthy());
      case Expr::kCompare: {
        Value left = Eval(*e.args[0]);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = Eval(*e.args[i + 1]);
          if (!Compare(e.ops[i], left, right, e.line)) return Value::Bool(false);
          left = std::move(right);
        }
        return Value::Bool(true);
      }
      case Expr::kCondExpr:
        if (Eval(*e.args[0]).Truthy()) return Eval(*e.args[1]);
        if (e.args[2]) return Eval(*e.args[2]);
        return Value::Undefined("the inline if-expression on line " + std::to_string(e.line) +
                                " evaluated to false and no else section was defined.");
    }
    return Value();
  }

  static void CheckHashable(const Value& k, int line) {
    if (k.kind() == Kind::kList || k.kind() == Kind::kDict || k.kind() == Kind::kObject) {
      Fail(std::string("unhashable type: '") + k.TypeName() + "'" + Line(line));
    }
  }

  bool Compare(const std::string& op, const Value& a, const Value& b, int line) {
    if (op == "==") return Equals(a, b);
    if (op == "!=") return !Equals(a, b);
    if (op == "in") return Contains(b, a, line);
    if (op == "notin") return !Contains(b, a, line);
    if (a.is_undefined()) Fail(UndefinedMessage(a) + Line(line));
    if (b.is_undefined()) Fail(UndefinedMessage(b) + Line(line));
    try {
      if (op == "<") return Less(a, b);
      if (op == ">") return Less(b, a);
      if (op == "<=") return Less(a, b) || Equals(a, b);
      if (op == ">=") return Less(b, a) || Equals(a, b);
    } catch (Error& err) {
      err.message = "'" + op + "'" + err.message.substr(err.message.find(' ')) + Line(line);
      throw;
    }
    return false;
  }

  bool Contains(const Value& container, const Value& item, int line) {
    switch (container.kind()) {
      case Kind::kUndefined:
        return false;
      case Kind::kString:
        if (!item.is_string()) {
          Fail(std::string("'in <string>' requires string as left operand, not ") + item.TypeName() + Line(line));
        }
        return container.string().find(item.string()) != std::string::npos;
      case Kind::kList:
      case Kind::kTuple:
      case Kind::kIterator:
        for (const auto& v : container.items()) {
          if (Equals(v, item)) return true;
        }
        return false;
      case Kind::kDict:
        return container.dict().Find(item) != nullptr;
      default:
        Fail(std::string("argument of type '") + container.TypeName() + "' is not iterable" + Line(line));
    }
  }

  static int64_t CheckedInt(bool overflow, int64_t v, int line) {
    if (overflow) FailUnsupported("integer overflow (kvedge integers are 64-bit)" + Line(line));
    return v;
  }

  Value BinaryOp(const std::string& op, const Value& a, const Value& b, int line) {
    if (a.is_undefined()) Fail(UndefinedMessage(a) + Line(line));
    if (b.is_undefined()) Fail(UndefinedMessage(b) + Line(line));
    const bool nums = a.is_number() && b.is_number();
    const bool ints = nums && a.kind() != Kind::kFloat && b.kind() != Kind::kFloat;
    auto bad = [&]() -> Value {
      Fail("unsupported operand type(s) for " + op + ": '" + a.TypeName() + "' and '" + b.TypeName() + "'" +
           Line(line));
    };
    if (op == "+") {
      if (ints) {
        int64_t r = 0;
        const bool overflow = __builtin_add_overflow(a.integer(), b.integer(), &r);
        return Value::Int(CheckedInt(overflow, r, line));
      }
      if (nums) return Value::Float(a.number() + b.number());
      if (a.is_string() && b.is_string()) {
        CheckSize(a.string().size() + b.string().size());
        return MakeStr(a.string() + b.string());
      }
      if ((a.kind() == Kind::kList || a.kind() == Kind::kTuple) && a.kind() == b.kind()) {
        std::vector<Value> items = a.items();
        items.insert(items.end(), b.items().begin(), b.items().end());
        return MakeList(std::move(items), a.kind());
      }
      if (a.is_string())
        Fail(std::string("can only concatenate str (not \"") + b.TypeName() + "\") to str" + Line(line));
      return bad();
    }
    if (op == "-") {
      if (ints) {
        int64_t r = 0;
        const bool overflow = __builtin_sub_overflow(a.integer(), b.integer(), &r);
        return Value::Int(CheckedInt(overflow, r, line));
      }
      if (nums) return Value::Float(a.number() - b.number());
      return bad();
    }
    if (op == "*") {
      if (ints) {
        int64_t r = 0;
        const bool overflow = __builtin_mul_overflow(a.integer(), b.integer(), &r);
        return Value::Int(CheckedInt(overflow, r, line));
      }
      if (nums) return Value::Float(a.number() * b.number());
      const Value* seq = nullptr;
      const Value* count = nullptr;
      if ((a.is_string() || a.kind() == Kind::kList || a.kind() == Kind::kTuple) && b.is_number() &&
          b.kind() != Kind::kFloat) {
        seq = &a;
        count = &b;
      } else if ((b.is_string() || b.kind() == Kind::kList || b.kind() == Kind::kTuple) && a.is_number() &&
                 a.kind() != Kind::kFloat) {
        seq = &b;
        count = &a;
      }
      if (!seq) return bad();
      const int64_t n = std::max<int64_t>(0, count->integer());
      if (seq->is_string()) {
        const size_t len = seq->string().size();
        if (len && static_cast<uint64_t>(n) > options_.limits.max_output_bytes / len + 1) CheckSize(SIZE_MAX);
        CheckSize(len * n);
        std::string s;
        s.reserve(len * n);
        for (int64_t i = 0; i < n; ++i) s += seq->string();
        return MakeStr(std::move(s));
      }
      const size_t len = seq->items().size();
      if (len && static_cast<uint64_t>(n) > options_.limits.max_output_bytes / (16 * len) + 1) CheckSize(SIZE_MAX);
      CheckSize(len * n * 16);
      std::vector<Value> items;
      for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq->items().begin(), seq->items().end());
      return MakeList(std::move(items), seq->kind());
    }
    if (op == "/") {
      if (!nums) return bad();
      if (b.number() == 0) Fail("division by zero" + Line(line));
      return Value::Float(a.number() / b.number());
    }
    if (op == "//") {
      if (!nums) return bad();
      if (b.number() == 0) Fail("integer division or modulo by zero" + Line(line));
      if (ints) {
        const int64_t x = a.integer(), y = b.integer();
        if (x == INT64_MIN && y == -1) FailUnsupported("integer overflow" + Line(line));
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return Value::Int(q);
      }
      return Value::Float(std::floor(a.number() / b.number()));
    }
    if (op == "%") {
      if (a.is_string()) return MakeStr(PercentFormat(a.string(), b, line));
      if (!nums) return bad();
      if (b.number() == 0) Fail("integer division or modulo by zero" + Line(line));
      if (ints) {
        const int64_t x = a.integer(), y = b.integer();
        if (y == -1) return Value::Int(0);
        int64_t r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return Value::Int(r);
      }
      double r = std::fmod(a.number(), b.number());
      if (r != 0 && ((r < 0) != (b.number() < 0))) r += b.number();
      return Value::Float(r);
    }
    if (op == "**") {
      if (!nums) return bad();
      if (ints && b.integer() >= 0) {
        int64_t result = 1, base = a.integer(), exp = b.integer();
        while (exp > 0) {
          if (exp & 1) CheckedInt(__builtin_mul_overflow(result, base, &result), 0, line);
          exp >>= 1;
          if (exp > 0) CheckedInt(__builtin_mul_overflow(base, base, &base), 0, line);
        }
        return Value::Int(result);
      }
      if (a.number() == 0 && b.number() < 0) Fail("0.0 cannot be raised to a negative power" + Line(line));
      return Value::Float(std::pow(a.number(), b.number()));
    }
    return bad();
  }

  // Python's printf-style str % args for %s %r %d %i %f %%.
  std::string PercentFormat(const std::string& fmt, const Value& args, int line) {
    std::vector<Value> list;
    if (args.kind() == Kind::kTuple) {
      list = args.items();
    } else {
      list.push_back(args);
    }
    std::string out;
    size_t next = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
      if (fmt[i] != '%') {
        out += fmt[i];
        continue;
      }
      if (++i >= fmt.size()) Fail("incomplete format" + Line(line));
      const char c = fmt[i];
      if (c == '%') {
        out += '%';
        continue;
      }
      if (next >= list.size()) Fail("not enough arguments for format string" + Line(line));
      const Value& v = list[next++];
      if (c == 's') {
        out += v.Str();
      } else if (c == 'r') {
        out += v.Repr();
      } else if (c == 'd' || c == 'i') {
        if (!v.is_number()) Fail(std::string("%d format: a real number is required, not ") + v.TypeName() + Line(line));
        out += std::to_string(v.kind() == Kind::kFloat ? static_cast<int64_t>(v.number()) : v.integer());
      } else if (c == 'f') {
        if (!v.is_number()) Fail(std::string("must be real number, not ") + v.TypeName() + Line(line));
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%f", v.number());
        out += buf;
      } else {
        FailUnsupported(std::string("the %") + c + " format" + Line(line));
      }
      CheckSize(out.size());
    }
    if (next < list.size() && args.kind() != Kind::kDict) {
      Fail("not all arguments converted during string formatting" + Line(line));
    }
    return out;
  }

  // ---- attribute and item access ----
  static bool IsStringMethod(std::string_view n) {
    static const char* const kNames[] = {
        "strip",   "lstrip",   "rstrip",     "split",   "rsplit",   "splitlines", "startswith", "endswith", "upper",
        "lower",   "title",    "capitalize", "replace", "find",     "rfind",      "count",      "join",     "format",
        "isdigit", "isalpha",  "isalnum",    "isspace", "islower",  "isupper",    "center",     "ljust",    "rjust",
        "zfill",   "swapcase", "index",      "rindex",  "casefold", "isnumeric",  "isdecimal"};
    for (const char* k : kNames) {
      if (n == k) return true;
    }
    return false;
  }

  Value GetAttr(const Value& obj, const std::string& name, int line) {
    switch (obj.kind()) {
      case Kind::kUndefined:
        Fail(UndefinedMessage(obj) + Line(line));
      case Kind::kString:
        if (IsStringMethod(name)) return BoundMethod(obj, name);
        break;
      case Kind::kDict:
        if (name == "items" || name == "keys" || name == "values" || name == "get" || name == "copy") {
          return BoundMethod(obj, name);
        }
        if (name == "pop" || name == "popitem" || name == "update" || name == "setdefault" || name == "clear") {
          return Value::Undefined("access to attribute '" + name + "' of 'dict' object is unsafe.");
        }
        if (const Value* v = obj.dict().Find(std::string_view(name))) return *v;
        break;
      case Kind::kList:
      case Kind::kTuple:
        if (name == "index" || name == "count" || (obj.kind() == Kind::kList && name == "copy")) {
          return BoundMethod(obj, name);
        }
        if (obj.kind() == Kind::kTuple && obj.items().size() == 2 && (name == "grouper" || name == "list")) {
          return obj.items()[name == "grouper" ? 0 : 1];  // groupby's (grouper, list) pairs
        }
        if (obj.kind() == Kind::kList && (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
                                          name == "remove" || name == "reverse" || name == "sort" || name == "clear")) {
          return Value::Undefined("access to attribute '" + name + "' of 'list' object is unsafe.");
        }
        break;
      case Kind::kObject:
        if (const Value* v = obj.object().Find(name)) return *v;
        break;
      default:
        break;
    }
    return Value::Undefined(NoAttribute(obj, name));
  }

  static std::string NoAttribute(const Value& obj, const std::string& name) {
    if (obj.is_none()) return "'None' has no attribute '" + name + "'";
    return std::string("'") + obj.TypeName() + " object' has no attribute '" + name + "'";
  }

  Value GetItem(const Value& obj, const Value& key, int line) {
    switch (obj.kind()) {
      case Kind::kUndefined:
        Fail(UndefinedMessage(obj) + Line(line));
      case Kind::kDict:
        if (key.kind() == Kind::kList || key.kind() == Kind::kDict) break;
        if (const Value* v = obj.dict().Find(key)) return *v;
        break;
      case Kind::kList:
      case Kind::kTuple:
      case Kind::kString:
        if (key.is_number() && key.kind() != Kind::kFloat) {
          const bool is_str = obj.is_string();
          const int64_t size =
              is_str ? static_cast<int64_t>(CodePointCount(obj.string())) : static_cast<int64_t>(obj.items().size());
          int64_t i = key.integer();
          if (i < 0) i += size;
          if (i < 0 || i >= size)
            return Value::Undefined(std::string(obj.TypeName()) + " object has no element " + key.Repr());
          if (!is_str) return obj.items()[i];
          return MakeStr(CodePointAt(obj.string(), i));
        }
        break;
      default:
        break;
    }
    if (key.is_string()) return GetAttr(obj, key.string(), line);
    return Value::Undefined(std::string(obj.TypeName()) + " object has no element " + key.Repr());
  }

  static std::string CodePointAt(const std::string& s, int64_t index) {
    size_t pos = 0;
    for (int64_t k = 0; k < index; ++k) NextCodePoint(s, &pos);
    const size_t start = pos;
    NextCodePoint(s, &pos);
    return s.substr(start, pos - start);
  }

  static int64_t SliceBound(const Value& v, int line) {
    if (!v.is_number() || v.kind() == Kind::kFloat) {
      Fail("slice indices must be integers or None" + Line(line));
    }
    return v.integer();
  }

  // Python slice semantics over n elements: the selected indices.
  static std::vector<int64_t> SliceIndices(int64_t n, const Value& start_v, const Value& stop_v, const Value& step_v,
                                           int line) {
    const int64_t step = step_v.is_none() ? 1 : SliceBound(step_v, line);
    if (step == 0) Fail("slice step cannot be zero" + Line(line));
    int64_t start, stop;
    auto clamp = [&](const Value& v, int64_t dflt, bool is_start) -> int64_t {
      if (v.is_none()) return dflt;
      int64_t i = SliceBound(v, line);
      if (i < 0) {
        i += n;
        if (i < 0) i = step < 0 ? -1 : 0;
      } else if (i >= n) {
        i = step < 0 ? n - 1 : n;
      }
      (void)is_start;
      return i;
    };
    start = clamp(start_v, step < 0 ? n - 1 : 0, true);
    stop = clamp(stop_v, step < 0 ? -1 : n, false);
    std::vector<int64_t> idx;
    if (step > 0) {
      for (int64_t i = start; i < stop; i += step) idx.push_back(i);
    } else {
      for (int64_t i = start; i > stop; i += step) idx.push_back(i);
    }
    return idx;
  }

  Value EvalSlice(const Expr& e) {
    const Value obj = Eval(*e.args[0]);
    Value parts[3];
    for (int k = 0; k < 3; ++k) parts[k] = e.args[k + 1] ? Eval(*e.args[k + 1]) : Value::None();
    // jinja2 compiles slices to Python's obj[a:b:c], bypassing its getitem:
    // anything but a sequence (and any bound but an int or None) is an error.
    if (obj.is_undefined()) Fail(UndefinedMessage(obj) + Line(e.line));
    if (obj.is_string()) {
      const std::vector<uint32_t> cps = CodePoints(obj.string());
      std::string out;
      for (const int64_t i : SliceIndices(static_cast<int64_t>(cps.size()), parts[0], parts[1], parts[2], e.line)) {
        AppendCodePoint(cps[i], &out);
      }
      return MakeStr(std::move(out));
    }
    if (obj.kind() == Kind::kList || obj.kind() == Kind::kTuple) {
      std::vector<Value> out;
      for (const int64_t i :
           SliceIndices(static_cast<int64_t>(obj.items().size()), parts[0], parts[1], parts[2], e.line)) {
        out.push_back(obj.items()[i]);
      }
      return MakeList(std::move(out), obj.kind());
    }
    // Except that jinja2 folds a {{ }} whose expression is constant at
    // compile time through its getitem, which turns the failure into
    // Undefined: {{ false[1:] }} prints ''.
    if (const_output_ && IsConstant(*e.args[0]))
      return Value::Undefined(std::string(obj.TypeName()) + " object is not subscriptable");
    Fail(std::string("'") + obj.TypeName() + "' object is not subscriptable" + Line(e.line));
  }

  // Whether jinja2's optimizer sees `e` as a constant: literals and
  // operators, filters and tests over literals only (no names, no calls).
  static bool IsConstant(const Expr& e) {
    if (e.type == Expr::kName || e.type == Expr::kCall) return false;
    for (const auto& a : e.args) {
      if (a && !IsConstant(*a)) return false;
    }
    for (const auto& kv : e.kwargs) {
      if (!IsConstant(*kv.second)) return false;
    }
    return true;
  }

  // The elements a for loop (or list()) sees.
  std::vector<Value> Iterate(const Value& v) {
    switch (v.kind()) {
      case Kind::kUndefined:
        return {};
      case Kind::kList:
      case Kind::kTuple:
      case Kind::kIterator:
        return v.items();
      case Kind::kDict: {
        std::vector<Value> keys;
        for (const auto& kv : v.dict().entries) keys.push_back(kv.first);
        return keys;
      }
      case Kind::kString: {
        std::vector<Value> chars;
        size_t pos = 0;
        const std::string& s = v.string();
        Charge(s.size() * 16);
        while (pos < s.size()) {
          const size_t start = pos;
          NextCodePoint(s, &pos);
          chars.push_back(Value::Str(s.substr(start, pos - start)));
        }
        return chars;
      }
      default:
        Fail(std::string("'") + v.TypeName() + "' object is not iterable");
    }
  }

  // ---- filters, tests, methods (below) ----
  Value EvalFilterChain(const Expr& e, const Value& block_input);
  Value ApplyFilter(const std::string& name, const Value& v, CallArgs& a, int line);
  bool ApplyTest(const std::string& name, const Value& v, CallArgs& a, int line);
  Value BoundMethod(const Value& self, const std::string& name);
  Value CallMethod(const Value& self, const std::string& name, CallArgs& a);
  Value Attribute(const Value& item, const std::string& path, int line);
  static const DictData& Builtins();
  std::string Strftime(const std::string& fmt);

  const RenderOptions& options() const { return options_; }

 private:
  const DictData& globals_;
  const RenderOptions& options_;
  std::vector<Frame> frames_;
  uint64_t steps_ = 0;
  size_t work_ = 0;
  int depth_ = 0;
  int call_depth_ = 0;
  uint64_t frame_ids_ = 0;
  bool const_output_ = false;  // evaluating a {{ }} made of literals only
};

namespace {

std::string PyStrip(const std::string& s, const Value& chars, bool left, bool right) {
  const std::vector<uint32_t> cps = CodePoints(s);
  std::vector<uint32_t> set;
  const bool custom = !chars.is_none() && !chars.is_undefined();
  if (custom) {
    if (!chars.is_string()) Fail("strip arg must be None or str");
    set = CodePoints(chars.string());
  }
  auto strip = [&](uint32_t c) {
    return custom ? std::find(set.begin(), set.end(), c) != set.end() : IsPyWhitespace(c);
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip(cps[e - 1])) --e;
  }
  return FromCodePoints(cps.data() + b, e - b);
}

std::vector<std::string> PySplit(const std::string& s, const Value& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep.is_none() || sep.is_undefined()) {
    size_t pos = 0;
    std::string cur;
    bool in_word = false;
    while (pos < s.size()) {
      const size_t start = pos;
      const uint32_t cp = NextCodePoint(s, &pos);
      if (IsPyWhitespace(cp)) {
        if (in_word) {
          out.push_back(std::move(cur));
          cur.clear();
          in_word = false;
        }
        continue;
      }
      if (!in_word && maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        // The rest, from this word on, is the last item (trailing whitespace kept).
        out.push_back(s.substr(start));
        return out;
      }
      in_word = true;
      cur.append(s, start, pos - start);
    }
    if (in_word) out.push_back(std::move(cur));
    return out;
  }
  if (!sep.is_string()) Fail(std::string("must be str or None, not ") + sep.TypeName());
  const std::string& d = sep.string();
  if (d.empty()) Fail("empty separator");
  size_t start = 0;
  for (;;) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) break;
    const size_t f = s.find(d, start);
    if (f == std::string::npos) break;
    out.push_back(s.substr(start, f - start));
    start = f + d.size();
  }
  out.push_back(s.substr(start));
  return out;
}

std::vector<std::string> PySplitLines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  size_t pos = 0, line_start = 0;
  while (pos < s.size()) {
    const size_t start = pos;
    const uint32_t cp = NextCodePoint(s, &pos);
    const bool brk = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
                     cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!brk) continue;
    size_t end = pos;
    if (cp == '\r' && pos < s.size() && s[pos] == '\n') end = ++pos;
    out.push_back(s.substr(line_start, (keepends ? end : start) - line_start));
    line_start = pos;
  }
  if (line_start < s.size()) out.push_back(s.substr(line_start));
  return out;
}

std::string PyReplace(const std::string& s, const std::string& old, const std::string& repl, int64_t count,
                      Interpreter& in) {
  std::string out;
  if (old.empty()) {
    // Python inserts repl between every code point (and at both ends).
    size_t pos = 0;
    int64_t n = 0;
    while (count < 0 || n < count) {
      out += repl;
      ++n;
      if (pos >= s.size()) break;
      const size_t start = pos;
      NextCodePoint(s, &pos);
      out.append(s, start, pos - start);
      in.CheckSize(out.size());
    }
    out.append(s, pos, std::string::npos);
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  for (;;) {
    if (count >= 0 && n >= count) break;
    const size_t f = s.find(old, start);
    if (f == std::string::npos) break;
    out.append(s, start, f - start);
    out += repl;
    in.CheckSize(out.size());
    start = f + old.size();
    ++n;
  }
  out.append(s, start, std::string::npos);
  return out;
}

// Re-cases `s` a code point at a time: one that starts a word goes through
// `first`, the others are lowered. starts_word(prev) is given the previous
// code point, or -1 at the start.
template <typename StartsWord>
std::string RecaseWords(const std::string& s, void (*first)(uint32_t, std::string*), StartsWord starts_word) {
  std::string out;
  size_t pos = 0;
  int64_t prev = -1;
  while (pos < s.size()) {
    const uint32_t cp = NextCodePoint(s, &pos);
    if (starts_word(prev)) {
      first(cp, &out);
    } else {
      AppendLower(cp, &out);
    }
    prev = cp;
  }
  return out;
}

// Python str.title(): a cased character after an uncased one starts a word.
std::string PyTitle(const std::string& s) {
  return RecaseWords(s, AppendTitle, [](int64_t prev) { return prev < 0 || !IsCased(static_cast<uint32_t>(prev)); });
}

std::string PyCapitalize(const std::string& s) {
  return RecaseWords(s, AppendTitle, [](int64_t prev) { return prev < 0; });
}

// jinja2's title filter: words begin after -, whitespace, (, {, [ or < (the
// separators themselves have no case), with the first letter upper-cased.
std::string JinjaTitle(const std::string& s) {
  return RecaseWords(s, AppendUpper, [](int64_t prev) {
    return prev < 0 || prev == '-' || prev == '(' || prev == '{' || prev == '[' || prev == '<' ||
           IsPyWhitespace(static_cast<uint32_t>(prev));
  });
}

// Python str.islower() (lower) / str.isupper(): some cased character, and
// none of the other case.
bool PyIsCase(const std::string& s, bool lower) {
  bool any_cased = false;
  size_t pos = 0;
  while (pos < s.size()) {
    const uint32_t c = NextCodePoint(s, &pos);
    if (!IsCased(c)) continue;
    any_cased = true;
    if (lower ? ToLower(c) != c : ToUpper(c) != c) return false;
  }
  return any_cased;
}

std::string PyPad(const std::string& s, int64_t width, const std::string& fill, char mode) {
  const int64_t len = static_cast<int64_t>(CodePointCount(s));
  if (width <= len) return s;
  width = std::min<int64_t>(width, 1 << 24);
  const int64_t total = width - len;
  int64_t left = 0;
  if (mode == 'c') {
    left = total / 2 + (total & width & 1);
  } else if (mode == 'r') {
    left = total;
  }
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return out;
}

int64_t IntArg(const Value& v, int64_t dflt, const char* what) {
  if (v.is_undefined() || v.is_none()) return dflt;
  if (!v.is_number() || v.kind() == Kind::kFloat)
    Fail(std::string(what) + ": an integer is required, not " + v.TypeName());
  return v.integer();
}

std::string StrArg(const Value& v, const char* what) {
  if (!v.is_string()) Fail(std::string(what) + ": expected a string, not " + v.TypeName());
  return v.string();
}

// Python str.format with {} / {0} / {name} fields, no format specs.
std::string PyFormat(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '{') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
        out += '{';
        ++i;
        continue;
      }
      const size_t close = fmt.find('}', i);
      if (close == std::string::npos) Fail("Single '{' encountered in format string");
      const std::string field = fmt.substr(i + 1, close - i - 1);
      if (field.find_first_of(":!.[") != std::string::npos) FailUnsupported("format specs in str.format");
      Value v;
      if (field.empty()) {
        if (auto_index >= a.positional.size())
          Fail("Replacement index " + std::to_string(auto_index) + " out of range");
        v = a.positional[auto_index++];
      } else if (field.find_first_not_of("0123456789") == std::string::npos) {
        const size_t k = std::stoul(field.substr(0, 9));
        if (k >= a.positional.size()) Fail("Replacement index " + field + " out of range");
        v = a.positional[k];
      } else {
        bool found = false;
        for (const auto& [name, val] : a.keyword) {
          if (name == field) {
            v = val;
            found = true;
          }
        }
        if (!found) Fail("KeyError: '" + field + "'");
      }
      out += v.Str();
      i = close;
    } else if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}')
        ++i;
      else
        Fail("Single '}' encountered in format string");
      out += '}';
    } else {
      out += c;
    }
  }
  return out;
}

bool StartsOrEnds(const std::string& s, const Value& affix, bool start) {
  auto one = [&](const Value& v) {
    const std::string a = StrArg(v, start ? "startswith" : "endswith");
    if (a.size() > s.size()) return false;
    return start ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.kind() == Kind::kTuple) {
    for (const auto& v : affix.items()) {
      if (one(v)) return true;
    }
    return false;
  }
  return one(affix);
}

// Byte offset → code point index, for find()/index() results.
int64_t CodePointIndex(const std::string& s, size_t byte) {
  return static_cast<int64_t>(CodePointCount(std::string_view(s).substr(0, byte)));
}

bool AllOf(const std::string& s, bool (*pred)(uint32_t)) {
  if (s.empty()) return false;
  size_t pos = 0;
  while (pos < s.size()) {
    if (!pred(NextCodePoint(s, &pos))) return false;
  }
  return true;
}

}  // namespace

Value Interpreter::BoundMethod(const Value& self, const std::string& name) {
  return Value::Function(name, [self, name](Interpreter& in, CallArgs& a) { return in.CallMethod(self, name, a); });
}

Value Interpreter::CallMethod(const Value& self, const std::string& name, CallArgs& a) {
  if (self.is_string()) {
    const std::string& s = self.string();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      return MakeStr(PyStrip(s, a.Get(0, "chars"), name != "rstrip", name != "lstrip"));
    }
    if (name == "split" || name == "rsplit") {
      const Value sep = a.Get(0, "sep");
      const int64_t maxsplit = IntArg(a.Get(1, "maxsplit"), -1, "split");
      if (name == "rsplit" && maxsplit >= 0) FailUnsupported("str.rsplit with maxsplit");
      std::vector<Value> parts;
      for (auto& p : PySplit(s, sep, maxsplit)) parts.push_back(Value::Str(std::move(p)));
      Charge(s.size());
      return MakeList(std::move(parts));
    }
    if (name == "splitlines") {
      std::vector<Value> parts;
      for (auto& p : PySplitLines(s, a.Get(0, "keepends").Truthy())) parts.push_back(Value::Str(std::move(p)));
      Charge(s.size());
      return MakeList(std::move(parts));
    }
    if (name == "startswith" || name == "endswith") {
      if (a.positional.size() > 1) FailUnsupported("start/end arguments of str." + name);
      return Value::Bool(StartsOrEnds(s, a.Get(0, "prefix"), name == "startswith"));
    }
    if (name == "upper") return MakeStr(Upper(s));
    if (name == "lower" || name == "casefold") return MakeStr(Lower(s));
    if (name == "title") return MakeStr(PyTitle(s));
    if (name == "capitalize") return MakeStr(PyCapitalize(s));
    if (name == "swapcase") {
      std::string out;
      size_t pos = 0;
      while (pos < s.size()) {
        const uint32_t c = NextCodePoint(s, &pos);
        AppendCodePoint(ToUpper(c) != c ? ToUpper(c) : ToLower(c), &out);
      }
      return MakeStr(std::move(out));
    }
    if (name == "replace") {
      return MakeStr(PyReplace(s, StrArg(a.Get(0, "old"), "replace"), StrArg(a.Get(1, "new"), "replace"),
                               IntArg(a.Get(2, "count"), -1, "replace"), *this));
    }
    if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
      if (a.positional.size() > 1) FailUnsupported("start/end arguments of str." + name);
      const std::string sub = StrArg(a.Get(0, "sub"), name.c_str());
      const size_t f = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
      if (f == std::string::npos) {
        if (name.find("index") != std::string::npos) Fail("substring not found");
        return Value::Int(-1);
      }
      return Value::Int(CodePointIndex(s, f));
    }
    if (name == "count") {
      const std::string sub = StrArg(a.Get(0, "sub"), "count");
      if (sub.empty()) return Value::Int(static_cast<int64_t>(CodePointCount(s)) + 1);
      int64_t n = 0;
      for (size_t f = s.find(sub); f != std::string::npos; f = s.find(sub, f + sub.size())) ++n;
      return Value::Int(n);
    }
    if (name == "join") {
      std::string out;
      bool first = true;
      for (const auto& v : Iterate(a.Get(0, "iterable"))) {
        if (!v.is_string()) Fail(std::string("sequence item: expected str instance, ") + v.TypeName() + " found");
        if (!first) out += s;
        first = false;
        out += v.string();
        CheckSize(out.size());
      }
      return MakeStr(std::move(out));
    }
    if (name == "format") return MakeStr(PyFormat(s, a));
    if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") return Value::Bool(AllOf(s, IsDigit));
    if (name == "isalpha") return Value::Bool(AllOf(s, IsAlpha));
    if (name == "isalnum") return Value::Bool(AllOf(s, [](uint32_t c) { return IsAlpha(c) || IsDigit(c); }));
    if (name == "isspace") return Value::Bool(AllOf(s, IsPyWhitespace));
    if (name == "islower" || name == "isupper") return Value::Bool(PyIsCase(s, name == "islower"));
    if (name == "center" || name == "ljust" || name == "rjust") {
      const Value fill = a.Get(1, "fillchar");
      const std::string f = fill.is_undefined() ? " " : StrArg(fill, name.c_str());
      if (CodePointCount(f) != 1) Fail("The fill character must be exactly one character long");
      return MakeStr(PyPad(s, IntArg(a.Get(0, "width"), 0, name.c_str()), f, name[0]));
    }
    if (name == "zfill") {
      const int64_t width = std::min<int64_t>(IntArg(a.Get(0, "width"), 0, "zfill"), 1 << 24);
      const int64_t len = static_cast<int64_t>(CodePointCount(s));
      if (width <= len) return self;
      const bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
      return MakeStr((sign ? s.substr(0, 1) : "") + std::string(width - len, '0') + s.substr(sign ? 1 : 0));
    }
  } else if (self.kind() == Kind::kDict) {
    const DictData& d = self.dict();
    if (name == "items") {
      std::vector<Value> out;
      for (const auto& [k, v] : d.entries) out.push_back(Value::List({k, v}, Kind::kTuple));
      return MakeList(std::move(out));
    }
    if (name == "keys" || name == "values") {
      std::vector<Value> out;
      for (const auto& [k, v] : d.entries) out.push_back(name == "keys" ? k : v);
      return MakeList(std::move(out));
    }
    if (name == "get") {
      const Value key = a.Get(0, "key");
      CheckHashable(key, 0);
      if (const Value* v = d.Find(key)) return *v;
      return a.Has(1, "default") ? a.Get(1, "default") : Value::None();
    }
    if (name == "copy") {
      auto copy = std::make_shared<DictData>(d);
      return Value::Dict(std::move(copy));
    }
  } else if (self.kind() == Kind::kList || self.kind() == Kind::kTuple) {
    const Value x = a.Get(0, "value");
    if (name == "count") {
      int64_t n = 0;
      for (const auto& v : self.items()) n += Equals(v, x);
      return Value::Int(n);
    }
    if (name == "index") {
      for (size_t i = 0; i < self.items().size(); ++i) {
        if (Equals(self.items()[i], x)) return Value::Int(static_cast<int64_t>(i));
      }
      Fail(x.Repr() + " is not in list");
    }
    if (name == "copy") return MakeList(self.items());
  }
  FailUnsupported(std::string("the method ") + self.TypeName() + "." + name + "()");
}

// item[path] for each dotted part (integers index sequences), as jinja2's
// make_attrgetter.
Value Interpreter::Attribute(const Value& item, const std::string& path, int line) {
  Value v = item;
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!part.empty() && part.find_first_not_of("0123456789") == std::string::npos && part.size() < 18) {
      v = GetItem(v, Value::Int(std::stoll(part)), line);
    } else {
      v = GetItem(v, Value::Str(part), line);
    }
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value Interpreter::EvalFilterChain(const Expr& e, const Value& block_input) {
  // e is a kFilter whose args[0] is the subject: another filter, an
  // expression, or null for {% filter %} / {% set %} blocks.
  DepthGuard guard(this);
  Value subject;
  if (!e.args[0]) {
    subject = block_input;
  } else if (e.args[0]->type == Expr::kFilter) {
    subject = EvalFilterChain(*e.args[0], block_input);
  } else {
    subject = Eval(*e.args[0]);
  }
  CallArgs args = EvalArgs(e);
  Step();
  return ApplyFilter(e.name, subject, args, e.line);
}

namespace {

// Sort key with jinja2's ignore_case (lowercase strings unless case-sensitive).
Value SortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::Str(Lower(v.string()));
  return v;
}

void SortValues(std::vector<Value>& items, const std::function<Value(const Value&)>& key, bool reverse) {
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(key(items[i]), i);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? Less(y.first, x.first) : Less(x.first, y.first);
  });
  std::vector<Value> out;
  for (const auto& k : keyed) out.push_back(items[k.second]);
  items = std::move(out);
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Python round(x, n) on a double: correctly rounded, ties to even on the exact
// binary value (what printf's %.*f does).
double PyRound(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits > 300) return x;
  if (digits < -300) return 0.0 * x;
  if (digits >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::min<int64_t>(digits, 340)), x);
    return std::strtod(buf, nullptr);
  }
  const double p = std::pow(10.0, static_cast<double>(-digits));
  const double y = x / p;
  double r = std::nearbyint(y);
  return r * p;
}

}  // namespace

Value Interpreter::ApplyFilter(const std::string& name, const Value& v, CallArgs& a, int line) {
  const std::string at = Line(line);
  auto need_defined = [&](const Value& x) {
    if (x.is_undefined()) Fail(UndefinedMessage(x) + at);
  };
  if (name == "safe") return v;
  if (name == "string") return v.is_string() ? v : MakeStr(v.Str());
  if (name == "trim") {
    return MakeStr(PyStrip(v.Str(), a.Get(0, "chars"), true, true));
  }
  if (name == "upper") return MakeStr(Upper(v.Str()));
  if (name == "lower") return MakeStr(Lower(v.Str()));
  if (name == "capitalize") return MakeStr(PyCapitalize(v.Str()));
  if (name == "title") return MakeStr(JinjaTitle(v.Str()));
  if (name == "e" || name == "escape" || name == "forceescape") return MakeStr(HtmlEscape(v.Str()));
  if (name == "length" || name == "count") {
    switch (v.kind()) {
      case Kind::kUndefined:
        return Value::Int(0);
      case Kind::kString:
        return Value::Int(static_cast<int64_t>(CodePointCount(v.string())));
      case Kind::kList:
      case Kind::kTuple:
        return Value::Int(static_cast<int64_t>(v.items().size()));
      case Kind::kDict:
        return Value::Int(static_cast<int64_t>(v.dict().entries.size()));
      default:
        Fail(std::string("object of type '") + v.TypeName() + "' has no len()" + at);
    }
  }
  if (name == "default" || name == "d") {
    const bool boolean = a.Get(1, "boolean").Truthy();
    if (v.is_undefined() || (boolean && !v.Truthy())) {
      return a.Has(0, "default_value") ? a.Get(0, "default_value") : Value::Str("");
    }
    return v;
  }
  if (name == "list") return MakeList(Iterate(v));
  if (name == "first") {
    if (v.kind() == Kind::kString || v.kind() == Kind::kDict || v.is_undefined() || v.is_sequence_like()) {
      const std::vector<Value> items = v.is_string() ? std::vector<Value>{} : Iterate(v);
      if (v.is_string()) {
        if (v.string().empty()) return Value::Undefined("No first item, sequence was empty.");
        return MakeStr(CodePointAt(v.string(), 0));
      }
      if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
      return items.front();
    }
    Fail(std::string("'") + v.TypeName() + "' object is not iterable" + at);
  }
  if (name == "last") {
    if (v.kind() == Kind::kIterator) Fail("'generator' object is not reversible" + at);
    if (v.is_string()) {
      if (v.string().empty()) return Value::Undefined("No last item, sequence was empty.");
      return MakeStr(CodePointAt(v.string(), static_cast<int64_t>(CodePointCount(v.string())) - 1));
    }
    if (v.kind() == Kind::kList || v.kind() == Kind::kTuple || v.kind() == Kind::kDict || v.is_undefined()) {
      const std::vector<Value> items = Iterate(v);
      if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
      return items.back();
    }
    Fail(std::string("'") + v.TypeName() + "' object is not reversible" + at);
  }
  if (name == "join") {
    const Value sep = a.Get(0, "d");
    const std::string d = sep.is_undefined() ? "" : sep.Str();
    const Value attr = a.Get(1, "attribute");
    std::string out;
    bool first = true;
    for (const auto& item : Iterate(v)) {
      if (!first) out += d;
      first = false;
      out += (attr.is_undefined() || attr.is_none() ? item : Attribute(item, attr.Str(), line)).Str();
      CheckSize(out.size());
    }
    return MakeStr(std::move(out));
  }
  if (name == "replace") {
    return MakeStr(PyReplace(v.Str(), a.Get(0, "old").Str(), a.Get(1, "new").Str(),
                             IntArg(a.Get(2, "count"), -1, "replace"), *this));
  }
  if (name == "tojson") {
    JsonOptions o;
    o.ensure_ascii = a.Get(0, "ensure_ascii").Truthy();
    const Value indent = a.Get(1, "indent");
    if (!indent.is_undefined() && !indent.is_none()) {
      o.has_indent = true;
      if (indent.is_string()) {
        o.indent = indent.string();
      } else {
        o.indent =
            std::string(static_cast<size_t>(std::clamp<int64_t>(IntArg(indent, 0, "tojson indent"), 0, 64)), ' ');
      }
    }
    o.item_separator = o.has_indent ? "," : ", ";
    o.key_separator = ": ";
    const Value seps = a.Get(2, "separators");
    if (!seps.is_undefined() && !seps.is_none()) {
      if (!seps.is_sequence_like() || seps.items().size() != 2 || !seps.items()[0].is_string() ||
          !seps.items()[1].is_string()) {
        Fail("tojson: separators must be a pair of strings" + at);
      }
      o.item_separator = seps.items()[0].string();
      o.key_separator = seps.items()[1].string();
    }
    o.sort_keys = a.Get(3, "sort_keys").Truthy();
    std::string out;
    DumpJson(v, o, 0, &out);
    return MakeStr(std::move(out));
  }
  if (name == "items") {
    if (v.is_undefined()) return MakeList({}, Kind::kIterator);
    if (v.kind() != Kind::kDict) Fail("Can only get item pairs from a mapping." + at);
    std::vector<Value> out;
    for (const auto& [k, x] : v.dict().entries) out.push_back(Value::List({k, x}, Kind::kTuple));
    return MakeList(std::move(out), Kind::kIterator);
  }
  if (name == "dictsort") {
    if (v.kind() != Kind::kDict) Fail("dictsort: a mapping is required" + at);
    const bool cs = a.Get(0, "case_sensitive").Truthy();
    const Value by = a.Get(1, "by");
    const bool by_value = by.is_string() && by.string() == "value";
    if (by.is_string() && by.string() != "key" && by.string() != "value")
      Fail("You can only sort by either \"key\" or \"value\"" + at);
    std::vector<Value> out;
    for (const auto& [k, x] : v.dict().entries) out.push_back(Value::List({k, x}, Kind::kTuple));
    SortValues(
        out, [&](const Value& p) { return SortKey(p.items()[by_value ? 1 : 0], cs); }, a.Get(2, "reverse").Truthy());
    return MakeList(std::move(out));
  }
  if (name == "sort") {
    std::vector<Value> items = Iterate(v);
    const bool reverse = a.Get(0, "reverse").Truthy();
    const bool cs = a.Get(1, "case_sensitive").Truthy();
    const Value attr = a.Get(2, "attribute");
    SortValues(
        items,
        [&](const Value& x) {
          return SortKey(attr.is_undefined() || attr.is_none() ? x : Attribute(x, attr.Str(), line), cs);
        },
        reverse);
    return MakeList(std::move(items));
  }
  if (name == "unique") {
    const bool cs = a.Get(0, "case_sensitive").Truthy();
    const Value attr = a.Get(1, "attribute");
    std::vector<Value> out, seen;
    for (const auto& x : Iterate(v)) {
      const Value key = SortKey(attr.is_undefined() || attr.is_none() ? x : Attribute(x, attr.Str(), line), cs);
      CheckHashable(key, line);
      bool dup = false;
      for (const auto& s : seen) {
        if (Equals(s, key)) {
          dup = true;
          break;
        }
      }
      Step();
      if (!dup) {
        seen.push_back(key);
        out.push_back(x);
      }
    }
    return MakeList(std::move(out), Kind::kIterator);
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::vector<uint32_t> cps = CodePoints(v.string());
      std::reverse(cps.begin(), cps.end());
      return MakeStr(FromCodePoints(cps.data(), cps.size()));
    }
    std::vector<Value> items = Iterate(v);
    std::reverse(items.begin(), items.end());
    return MakeList(std::move(items), Kind::kIterator);
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool attr_mode = name.size() > 6;
    const bool keep_if = name[0] == 's';
    const size_t first_arg = attr_mode ? 1 : 0;
    std::string attr;
    if (attr_mode) {
      if (a.positional.empty()) Fail(name + ": missing the attribute name" + at);
      attr = a.positional[0].Str();
    }
    const bool has_test = a.positional.size() > first_arg;
    std::string test;
    CallArgs test_args;
    if (has_test) {
      test = StrArg(a.positional[first_arg], name.c_str());
      if (!IsJinjaTestName(test)) Fail("No test named '" + test + "'." + at);
      test_args.positional.assign(a.positional.begin() + first_arg + 1, a.positional.end());
      test_args.keyword = a.keyword;
    }
    std::vector<Value> out;
    // jinja2 iterates only a true value here: none|select(...) is empty.
    for (const auto& x : v.Truthy() ? Iterate(v) : std::vector<Value>{}) {
      Step();
      const Value subject = attr_mode ? Attribute(x, attr, line) : x;
      const bool r = has_test ? ApplyTest(test, subject, test_args, line) : subject.Truthy();
      if (r == keep_if) out.push_back(x);
    }
    return MakeList(std::move(out), Kind::kIterator);
  }
  if (name == "map") {
    std::vector<Value> out;
    if (!v.Truthy()) return MakeList({}, Kind::kIterator);  // as select: a false value maps to nothing
    const Value attr = a.Get(99, "attribute");
    if (!attr.is_undefined()) {
      const Value dflt = a.Get(99, "default");
      for (const auto& x : Iterate(v)) {
        Step();
        Value r = Attribute(x, attr.Str(), line);
        if (r.is_undefined() && !dflt.is_undefined()) r = dflt;
        out.push_back(std::move(r));
      }
    } else {
      if (a.positional.empty()) Fail("map requires a filter argument" + at);
      const std::string filter = StrArg(a.positional[0], "map");
      if (!IsJinjaFilterName(filter)) Fail("No filter named '" + filter + "'." + at);
      CallArgs fa;
      fa.positional.assign(a.positional.begin() + 1, a.positional.end());
      fa.keyword = a.keyword;
      for (const auto& x : Iterate(v)) {
        Step();
        CallArgs copy = fa;
        out.push_back(ApplyFilter(filter, x, copy, line));
      }
    }
    return MakeList(std::move(out), Kind::kIterator);
  }
  if (name == "attr") {
    // Python attributes only (methods, namespace and loop fields), not items.
    const std::string attr = a.Get(0, "name").Str();
    if (v.kind() == Kind::kDict) return GetAttr(Value::Dict(std::make_shared<DictData>()), attr, line);
    if (v.is_undefined()) return Value::Undefined(UndefinedMessage(v));
    return GetAttr(v, attr, line);
  }
  if (name == "groupby") {
    const std::string attr = a.Get(0, "attribute").Str();
    const Value dflt = a.Get(1, "default");
    const bool cs = a.Get(2, "case_sensitive").Truthy();
    auto key_of = [&](const Value& x) {
      Value k = Attribute(x, attr, line);
      if (k.is_undefined() && !dflt.is_undefined()) k = dflt;
      return k;
    };
    std::vector<Value> items = Iterate(v);
    SortValues(
        items, [&](const Value& x) { return SortKey(key_of(x), cs); }, false);
    std::vector<Value> groups;
    std::vector<Value> cur;
    Value cur_key;
    for (const auto& x : items) {
      Step();
      const Value k = SortKey(key_of(x), cs);
      if (!cur.empty() && !Equals(k, cur_key)) {
        groups.push_back(Value::List({key_of(cur[0]), MakeList(std::move(cur))}, Kind::kTuple));
        cur.clear();
      }
      cur_key = k;
      cur.push_back(x);
    }
    if (!cur.empty()) groups.push_back(Value::List({key_of(cur[0]), MakeList(std::move(cur))}, Kind::kTuple));
    return MakeList(std::move(groups));
  }
  if (name == "int") {
    need_defined(v);
    const Value dflt = a.Has(0, "default") ? a.Get(0, "default") : Value::Int(0);
    const int64_t base = IntArg(a.Get(1, "base"), 10, "int");
    switch (v.kind()) {
      case Kind::kBool:
      case Kind::kInt:
        return Value::Int(v.integer());
      case Kind::kFloat: {
        const double d = v.number();
        if (!std::isfinite(d)) return dflt;
        if (std::fabs(d) >= 9.2e18) FailUnsupported("integer overflow" + at);
        return Value::Int(static_cast<int64_t>(d));
      }
      case Kind::kString: {
        std::string s = PyStrip(v.string(), Value::None(), true, true);
        std::string digits;
        for (const char c : s) {
          if (c != '_') digits += c;
        }
        if (!digits.empty() && (base == 10 || base == 16 || base == 8 || base == 2)) {
          char* end = nullptr;
          errno = 0;
          const long long r = std::strtoll(digits.c_str(), &end, static_cast<int>(base));
          if (end && *end == '\0' && errno == 0 && s.find("__") == std::string::npos &&
              digits.find_first_of(" \t") == std::string::npos) {
            return Value::Int(r);
          }
        }
        char* end = nullptr;
        const double d = std::strtod(s.c_str(), &end);
        if (!s.empty() && end && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18 &&
            s.find_first_of("xX") == std::string::npos) {
          return Value::Int(static_cast<int64_t>(d));
        }
        return dflt;
      }
      default:
        return dflt;
    }
  }
  if (name == "float") {
    need_defined(v);
    const Value dflt = a.Has(0, "default") ? a.Get(0, "default") : Value::Float(0.0);
    if (v.is_number()) return Value::Float(v.number());
    if (v.is_string()) {
      const std::string s = PyStrip(v.string(), Value::None(), true, true);
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == '\0' && s.find_first_of("xXpP") == std::string::npos) return Value::Float(d);
    }
    return dflt;
  }
  if (name == "abs") {
    need_defined(v);
    if (!v.is_number()) Fail(std::string("bad operand type for abs(): '") + v.TypeName() + "'" + at);
    if (v.kind() == Kind::kFloat) return Value::Float(std::fabs(v.number()));
    if (v.integer() == INT64_MIN) FailUnsupported("integer overflow" + at);
    return Value::Int(std::llabs(v.integer()));
  }
  if (name == "round") {
    need_defined(v);
    if (!v.is_number()) Fail(std::string("type ") + v.TypeName() + " doesn't define __round__ method" + at);
    const int64_t precision = IntArg(a.Get(0, "precision"), 0, "round");
    const Value method_v = a.Get(1, "method");
    const std::string method = method_v.is_undefined() ? "common" : method_v.Str();
    const double x = v.number();
    if (method == "common") {
      // Python's round(int, n) stays an int (n ≥ 0 leaves it unchanged).
      if (v.kind() != Kind::kFloat && precision >= 0) return Value::Int(v.integer());
      if (v.kind() != Kind::kFloat) return Value::Int(static_cast<int64_t>(PyRound(x, precision)));
      return Value::Float(PyRound(x, precision));
    }
    if (method != "ceil" && method != "floor") Fail("method must be common, ceil or floor" + at);
    const double p = std::pow(10.0, static_cast<double>(precision));
    return Value::Float((method == "ceil" ? std::ceil(x * p) : std::floor(x * p)) / p);
  }
  if (name == "indent") {
    need_defined(v);
    // jinja2 appends "\n" to the value: anything but a string is a TypeError.
    if (!v.is_string()) Fail(std::string("indent: expected a string, not ") + v.TypeName() + at);
    const Value width_v = a.Get(0, "width");
    std::string indention;
    if (width_v.is_string()) {
      indention = width_v.string();
    } else {
      indention = std::string(static_cast<size_t>(std::clamp<int64_t>(IntArg(width_v, 4, "indent"), 0, 1024)), ' ');
    }
    const bool first = a.Get(1, "first").Truthy();
    const bool blank = a.Get(2, "blank").Truthy();
    const std::vector<std::string> lines = PySplitLines(v.Str() + "\n", false);
    std::string rv;
    if (blank) {
      for (size_t i = 0; i < lines.size(); ++i) {
        if (i) rv += "\n" + indention;
        rv += lines[i];
        CheckSize(rv.size());
      }
    } else {
      rv = lines.empty() ? "" : lines[0];
      for (size_t i = 1; i < lines.size(); ++i) {
        rv += "\n";
        if (!lines[i].empty()) rv += indention;
        rv += lines[i];
        CheckSize(rv.size());
      }
    }
    if (first) rv = indention + rv;
    return MakeStr(std::move(rv));
  }
  if (name == "center") {
    return MakeStr(PyPad(v.Str(), IntArg(a.Get(0, "width"), 80, "center"), " ", 'c'));
  }
  if (name == "format") {
    if (!a.keyword.empty()) FailUnsupported("keyword arguments of the format filter" + at);
    return MakeStr(PercentFormat(v.Str(), Value::List(a.positional, Kind::kTuple), line));
  }
  if (name == "sum") {
    const Value attr = a.Get(0, "attribute");
    Value total = a.Has(1, "start") ? a.Get(1, "start") : Value::Int(0);
    for (const auto& x : Iterate(v)) {
      total = BinaryOp("+", total, attr.is_undefined() || attr.is_none() ? x : Attribute(x, attr.Str(), line), line);
    }
    return total;
  }
  if (name == "max" || name == "min") {
    const bool cs = a.Get(0, "case_sensitive").Truthy();
    const Value attr = a.Get(1, "attribute");
    const std::vector<Value> items = Iterate(v);
    if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    auto key = [&](const Value& x) {
      return SortKey(attr.is_undefined() || attr.is_none() ? x : Attribute(x, attr.Str(), line), cs);
    };
    Value best_key = key(items[0]);
    for (size_t i = 1; i < items.size(); ++i) {
      const Value k = key(items[i]);
      if (name == "max" ? Less(best_key, k) : Less(k, best_key)) {
        best = i;
        best_key = k;
      }
    }
    return items[best];
  }
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    const std::string s = v.Str();
    size_t pos = 0;
    while (pos < s.size()) {
      const uint32_t c = NextCodePoint(s, &pos);
      const bool w = IsAlpha(c) || IsDigit(c) || c == '_';  // Python's \w
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value::Int(n);
  }
  if (name == "batch") {
    const int64_t size = IntArg(a.Get(0, "linecount"), 0, "batch");
    if (size <= 0) Fail("batch: linecount must be positive" + at);
    const Value fill = a.Get(1, "fill_with");
    std::vector<Value> out, cur;
    for (const auto& x : Iterate(v)) {
      cur.push_back(x);
      if (static_cast<int64_t>(cur.size()) == size) {
        out.push_back(MakeList(std::move(cur)));
        cur.clear();
      }
    }
    if (!cur.empty()) {
      if (!fill.is_undefined() && !fill.is_none()) {
        while (static_cast<int64_t>(cur.size()) < size) cur.push_back(fill);
      }
      out.push_back(MakeList(std::move(cur)));
    }
    return MakeList(std::move(out), Kind::kIterator);
  }
  if (!IsJinjaFilterName(name)) Fail("No filter named '" + name + "'." + at);
  FailUnsupported("the '" + name + "' filter" + at);
}

bool Interpreter::ApplyTest(const std::string& name, const Value& v, CallArgs& a, int line) {
  const std::string at = Line(line);
  const Value arg = a.Get(0, "other");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind() == Kind::kBool;
  if (name == "true") return v.kind() == Kind::kBool && v.boolean();
  if (name == "false") return v.kind() == Kind::kBool && !v.boolean();
  if (name == "integer") return v.kind() == Kind::kInt;
  if (name == "float") return v.kind() == Kind::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.kind() == Kind::kDict;
  if (name == "sequence") {
    return v.is_undefined() || v.is_string() || v.kind() == Kind::kList || v.kind() == Kind::kTuple ||
           v.kind() == Kind::kDict;
  }
  if (name == "iterable") {
    return v.is_undefined() || v.is_string() || v.is_sequence_like() || v.kind() == Kind::kDict;
  }
  if (name == "callable") return v.kind() == Kind::kCallable || v.is_undefined();
  if (name == "escaped") return false;
  if (name == "sameas") {
    if (v.kind() != arg.kind()) return false;
    switch (v.kind()) {
      case Kind::kNone:
      case Kind::kUndefined:
        return v.is_none();
      case Kind::kBool:
        return v.boolean() == arg.boolean();
      case Kind::kInt:
        return v.integer() == arg.integer() && v.integer() >= -5 && v.integer() <= 256;
      case Kind::kString:
        return &v.string() == &arg.string();
      case Kind::kList:
      case Kind::kTuple:
      case Kind::kIterator:
        return &v.items() == &arg.items();
      case Kind::kDict:
        return &v.dict() == &arg.dict();
      case Kind::kObject:
        return &v.object() == &arg.object();
      default:
        return false;
    }
  }
  if (name == "lower" || name == "upper") return PyIsCase(v.Str(), name == "lower");
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.is_undefined()) Fail(UndefinedMessage(v) + at);
    if (!v.is_number()) Fail(std::string("unsupported operand type(s) for %: '") + v.TypeName() + "' and 'int'" + at);
    if (name == "divisibleby") {
      if (!arg.is_number()) Fail("divisibleby needs a number" + at);
      if (arg.number() == 0) Fail("integer division or modulo by zero" + at);
      if (v.kind() == Kind::kFloat || arg.kind() == Kind::kFloat) return std::fmod(v.number(), arg.number()) == 0;
      return arg.integer() == -1 || v.integer() % arg.integer() == 0;
    }
    const bool odd = v.kind() == Kind::kFloat ? std::fmod(std::fabs(v.number()), 2.0) == 1.0 : (v.integer() & 1) != 0;
    return name == "odd" ? odd : (v.kind() == Kind::kFloat ? std::fmod(v.number(), 2.0) == 0 : !odd);
  }
  if (name == "in") return Contains(arg, v, line);
  if (name == "==" || name == "eq" || name == "equalto") return Equals(v, arg);
  if (name == "!=" || name == "ne") return !Equals(v, arg);
  if (name == ">" || name == "gt" || name == "greaterthan") return Compare(">", v, arg, line);
  if (name == ">=" || name == "ge") return Compare(">=", v, arg, line);
  if (name == "<" || name == "lt" || name == "lessthan") return Compare("<", v, arg, line);
  if (name == "<=" || name == "le") return Compare("<=", v, arg, line);
  if (name == "filter") return v.is_string() && IsJinjaFilterName(v.string());
  if (name == "test") return v.is_string() && IsJinjaTestName(v.string());
  if (!IsJinjaTestName(name)) Fail("No test named '" + name + "'." + at);
  FailUnsupported("the '" + name + "' test" + at);
}

std::string Interpreter::Strftime(const std::string& fmt) {
  if (fmt.size() > 1024) FailExhausted("strftime_now: format longer than 1024 bytes");
  std::tm tm{};
  if (options_.now) {
    tm = *options_.now;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  if (fmt.empty()) return "";
  std::vector<char> buf(4096 + fmt.size() * 64);
  const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
  if (n == 0) Fail("strftime_now: the format produced no output or too much");
  return std::string(buf.data(), n);
}

const DictData& Interpreter::Builtins() {
  static const DictData* builtins = [] {
    auto* d = new DictData;
    d->Set(Value::Str("range"), Value::Function("range", [](Interpreter& in, CallArgs& a) {
             if (!a.keyword.empty() || a.positional.empty() || a.positional.size() > 3)
               Fail("range expects 1 to 3 integer arguments");
             int64_t start = 0, stop, step = 1;
             if (a.positional.size() == 1) {
               stop = IntArg(a.positional[0], 0, "range");
             } else {
               start = IntArg(a.positional[0], 0, "range");
               stop = IntArg(a.positional[1], 0, "range");
               if (a.positional.size() == 3) step = IntArg(a.positional[2], 1, "range");
             }
             if (step == 0) Fail("range() arg 3 must not be zero");
             const long double count_ld = step > 0 ? (static_cast<long double>(stop) - start + step - 1) / step
                                                   : (static_cast<long double>(start) - stop - step - 1) / -step;
             const int64_t count = count_ld <= 0 ? 0 : static_cast<int64_t>(count_ld);
             // jinja2's sandbox refuses ranges over 100000 items (MAX_RANGE).
             if (count > 100000) Fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
             std::vector<Value> items;
             for (int64_t i = 0; i < count; ++i) items.push_back(Value::Int(start + i * step));
             return in.MakeList(std::move(items));
           }));
    d->Set(Value::Str("namespace"), Value::Function("namespace", [](Interpreter&, CallArgs& a) {
             auto ns = std::make_shared<ObjectData>();
             ns->is_namespace = true;
             for (const auto& p : a.positional) {
               if (p.kind() != Kind::kDict) Fail("namespace() takes mappings and keyword arguments");
               for (const auto& [k, v] : p.dict().entries) ns->Set(k.Str(), v);
             }
             for (const auto& [k, v] : a.keyword) ns->Set(k, v);
             return Value::Object(std::move(ns));
           }));
    d->Set(Value::Str("dict"), Value::Function("dict", [](Interpreter&, CallArgs& a) {
             auto out = std::make_shared<DictData>();
             for (const auto& p : a.positional) {
               if (p.kind() != Kind::kDict) FailUnsupported("dict() from a non-mapping");
               for (const auto& [k, v] : p.dict().entries) out->Set(k, v);
             }
             for (const auto& [k, v] : a.keyword) out->Set(Value::Str(k), v);
             return Value::Dict(std::move(out));
           }));
    d->Set(Value::Str("raise_exception"), Value::Function("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
             throw Error{StatusCode::kInvalidArgument, a.Get(0, "message").Str()};
           }));
    d->Set(Value::Str("strftime_now"), Value::Function("strftime_now", [](Interpreter& in, CallArgs& a) {
             return in.MakeStr(in.Strftime(StrArg(a.Get(0, "format"), "strftime_now")));
           }));
    for (const char* name : {"cycler", "joiner", "lipsum"}) {
      const std::string n = name;
      d->Set(Value::Str(n), Value::Function(n, [n](Interpreter&, CallArgs&) -> Value {
               FailUnsupported("the global function " + n + "()");
             }));
    }
    return d;
  }();
  return *builtins;
}

StatusOr<Template> Template::Parse(std::string_view source, const ParseLimits& limits) {
  try {
    return Template(std::make_shared<const NodeList>(ParseTemplate(source, limits)));
  } catch (const Error& e) {
    return Status(e.code, "chat template: " + e.message);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("chat template: out of memory while parsing");
  } catch (const std::exception& e) {
    return Internal(std::string("chat template: ") + e.what());
  }
}

StatusOr<std::string> Template::Render(const DictData& variables, const RenderOptions& options) const {
  std::string out;
  try {
    Interpreter in(variables, options);
    in.RunTemplate(*nodes_, &out);
  } catch (const Error& e) {
    return Status(e.code, e.message);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("chat template: out of memory while rendering");
  } catch (const std::exception& e) {
    return Internal(std::string("chat template: ") + e.what());
  }
  return out;
}

}  // namespace kvedge::jinja
