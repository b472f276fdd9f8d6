// dlock/reply.hpp — one RESP2 reply, as returned by client::execute.
//
// A plain value: simple strings, errors, integers, bulk strings, nil and (nested) arrays.
// Error replies keep their text; client::execute also reports them as an error_code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock {

class reply {
 public:
  enum class kind : std::uint8_t { nil, simple_string, error, integer, bulk_string, array };

  reply() = default;
  static reply make_nil() { return reply{}; }
  static reply make_simple(std::string s) { return reply{kind::simple_string, std::move(s)}; }
  static reply make_error(std::string s) { return reply{kind::error, std::move(s)}; }
  static reply make_bulk(std::string s) { return reply{kind::bulk_string, std::move(s)}; }
  static reply make_integer(std::int64_t v) {
    reply r;
    r.kind_ = kind::integer;
    r.integer_ = v;
    return r;
  }
  static reply make_array(std::vector<reply> elements) {
    reply r;
    r.kind_ = kind::array;
    r.elements_ = std::move(elements);
    return r;
  }

  kind type() const noexcept { return kind_; }
  bool is_nil() const noexcept { return kind_ == kind::nil; }
  bool is_error() const noexcept { return kind_ == kind::error; }
  bool is_integer() const noexcept { return kind_ == kind::integer; }
  bool is_string() const noexcept {
    return kind_ == kind::simple_string || kind_ == kind::bulk_string;
  }
  bool is_array() const noexcept { return kind_ == kind::array; }

  // Text of a simple string, bulk string or error; empty otherwise.
  const std::string& str() const noexcept { return text_; }
  std::string& str() noexcept { return text_; }
  // Value of an integer reply; 0 otherwise.
  std::int64_t integer() const noexcept { return integer_; }
  // The integer, or a string reply holding a decimal integer; nullopt otherwise.
  std::optional<std::int64_t> to_integer() const noexcept;
  const std::vector<reply>& elements() const noexcept { return elements_; }
  std::vector<reply>& elements() noexcept { return elements_; }

  friend bool operator==(const reply&, const reply&) = default;

 private:
  reply(kind k, std::string s) : kind_{k}, text_{std::move(s)} {}

  kind kind_ = kind::nil;
  std::int64_t integer_ = 0;
  std::string text_;
  std::vector<reply> elements_;
};

// A readable rendering for diagnostics and tests, e.g. `["message", "ch", (integer) 1]`.
std::string to_string(const reply& r);

}  // namespace dlock
