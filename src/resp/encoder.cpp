#include "resp/encoder.hpp"

#include <charconv>

namespace dlock::resp {
namespace {

void append_header(std::string& out, char marker, std::size_t n) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
  (void)ec;  // 24 digits always suffice for size_t
  out.push_back(marker);
  out.append(digits, end);
  out.append("\r\n");
}

template <class Range>
void append_all(std::string& out, const Range& args) {
  std::size_t size = 16;
  for (const auto& a : args) size += a.size() + 16;
  out.reserve(out.size() + size);
  append_header(out, '*', args.size());
  for (const auto& a : args) {
    append_header(out, '$', a.size());
    out.append(a.data(), a.size());
    out.append("\r\n");
  }
}

}  // namespace

void append_command(std::string& out, std::span<const std::string_view> args) {
  append_all(out, args);
}
void append_command(std::string& out, std::span<const std::string> args) { append_all(out, args); }

}  // namespace dlock::resp
