// How dlock's compiled code hands a result back to an Asio completion handler: the handler is
// type-erased into a move-only callback that, when called from the I/O thread, dispatches the
// handler on its associated executor (default: the client's) and keeps that executor busy
// until then. Used only by the async_initiate shims of the public headers.
#pragma once

#include <asio/associated_executor.hpp>
#include <asio/dispatch.hpp>
#include <asio/executor_work_guard.hpp>
#include <system_error>
#include <utility>

#include "dlock/detail/unique_function.hpp"

namespace dlock::detail {

template <class T>
using completion = unique_function<void(std::error_code, T)>;

template <class T, class Handler, class Executor>
completion<T> erase_handler(Handler&& handler, const Executor& fallback) {
  auto ex = asio::get_associated_executor(handler, fallback);
  auto work = asio::make_work_guard(ex);
  return [h = std::forward<Handler>(handler), work = std::move(work)](std::error_code ec,
                                                                     T value) mutable {
    auto target = work.get_executor();
    asio::dispatch(target, [h = std::move(h), ec, value = std::move(value)]() mutable {
      std::move(h)(ec, std::move(value));
    });
    work.reset();
  };
}

}  // namespace dlock::detail
