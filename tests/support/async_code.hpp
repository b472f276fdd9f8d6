// The error code an asynchronous dlock call completes with, read through a plain handler.
//
//   auto f = dlock::test::async_code([&](auto h) { m.async_lock_for(1s, std::move(h)); });
//   EXPECT_EQ(f.get(), dlock::errc::timeout);
//
// Not asio::use_future: its future carries the error as an exception, and libstdc++'s
// exception_ptr count is invisible to ThreadSanitizer, which then reports the exception's
// release on the client's thread as a race with the caller's read of it.
#pragma once

#include <future>
#include <memory>
#include <system_error>

namespace dlock::test {

template <class Start>
std::future<std::error_code> async_code(Start start) {
  auto done = std::make_shared<std::promise<std::error_code>>();
  auto f = done->get_future();
  // A result that was acquired after all is dropped here (a lease unlocks itself).
  start([done](std::error_code ec, auto) { done->set_value(ec); });
  return f;
}

}  // namespace dlock::test
