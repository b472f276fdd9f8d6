// resp::append_command / encode_command: RESP2 arrays of bulk strings, byte for byte.
#include "resp/encoder.hpp"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace std::string_literals;
using namespace std::string_view_literals;
namespace resp = dlock::resp;

TEST(encoder, get_command) {
  EXPECT_EQ(resp::encode_command({"GET", "k"}), "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
}

TEST(encoder, single_argument) {
  EXPECT_EQ(resp::encode_command({"PING"}), "*1\r\n$4\r\nPING\r\n");
}

TEST(encoder, multi_digit_lengths) {
  const std::string value(12, 'v');
  EXPECT_EQ(resp::encode_command({"SET", "key", value, "PX", "30000"}),
            "*5\r\n$3\r\nSET\r\n$3\r\nkey\r\n$12\r\n" + value + "\r\n$2\r\nPX\r\n$5\r\n30000\r\n");
}

TEST(encoder, empty_argument) {
  EXPECT_EQ(resp::encode_command({"SET", "k", ""}), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
}

TEST(encoder, no_arguments_is_an_empty_array) {
  const std::vector<std::string_view> none;
  EXPECT_EQ(resp::encode_command(none), "*0\r\n");
}

TEST(encoder, binary_arguments_are_length_prefixed_verbatim) {
  const auto binary = "a\r\nb\0c"s;  // CR, LF and NUL inside
  ASSERT_EQ(binary.size(), 6u);
  const auto out = resp::encode_command({"SET"sv, std::string_view{binary}});
  EXPECT_EQ(out, "*2\r\n$3\r\nSET\r\n$6\r\na\r\nb\0c\r\n"s);
  EXPECT_EQ(out.size(), 25u);
}

TEST(encoder, argument_of_only_crlf) {
  EXPECT_EQ(resp::encode_command({"\r\n"}), "*1\r\n$2\r\n\r\n\r\n");
}

TEST(encoder, large_argument) {
  const std::string big(1024 * 1024, 'x');
  const auto out = resp::encode_command({"SET", "k", big});
  const std::string head = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048576\r\n";
  ASSERT_EQ(out.size(), head.size() + big.size() + 2);
  EXPECT_EQ(out.compare(0, head.size(), head), 0);
  EXPECT_EQ(out.compare(head.size(), big.size(), big), 0);
  EXPECT_EQ(out.substr(out.size() - 2), "\r\n");
}

TEST(encoder, append_keeps_existing_bytes_and_concatenates_commands) {
  std::string out = "prefix";
  resp::append_command(out, {"GET", "a"});
  resp::append_command(out, {"DEL", "b", "c"});
  resp::append_command(out, {"PING"});
  EXPECT_EQ(out,
            "prefix"
            "*2\r\n$3\r\nGET\r\n$1\r\na\r\n"
            "*3\r\n$3\r\nDEL\r\n$1\r\nb\r\n$1\r\nc\r\n"
            "*1\r\n$4\r\nPING\r\n");
}

TEST(encoder, string_span_overload) {
  const std::vector<std::string> args{"EVALSHA", "abc", "1", "lock:{x}", ""};
  std::string out;
  resp::append_command(out, std::span<const std::string>{args});
  const auto expected =
      "*5\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$8\r\nlock:{x}\r\n$0\r\n\r\n"s;
  EXPECT_EQ(out, expected);
  EXPECT_EQ(resp::encode_command(args), expected);
}

TEST(encoder, string_view_span_overload) {
  const std::array<std::string_view, 3> args{"HGET", "h", "f"};
  std::string out;
  resp::append_command(out, std::span<const std::string_view>{args});
  EXPECT_EQ(out, "*3\r\n$4\r\nHGET\r\n$1\r\nh\r\n$1\r\nf\r\n");
}

TEST(encoder, string_and_string_view_overloads_agree) {
  const std::vector<std::string> owned{"SET", "k\r\n", std::string(300, 'z')};
  const std::vector<std::string_view> views(owned.begin(), owned.end());
  EXPECT_EQ(resp::encode_command(owned), resp::encode_command(views));
}

}  // namespace
