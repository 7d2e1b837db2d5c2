// Status names and constructors.
#include "platform/status.h"

namespace kvedge {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kDataLoss: return "corrupt input";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kResourceExhausted: return "out of budget";
    case StatusCode::kFailedPrecondition: return "failed precondition";
    case StatusCode::kIoError: return "i/o error";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
Status DataLoss(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }
Status Unsupported(std::string m) { return Status(StatusCode::kUnsupported, std::move(m)); }
Status ResourceExhausted(std::string m) { return Status(StatusCode::kResourceExhausted, std::move(m)); }
Status FailedPrecondition(std::string m) { return Status(StatusCode::kFailedPrecondition, std::move(m)); }
Status IoError(std::string m) { return Status(StatusCode::kIoError, std::move(m)); }
Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

void CheckFailed(const char* file, int line, const char* condition) {
  std::fprintf(stderr, "kvedge: check failed at %s:%d: %s\n", file, line, condition);
  std::abort();
}

}  // namespace kvedge
