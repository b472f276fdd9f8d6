// client::ping_nodes: a PING to every node of the deployment, each answer or error reported
// (include/dlock/client.hpp has the contract).
#pragma once

#include <vector>

#include "dlock/detail/completion.hpp"
#include "dlock/node_status.hpp"

namespace dlock::detail {

class client_impl;

// Thread-safe; `done` runs on the I/O thread (or, after shutdown, on a system thread).
void start_ping_nodes(client_impl& c, completion<std::vector<node_status>> done);

}  // namespace dlock::detail
