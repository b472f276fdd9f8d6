#include "runtime/ping_nodes.hpp"

#include <memory>

#include "resp/encoder.hpp"
#include "runtime/client_impl.hpp"

namespace dlock::detail {
namespace {

using clock = std::chrono::steady_clock;

// One call's PINGs, in parallel, one per node. A connection made for this call is stopped once
// its node answered, and at shutdown (abort), which then completes what it had pending.
// Runs on the I/O thread.
class node_pings final : public abortable, public std::enable_shared_from_this<node_pings> {
 public:
  node_pings(client_impl& c, completion<std::vector<node_status>> done)
      : c_{c}, done_{std::move(done)} {}

  void start() {
    c_.track(this);
    auto nodes = c_.router().map_nodes();
    if (!nodes.empty()) return ping_all(std::move(nodes));
    // A cluster whose map was not read yet: the router holds a request until its first read is
    // done, so this PING's reply says when (and, with no map then, why not).
    c_.submit(0, resp::encode_command({"PING"}),
              [self = shared_from_this()](std::error_code ec, reply) { self->mapped(ec); });
  }

  void abort(std::error_code ec) override {
    aborted_ = ec;
    c_.untrack(this);
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      if (!kept_[i]) conns_[i]->stop();
    }
  }

 private:
  // `ec`: the PING's error, which is why there is no map if there is none.
  void mapped(std::error_code ec) {
    auto nodes = aborted_ ? std::vector<node_status>{} : c_.router().map_nodes();
    if (nodes.empty()) return finish(ec ? ec : make_error_code(errc::cluster_down));
    ping_all(std::move(nodes));
  }

  void ping_all(std::vector<node_status> nodes) {
    nodes_ = std::move(nodes);
    left_ = nodes_.size();
    for (const auto& n : nodes_) {
      bool kept = true;
      conns_.push_back(c_.router().connection_to(n.address, kept));
      kept_.push_back(kept);
    }
    // A connection not up yet answers its first PING only after connecting: time the second.
    for (std::size_t i = 0; i < nodes_.size(); ++i) ping(i, conns_[i]->connected());
  }

  void ping(std::size_t i, bool timed) {
    const auto sent = clock::now();
    conns_[i]->submit(resp::encode_command({"PING"}), c_.cfg().command_timeout,
                      [self = shared_from_this(), i, timed, sent](std::error_code ec, reply) {
                        self->on_pong(i, timed, sent, ec);
                      });
  }

  void on_pong(std::size_t i, bool timed, clock::time_point sent, std::error_code ec) {
    if (!ec && !timed && !aborted_) return ping(i, true);
    if (ec) {
      nodes_[i].error = ec;
    } else {
      nodes_[i].rtt = std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - sent);
    }
    if (!kept_[i]) conns_[i]->stop();
    if (--left_ == 0) finish({});
  }

  void finish(std::error_code ec) {
    if (!aborted_) c_.untrack(this);
    if (aborted_) ec = aborted_;
    done_(ec, ec ? std::vector<node_status>{} : std::move(nodes_));
  }

  client_impl& c_;
  completion<std::vector<node_status>> done_;
  std::vector<node_status> nodes_;
  std::vector<std::shared_ptr<transport::connection>> conns_;
  std::vector<bool> kept_;  // conns_[i] is the router's: not ours to stop
  std::size_t left_ = 0;
  std::error_code aborted_;
};

}  // namespace

void start_ping_nodes(client_impl& c, completion<std::vector<node_status>> done) {
  c.post_or_shutdown(std::move(done), [&c](completion<std::vector<node_status>> complete) {
    std::make_shared<node_pings>(c, std::move(complete))->start();
  });
}

}  // namespace dlock::detail
