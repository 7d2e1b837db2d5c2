// FunctionRef: a non-owning, non-allocating reference to a callable, for
// callbacks on the hot path (std::function may allocate).
#ifndef KVEDGE_PLATFORM_FUNCTION_REF_H_
#define KVEDGE_PLATFORM_FUNCTION_REF_H_

#include <type_traits>
#include <utility>

namespace kvedge {

template <typename Sig>
class FunctionRef;

// The referenced callable must outlive the FunctionRef.
template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f)  // NOLINT: implicit by design
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* obj, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(obj))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

}  // namespace kvedge

#endif  // KVEDGE_PLATFORM_FUNCTION_REF_H_
