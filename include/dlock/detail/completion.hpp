// How dlock's compiled code hands a result back to an Asio completion handler: the handler is
// type-erased into a move-only callback that dispatches the handler on its associated executor
// and keeps that executor busy until then. dlock completes operations on the client's I/O
// thread (or, for calls refused at once, from asio::system_executor, never inline in the
// initiating call), so a handler without an executor of its own runs there.
// Used only by the async_initiate shims of the public headers.
#pragma once

#include <asio/associated_executor.hpp>
#include <asio/dispatch.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/system_executor.hpp>
#include <system_error>
#include <tuple>
#include <utility>

#include "dlock/detail/unique_function.hpp"

namespace dlock::detail {

template <class... T>
using completion = unique_function<void(std::error_code, T...)>;

template <class... T, class Handler>
completion<T...> erase_handler(Handler&& handler) {
  auto ex = asio::get_associated_executor(handler, asio::system_executor{});
  auto work = asio::make_work_guard(ex);
  return [h = std::forward<Handler>(handler), work = std::move(work)](std::error_code ec,
                                                                      T... values) mutable {
    auto target = work.get_executor();
    asio::dispatch(
        target, [h = std::move(h), ec, args = std::make_tuple(std::move(values)...)]() mutable {
          std::apply([&](auto&&... a) { std::move(h)(ec, std::move(a)...); }, std::move(args));
        });
    work.reset();
  };
}

}  // namespace dlock::detail
