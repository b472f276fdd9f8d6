// TLS for rediss://: the client-side context (CA, client certificate, TLS >= 1.2) and the
// per-connection setup that makes OpenSSL verify the server's host name or IP address as well
// as its chain. hiredis-based tools leave the name unchecked; we do not.
#pragma once

#include <asio/ip/tcp.hpp>
#include <asio/ssl.hpp>
#include <memory>
#include <string>
#include <system_error>

#include "dlock/config.hpp"

namespace dlock::transport {

// Builds the context from `opts`; errc::tls_config_invalid (with `reason`) if a file is unusable.
std::shared_ptr<asio::ssl::context> make_tls_context(const tls_options& opts, std::error_code& ec,
                                                     std::string& reason);

// Sets SNI (for names) and the expected name or IP on a stream before its handshake.
void expect_peer_name(asio::ssl::stream<asio::ip::tcp::socket>& stream, const std::string& name);

// Maps a failed handshake to tls_host_mismatch, tls_verify_failed or tls_handshake_failed.
std::error_code classify_handshake_error(asio::ssl::stream<asio::ip::tcp::socket>& stream,
                                         std::error_code ec);

}  // namespace dlock::transport
