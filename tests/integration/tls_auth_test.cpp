// TLS and authentication against real servers: good certificates accepted; a wrong CA, a
// certificate for another host and unusable files rejected with typed errors; passwords and ACL
// users accepted, wrong ones rejected with typed errors and promptly.
#include <gtest/gtest.h>

#include <filesystem>

#include "dlock/client.hpp"
#include "support/redis_server.hpp"

using namespace std::chrono_literals;
using dlock::errc;

namespace {

class tls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(dlock::test::make_temp_dir("dlock-tls-"));
    material_ = new dlock::test::tls_material(dlock::test::make_tls_material(*dir_));
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete material_;
    delete dir_;
  }
  static dlock::test::redis_server_options server(const std::string& cert, const std::string& key) {
    dlock::test::redis_server_options o;
    o.tls = true;
    o.tls_cert_file = cert;
    o.tls_key_file = key;
    o.tls_ca_file = material_->ca_cert;
    return o;
  }
  static std::string uri(const dlock::test::redis_server& srv, const std::string& ca,
                         const std::string& extra = "") {
    return "rediss://127.0.0.1:" + std::to_string(srv.port()) + "?connect_timeout=2s&ca=" + ca +
           "&cert=" + material_->client_cert + "&key=" + material_->client_key + extra;
  }
  static std::error_code ping(const std::string& u) {
    dlock::client c{dlock::config::from_uri(u)};
    std::error_code ec;
    c.ping(ec);
    return ec;
  }

  static std::string* dir_;
  static dlock::test::tls_material* material_;
};
std::string* tls::dir_ = nullptr;
dlock::test::tls_material* tls::material_ = nullptr;

TEST_F(tls, accepts_a_certificate_for_the_dialled_address) {
  dlock::test::redis_server srv{server(material_->server_cert, material_->server_key)};
  EXPECT_FALSE(ping(uri(srv, material_->ca_cert)));
  // By name too: the certificate carries DNS:localhost.
  auto by_name = "rediss://localhost:" + std::to_string(srv.port()) + "?ca=" + material_->ca_cert +
                 "&cert=" + material_->client_cert + "&key=" + material_->client_key;
  EXPECT_FALSE(ping(by_name));
}

TEST_F(tls, rejects_a_server_signed_by_another_ca) {
  dlock::test::redis_server srv{server(material_->server_cert, material_->server_key)};
  EXPECT_EQ(ping(uri(srv, material_->wrong_ca_cert)), errc::tls_verify_failed);
}

// The chain is valid, but the certificate names elsewhere.invalid while we dial 127.0.0.1:
// hiredis-based tools accept this; dlock must not.
TEST_F(tls, rejects_a_certificate_for_another_host) {
  dlock::test::redis_server srv{server(material_->other_host_cert, material_->other_host_key)};
  EXPECT_EQ(ping(uri(srv, material_->ca_cert)), errc::tls_host_mismatch);
  // Telling the client which name to expect (sni) makes the same certificate acceptable.
  EXPECT_FALSE(ping(uri(srv, material_->ca_cert, "&sni=elsewhere.invalid")));
}

TEST_F(tls, unusable_files_are_a_typed_error_at_construction) {
  auto bad = "rediss://127.0.0.1:1?ca=" + *dir_ + "/missing.pem";
  try {
    dlock::client c{dlock::config::from_uri(bad)};
    FAIL() << "expected lock_error";
  } catch (const dlock::lock_error& e) {
    EXPECT_EQ(e.code(), errc::tls_config_invalid);
  }
  std::error_code ec;
  dlock::client c{dlock::config::from_uri(bad), ec};
  EXPECT_EQ(ec, errc::tls_config_invalid);
  std::error_code call_ec;
  c.ping(call_ec);
  EXPECT_EQ(call_ec, errc::tls_config_invalid) << "calls on an unusable client report why";
}

TEST_F(tls, plain_client_to_a_tls_port_does_not_hang) {
  dlock::test::redis_server srv{server(material_->server_cert, material_->server_key)};
  auto cfg = dlock::config::from_uri("redis://127.0.0.1:" + std::to_string(srv.port()) +
                                     "?connect_timeout=500ms&timeout=1s");
  dlock::client c{cfg};
  std::error_code ec;
  const auto start = std::chrono::steady_clock::now();
  c.ping(ec);
  EXPECT_TRUE(ec) << "a TLS server does not speak plain RESP";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(auth, password_server_accepts_the_password_and_rejects_others) {
  dlock::test::redis_server_options o;
  o.requirepass = "s3cret";
  dlock::test::redis_server srv{o};
  const auto base = "redis://127.0.0.1:" + std::to_string(srv.port());

  dlock::client good{
      dlock::config::from_uri("redis://:s3cret@127.0.0.1:" + std::to_string(srv.port()))};
  EXPECT_EQ(good.execute({"ECHO", "in"}).str(), "in");

  std::error_code ec;
  dlock::client wrong{
      dlock::config::from_uri("redis://:nope@127.0.0.1:" + std::to_string(srv.port()))};
  const auto start = std::chrono::steady_clock::now();
  wrong.ping(ec);
  EXPECT_EQ(ec, errc::auth_failed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << "fails fast, not at the timeout";

  dlock::client none{dlock::config::from_uri(base)};
  none.ping(ec);
  EXPECT_EQ(ec, errc::no_auth);
}

TEST(auth, acl_user_with_its_password_works_and_a_wrong_one_is_typed) {
  auto o = dlock::test::redis_server_options::with_app_user("app-pass", "~app:* &* +@all");
  dlock::test::redis_server srv{o};
  const auto port = std::to_string(srv.port());

  dlock::client app{dlock::config::from_uri("redis://app:app-pass@127.0.0.1:" + port)};
  EXPECT_EQ(app.execute({"SET", "app:k", "v"}).str(), "OK");
  std::error_code ec;
  app.execute({"SET", "other:k", "v"}, ec);
  EXPECT_EQ(ec, errc::no_permission) << "key outside the user's pattern";

  dlock::client wrong{dlock::config::from_uri("redis://app:bad@127.0.0.1:" + port)};
  wrong.ping(ec);
  EXPECT_EQ(ec, errc::auth_failed);

  dlock::client nobody{dlock::config::from_uri("redis://ghost:pw@127.0.0.1:" + port)};
  nobody.ping(ec);
  EXPECT_EQ(ec, errc::auth_failed);
}

}  // namespace
