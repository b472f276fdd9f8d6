// config::from_uri's query parameters (config.hpp lists them).
#include <string>
#include <utility>

#include "config_text.hpp"

namespace dlock::detail::uri {
namespace {

bool set_duration(std::chrono::milliseconds& field, std::string_view key, std::string_view value,
                  bool allow_zero, parse_state& st) {
  std::error_code ec;
  auto d = parse_duration(value, ec);
  if (ec || (!allow_zero && d.count() == 0)) {
    return st.fail("bad duration for '" + std::string(key) + "': '" + std::string(value) + "'");
  }
  field = d;
  return true;
}

}  // namespace

bool parse_parameter(std::string_view key, std::string_view raw, config& cfg, parse_state& st) {
  std::string value;
  if (!percent_decode(raw, value))
    return st.fail("bad percent-encoding in parameter " + std::string(key));
  if (key == "connect_timeout") return set_duration(cfg.connect_timeout, key, value, false, st);
  if (key == "timeout") return set_duration(cfg.command_timeout, key, value, false, st);
  if (key == "health_check") return set_duration(cfg.health_check_interval, key, value, true, st);
  if (key == "reconnect_min") return set_duration(cfg.reconnect_min, key, value, false, st);
  if (key == "reconnect_max") return set_duration(cfg.reconnect_max, key, value, false, st);
  if (key == "watchdog") return set_duration(cfg.watchdog_lease, key, value, false, st);
  if (key == "recheck") return set_duration(cfg.wait_recheck, key, value, false, st);
  if (key == "max_name") {
    std::uint64_t n = 0;
    if (!parse_uint(value, n) || n == 0 || n > 65536) return st.fail("max_name must be 1..65536");
    cfg.max_name_length = static_cast<std::size_t>(n);
    return true;
  }
  if (key == "name") {
    cfg.client_name = std::move(value);
    return true;
  }
  if (key == "sentinel_user" || key == "sentinel_password") {
    (key == "sentinel_user" ? cfg.sentinel_user : cfg.sentinel_password) = std::move(value);
    return true;
  }
  if (key == "wait_replicas") {
    if (value == "auto") {
      cfg.wait_replicas = config::online_replicas;
      return true;
    }
    std::uint64_t n = 0;
    if (!parse_uint(value, n) || n > 64) return st.fail("wait_replicas must be 0..64 or auto");
    cfg.wait_replicas = static_cast<unsigned>(n);
    return true;
  }
  if (key == "wait_timeout") return set_duration(cfg.wait_timeout, key, value, false, st);
  if (key == "on_shortfall") {
    if (value != "fail" && value != "accept") {
      return st.fail("on_shortfall must be fail or accept, got '" + value + "'");
    }
    cfg.on_shortfall =
        value == "fail" ? config::shortfall_policy::fail : config::shortfall_policy::accept;
    return true;
  }
  if (key == "fencing") {
    if (value != "on" && value != "off")
      return st.fail("fencing must be on or off, got '" + value + "'");
    cfg.fencing = value == "on" ? config::fencing_mode::on : config::fencing_mode::off;
    return true;
  }
  std::string* file = key == "ca"     ? &cfg.tls.ca_file
                      : key == "cert" ? &cfg.tls.cert_file
                      : key == "key"  ? &cfg.tls.key_file
                      : key == "sni"  ? &cfg.tls.server_name
                                      : nullptr;
  if (file == nullptr) return st.fail("unknown parameter '" + std::string(key) + "'");
  if (!cfg.tls.enabled) {
    return st.fail("parameter '" + std::string(key) +
                   "' needs rediss://, rediss+cluster:// or rediss+sentinel://");
  }
  if (value.empty()) return st.fail("empty value for '" + std::string(key) + "'");
  *file = std::move(value);
  return true;
}

}  // namespace dlock::detail::uri
