// make_tls_material (redis_server.hpp): a test CA, server and client certificates and an
// unrelated CA, made with the `openssl` command line.
#include <stdexcept>
#include <string>
#include <vector>

#include "support/posix_util.hpp"
#include "support/redis_server.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using posix::write_file;

void run_openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out;
  const int rc = run_program(argv, 60s, &out);
  if (rc != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    throw std::runtime_error("make_tls_material: `" + cmd + "` failed (" + std::to_string(rc) +
                             "):\n" + out);
  }
}

void make_key(const std::string& path) {
  run_openssl({"genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path});
}

// A self-signed CA certificate for `key`.
void make_ca(const std::string& dir, const std::string& key, const std::string& cert,
             const std::string& cn) {
  const std::string cnf = dir + "/ca.cnf";
  write_file(cnf,
             "[req]\n"
             "distinguished_name = dn\n"
             "[dn]\n"
             "[v3_ca]\n"
             "basicConstraints = critical,CA:TRUE\n"
             "keyUsage = critical,keyCertSign,cRLSign\n"
             "subjectKeyIdentifier = hash\n"
             "authorityKeyIdentifier = keyid:always\n");
  run_openssl({"req", "-x509", "-new", "-key", key, "-sha256", "-days", "2", "-subj", "/CN=" + cn,
               "-config", cnf, "-extensions", "v3_ca", "-out", cert});
}

// A leaf certificate for `key` signed by the CA, with the given subject alternative names.
void make_leaf(const std::string& dir, const std::string& name, const std::string& cn,
               const std::string& san, const std::string& ca_cert, const std::string& ca_key,
               int serial) {
  const std::string cnf = dir + "/" + name + ".cnf";
  std::string conf =
      "[req]\n"
      "distinguished_name = dn\n"
      "[dn]\n"
      "[ext]\n"
      "basicConstraints = CA:FALSE\n"
      "keyUsage = critical,digitalSignature,keyEncipherment\n"
      "extendedKeyUsage = serverAuth,clientAuth\n"
      "subjectKeyIdentifier = hash\n"
      "authorityKeyIdentifier = keyid,issuer\n";
  if (!san.empty()) conf += "subjectAltName = " + san + "\n";
  write_file(cnf, conf);
  const std::string csr = dir + "/" + name + ".csr";
  run_openssl({"req", "-new", "-key", dir + "/" + name + ".key", "-subj", "/CN=" + cn, "-config",
               cnf, "-out", csr});
  run_openssl({"x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-set_serial",
               std::to_string(serial), "-days", "2", "-sha256", "-extfile", cnf, "-extensions",
               "ext", "-out", dir + "/" + name + ".pem"});
}

}  // namespace

tls_material make_tls_material(const std::string& dir) {
  tls_material m;
  m.dir = dir;
  m.ca_cert = dir + "/ca.pem";
  m.ca_key = dir + "/ca.key";
  m.server_cert = dir + "/server.pem";
  m.server_key = dir + "/server.key";
  m.other_host_cert = dir + "/other_host.pem";
  m.other_host_key = dir + "/other_host.key";
  m.client_cert = dir + "/client.pem";
  m.client_key = dir + "/client.key";
  m.wrong_ca_cert = dir + "/wrong_ca.pem";
  m.wrong_ca_key = dir + "/wrong_ca.key";
  m.wrong_client_cert = dir + "/wrong_client.pem";
  m.wrong_client_key = dir + "/wrong_client.key";

  for (const auto* key : {&m.ca_key, &m.server_key, &m.other_host_key, &m.client_key,
                          &m.wrong_ca_key, &m.wrong_client_key}) {
    make_key(*key);
  }
  make_ca(dir, m.ca_key, m.ca_cert, "dlock test CA");
  make_ca(dir, m.wrong_ca_key, m.wrong_ca_cert, "dlock unrelated test CA");
  make_leaf(dir, "server", "localhost", "IP:127.0.0.1,DNS:localhost", m.ca_cert, m.ca_key, 1001);
  make_leaf(dir, "other_host", "elsewhere.invalid", "DNS:elsewhere.invalid", m.ca_cert, m.ca_key,
            1002);
  make_leaf(dir, "client", "dlock test client", "", m.ca_cert, m.ca_key, 1003);
  make_leaf(dir, "wrong_client", "dlock wrong client", "", m.wrong_ca_cert, m.wrong_ca_key, 1004);
  return m;
}

}  // namespace dlock::test
