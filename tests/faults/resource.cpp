#include "resource.hpp"

#include "dlock/error.hpp"

namespace dlock::faults {

namespace {

// KEYS[1] fence (highest token accepted), KEYS[2] fenced counter; ARGV[1] token;
// returns {1 accepted | 0 refused, value}.
constexpr const char* fenced_read_lua = R"(
local fence = tonumber(redis.call('GET', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
local value = tonumber(redis.call('GET', KEYS[2]) or '0')
if token < fence then return {0, value} end
redis.call('SET', KEYS[1], ARGV[1])
return {1, value}
)";

// KEYS as above; ARGV[1] token, ARGV[2] new value; returns {1 | 0, value replaced (or found)}.
constexpr const char* fenced_write_lua = R"(
local fence = tonumber(redis.call('GET', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
local value = tonumber(redis.call('GET', KEYS[2]) or '0')
if token < fence then return {0, value} end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return {1, value}
)";

std::int64_t integer_of(const dlock::reply& r) { return r.to_integer().value_or(0); }

}  // namespace

resource::resource(dlock::client& c, std::string name) : client_{c}, name_{std::move(name)} {}

fenced_result resource::fenced(const char* script, std::uint64_t token, std::int64_t value,
                               std::error_code& ec) {
  auto r = client_.execute({"EVAL", script, "2", fence_key(name_), fenced_key(name_),
                            std::to_string(token), std::to_string(value)},
                           ec);
  if (ec) return {};
  if (!r.is_array() || r.elements().size() != 2) {
    ec = dlock::errc::protocol_error;
    return {};
  }
  return {integer_of(r.elements()[0]) == 1, integer_of(r.elements()[1])};
}

fenced_result resource::fenced_read(std::uint64_t token, std::error_code& ec) {
  return fenced(fenced_read_lua, token, 0, ec);
}

fenced_result resource::fenced_write(std::uint64_t token, std::int64_t value, std::error_code& ec) {
  return fenced(fenced_write_lua, token, value, ec);
}

std::int64_t resource::plain_get(std::error_code& ec) {
  auto r = client_.execute({"GET", plain_key(name_)}, ec);
  return ec ? 0 : integer_of(r);
}

std::int64_t resource::plain_set(std::int64_t value, std::error_code& ec) {
  auto r = client_.execute({"SET", plain_key(name_), std::to_string(value), "GET"}, ec);
  return ec ? 0 : integer_of(r);
}

}  // namespace dlock::faults
