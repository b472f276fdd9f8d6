#include "transport/tls.hpp"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <asio/ip/address.hpp>

#include "dlock/error.hpp"

namespace dlock::transport {

std::shared_ptr<asio::ssl::context> make_tls_context(const tls_options& opts, std::error_code& ec,
                                                     std::string& reason) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  auto fail = [&](std::string why, const asio::error_code& e) {
    ec = errc::tls_config_invalid;
    reason = std::move(why) + ": " + e.message();
    return nullptr;
  };
  asio::error_code e;
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1,
                   e);
  ctx->set_verify_mode(asio::ssl::verify_peer, e);
  if (opts.ca_file.empty()) {
    ctx->set_default_verify_paths(e);
    if (e) return fail("cannot load the system trust store", e);
  } else if (ctx->load_verify_file(opts.ca_file, e); e) {
    return fail("cannot load CA file '" + opts.ca_file + "'", e);
  }
  if (!opts.cert_file.empty() && (ctx->use_certificate_chain_file(opts.cert_file, e), e)) {
    return fail("cannot load certificate '" + opts.cert_file + "'", e);
  }
  if (!opts.key_file.empty() &&
      (ctx->use_private_key_file(opts.key_file, asio::ssl::context::pem, e), e)) {
    return fail("cannot load private key '" + opts.key_file + "'", e);
  }
  ec.clear();
  return ctx;
}

void expect_peer_name(asio::ssl::stream<asio::ip::tcp::socket>& stream, const std::string& name) {
  SSL* ssl = stream.native_handle();
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  asio::error_code e;
  asio::ip::make_address(name, e);
  if (!e) {
    X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
  } else {
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
    // SSL_set_tlsext_host_name, without the macro's C cast.
    SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             const_cast<char*>(name.c_str()));
  }
}

std::error_code classify_handshake_error(asio::ssl::stream<asio::ip::tcp::socket>& stream,
                                         std::error_code ec) {
  if (!ec) return ec;
  switch (SSL_get_verify_result(stream.native_handle())) {
    case X509_V_OK:
      return errc::tls_handshake_failed;
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
    case X509_V_ERR_EMAIL_MISMATCH:
      return errc::tls_host_mismatch;
    default:
      return errc::tls_verify_failed;
  }
}

}  // namespace dlock::transport
