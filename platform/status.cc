// Status names and constructors.
#include "platform/status.h"

#include "platform/enum_names.h"

namespace kvedge {

namespace {
constexpr EnumName<StatusCode> kStatusCodeNames[] = {{StatusCode::kOk, "ok"},
                                                     {StatusCode::kInvalidArgument, "invalid argument"},
                                                     {StatusCode::kNotFound, "not found"},
                                                     {StatusCode::kDataLoss, "corrupt input"},
                                                     {StatusCode::kUnsupported, "unsupported"},
                                                     {StatusCode::kResourceExhausted, "out of budget"},
                                                     {StatusCode::kFailedPrecondition, "failed precondition"},
                                                     {StatusCode::kIoError, "i/o error"},
                                                     {StatusCode::kInternal, "internal error"}};
}  // namespace

const char* StatusCodeName(StatusCode code) { return NameOf(kStatusCodeNames, code, "unknown"); }

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
