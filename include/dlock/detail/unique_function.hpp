// A move-only type-erased callable (std::move_only_function is C++23). Completion handlers of
// Asio operations are move-only, so std::function cannot hold them.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace dlock::detail {

template <class Signature>
class unique_function;

template <class R, class... Args>
class unique_function<R(Args...)> {
 public:
  unique_function() = default;
  unique_function(std::nullptr_t) {}
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, unique_function>>>
  unique_function(F&& f) : impl_{std::make_unique<model<std::decay_t<F>>>(std::forward<F>(f))} {}

  explicit operator bool() const noexcept { return impl_ != nullptr; }
  R operator()(Args... args) { return impl_->call(std::forward<Args>(args)...); }

 private:
  struct concept_ {
    virtual ~concept_() = default;
    virtual R call(Args&&...) = 0;
  };
  template <class F>
  struct model final : concept_ {
    explicit model(F&& f) : fn(std::move(f)) {}
    explicit model(const F& f) : fn(f) {}
    R call(Args&&... args) override { return fn(std::forward<Args>(args)...); }
    F fn;
  };
  std::unique_ptr<concept_> impl_;
};

}  // namespace dlock::detail
