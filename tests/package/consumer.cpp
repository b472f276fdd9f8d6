// Built against an installed dlock by tests/package/check: the public headers and the exported
// target are enough to configure, parse a URI and construct (and shut down) a client.
#include <cstdio>
#include <dlock/dlock.hpp>

int main() {
  std::error_code ec;
  auto cfg = dlock::config::from_uri("redis://127.0.0.1:1?connect_timeout=100ms", ec);
  if (ec) return 1;
  dlock::client c{cfg};
  c.shutdown();
  std::puts(dlock::make_error_code(dlock::errc::lease_lost).message().c_str());
  return 0;
}
