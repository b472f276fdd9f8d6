// A minimal JSON reader, enough for `dlock status --json` (cli_status_test.cpp): objects keep
// their members in document order; numbers are kept as written; \u escapes only for ASCII.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace dlock::test::cli {

struct json {
  enum class kind { null, boolean, number, string, array, object };
  kind type = kind::null;
  bool boolean = false;
  std::string text;  // a number as written, or a string's value
  std::vector<json> items;
  std::vector<std::pair<std::string, json>> members;  // in document order

  const json& at(const std::string& key) const {
    for (const auto& [k, v] : members) {
      if (k == key) return v;
    }
    throw std::runtime_error("no key '" + key + "'");
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const auto& m : members) out.push_back(m.first);
    return out;
  }
  // An integer number (no fraction or exponent); throws otherwise.
  std::int64_t integer() const {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (type != kind::number || ec != std::errc{} || end != text.data() + text.size()) {
      throw std::runtime_error("not an integer: '" + text + "'");
    }
    return v;
  }
};

class json_reader {
 public:
  explicit json_reader(std::string_view s) : s_{s} {}

  json document() {
    json v = value();
    skip_space();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("bad JSON at offset " + std::to_string(i_) + ": " + what);
  }
  void skip_space() {
    while (i_ < s_.size() && std::string_view{" \t\r\n"}.find(s_[i_]) != std::string_view::npos) {
      ++i_;
    }
  }
  char peek() {
    skip_space();
    if (i_ == s_.size()) fail("unexpected end");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string{"expected '"} + c + "'");
    ++i_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  json value() {
    json v;
    const char c = peek();
    if (c == '{') {
      v.type = json::kind::object;
      ++i_;
      if (peek() == '}') {
        ++i_;
        return v;
      }
      for (;;) {
        if (peek() != '"') fail("expected a key");
        auto key = string();
        expect(':');
        v.members.emplace_back(std::move(key), value());
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.type = json::kind::array;
      ++i_;
      if (peek() == ']') {
        ++i_;
        return v;
      }
      for (;;) {
        v.items.push_back(value());
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.type = json::kind::string;
      v.text = string();
      return v;
    }
    if (literal("true") || literal("false")) {
      v.type = json::kind::boolean;
      v.boolean = s_[i_ - 4] == 't';
      return v;
    }
    if (literal("null")) return v;
    if (c == '-' || (c >= '0' && c <= '9')) {
      v.type = json::kind::number;
      const auto start = i_;
      constexpr std::string_view number_chars{"+-.eE0123456789"};
      while (i_ < s_.size() && number_chars.find(s_[i_]) != std::string_view::npos) ++i_;
      v.text = std::string{s_.substr(start, i_ - start)};
      return v;
    }
    fail("unexpected character");
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          unsigned code = 0;
          const auto hex = s_.substr(i_, 4);
          const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), code, 16);
          if (hex.size() != 4 || ec != std::errc{} || end != hex.data() + 4) fail("bad \\u");
          i_ += 4;
          if (code >= 0x80) fail("non-ASCII \\u escapes are not supported here");
          out.push_back(static_cast<char>(code));
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

inline json parse_json(const std::string& text) { return json_reader{text}.document(); }

}  // namespace dlock::test::cli
