// RESP2 request encoding: every command is an array of bulk strings.
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace dlock::resp {

// Appends `*N\r\n` then `$len\r\narg\r\n` per argument to `out`.
void append_command(std::string& out, std::span<const std::string_view> args);
void append_command(std::string& out, std::span<const std::string> args);
inline void append_command(std::string& out, std::initializer_list<std::string_view> args) {
  append_command(out, std::span<const std::string_view>{args.begin(), args.size()});
}

template <class Args>
std::string encode_command(const Args& args) {
  std::string out;
  append_command(out, args);
  return out;
}
inline std::string encode_command(std::initializer_list<std::string_view> args) {
  std::string out;
  append_command(out, args);
  return out;
}

}  // namespace dlock::resp
