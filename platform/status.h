// Status and StatusOr<T>: kvedge's error values. No exception crosses an API;
// fallible work returns one of these with a message a user can act on.
#ifndef KVEDGE_PLATFORM_STATUS_H_
#define KVEDGE_PLATFORM_STATUS_H_

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace kvedge {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller passed something unusable (flag, size, format)
  kNotFound,           // a file or a named item does not exist
  kDataLoss,           // a file is truncated, corrupt or hostile
  kUnsupported,        // well-formed but not something kvedge implements
  kResourceExhausted,  // a budget or capacity is too small
  kFailedPrecondition, // the object is in the wrong state for the call
  kIoError,            // the OS refused (permissions, mmap, read)
  kInternal,           // a bug: an invariant the caller could not break
};

const char* StatusCodeName(StatusCode code);

// A success, or an error code with a message. Cheap to return when OK.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: <message>", or "ok".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
Status InvalidArgument(std::string message);
Status NotFound(std::string message);
Status DataLoss(std::string message);
Status Unsupported(std::string message);
Status ResourceExhausted(std::string message);
Status FailedPrecondition(std::string message);
Status IoError(std::string message);
Status Internal(std::string message);

// Either a T or a non-OK Status. Accessing the value of an error aborts.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) { CheckNotOk(); }  // NOLINT
  StatusOr(Status&& status) : status_(std::move(status)) { CheckNotOk(); }  // NOLINT
  StatusOr(T&& value) : value_(std::move(value)) {}  // NOLINT
  StatusOr(const T& value) : value_(value) {}  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & { CheckOk(); return *value_; }
  const T& value() const& { CheckOk(); return *value_; }
  T&& value() && { CheckOk(); return std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void CheckOk() const {
    if (!value_) {
      std::fprintf(stderr, "kvedge: value of a failed StatusOr: %s\n", status_.ToString().c_str());
      std::abort();
    }
  }
  void CheckNotOk() const {
    if (status_.ok()) {
      std::fprintf(stderr, "kvedge: StatusOr built from an OK Status\n");
      std::abort();
    }
  }

  Status status_;
  std::optional<T> value_;
};

[[noreturn]] void CheckFailed(const char* file, int line, const char* condition);

}  // namespace kvedge

// Broken invariants (bugs, not bad input) abort with file and line.
#define KVEDGE_CHECK(cond)                                              \
  do {                                                                  \
    if (!(cond)) ::kvedge::CheckFailed(__FILE__, __LINE__, #cond);      \
  } while (0)

#define KVEDGE_RETURN_IF_ERROR(expr)                   \
  do {                                                 \
    ::kvedge::Status kvedge_status_ = (expr);          \
    if (!kvedge_status_.ok()) return kvedge_status_;   \
  } while (0)

#define KVEDGE_CONCAT_INNER_(a, b) a##b
#define KVEDGE_CONCAT_(a, b) KVEDGE_CONCAT_INNER_(a, b)
#define KVEDGE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
// KVEDGE_ASSIGN_OR_RETURN(auto x, MakeX());
#define KVEDGE_ASSIGN_OR_RETURN(lhs, expr) \
  KVEDGE_ASSIGN_OR_RETURN_IMPL_(KVEDGE_CONCAT_(kvedge_or_, __LINE__), lhs, expr)

#endif  // KVEDGE_PLATFORM_STATUS_H_
