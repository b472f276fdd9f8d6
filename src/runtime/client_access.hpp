// The one door from a public dlock::client to its internals, for dlock's own synchronizers,
// tools and tests (never installed): the public header exposes nothing of client_impl.
#pragma once

#include <memory>

#include "dlock/client.hpp"

namespace dlock::detail {

struct client_access {
  static client_impl& impl(client& c) noexcept { return *c.impl_; }
  static const std::shared_ptr<client_impl>& shared(const client& c) noexcept { return c.impl_; }
};

}  // namespace dlock::detail
