#include "dlock/client.hpp"

#include <cstdio>
#include <cstdlib>

#include "dlock/keys.hpp"
#include "resp/encoder.hpp"
#include "runtime/blocking.hpp"
#include "runtime/client_impl.hpp"
#include "runtime/ping_nodes.hpp"

namespace dlock {

client::client(config cfg) {
  std::error_code ec;
  std::string reason;
  impl_ = std::make_shared<detail::client_impl>(std::move(cfg), ec, reason);
  if (ec) throw lock_error(ec, reason);
}

client::client(config cfg, std::error_code& ec) {
  std::string reason;
  impl_ = std::make_shared<detail::client_impl>(std::move(cfg), ec, reason);
}

client::~client() {
  // Leases and mutexes may keep the impl alive; shut it down now so that nothing runs after
  // the client is gone (they then see errc::shutdown).
  std::error_code ec;
  impl_->shutdown(ec);
  if (ec) {
    std::fputs("dlock: client destroyed on its own I/O thread; aborting\n", stderr);
    std::abort();
  }
}

void client::shutdown() {
  std::error_code ec;
  shutdown(ec);
  throw_if(ec);
}
void client::shutdown(std::error_code& ec) { impl_->shutdown(ec); }

const std::string& client::id() const noexcept { return impl_->id(); }
const config& client::cfg() const noexcept { return impl_->cfg(); }
client::executor_type client::get_executor() const noexcept { return impl_->io().get_executor(); }
bool client::on_io_thread() const noexcept { return impl_->on_io_thread(); }

void client::start_execute(std::vector<std::string> args, detail::completion<reply> done) {
  const auto slot = args.size() > 1 ? keys::slot(args[1]) : std::uint16_t{0};
  impl_->submit(slot, resp::encode_command(args), std::move(done));
}

reply client::execute(std::vector<std::string> args, std::error_code& ec) {
  return detail::run_blocking<reply>(*impl_, ec, [&](detail::completion<reply> done) {
    start_execute(std::move(args), std::move(done));
  });
}

reply client::execute(std::vector<std::string> args) {
  std::error_code ec;
  auto r = execute(std::move(args), ec);
  if (ec) throw lock_error(ec, r.is_error() ? r.str() : std::string{});
  return r;
}

std::chrono::microseconds client::ping(std::error_code& ec) {
  const auto start = std::chrono::steady_clock::now();
  execute({"PING"}, ec);
  if (ec) return {};
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

std::chrono::microseconds client::ping() {
  std::error_code ec;
  auto rtt = ping(ec);
  throw_if(ec);
  return rtt;
}

std::vector<node_status> client::ping_nodes(std::error_code& ec) {
  return detail::run_blocking<std::vector<node_status>>(
      *impl_, ec, [&](detail::completion<std::vector<node_status>> done) {
        detail::start_ping_nodes(*impl_, std::move(done));
      });
}

std::vector<node_status> client::ping_nodes() {
  std::error_code ec;
  auto nodes = ping_nodes(ec);
  throw_if(ec);
  return nodes;
}

}  // namespace dlock
