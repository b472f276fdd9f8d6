// resp::reader: RESP2 replies from arbitrarily split or coalesced bytes; dlock::reply helpers.
#include "resp/reader.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/reply.hpp"
#include "reply_printer.hpp"

namespace {

using dlock::reply;
using namespace std::string_literals;

// Feeds `bytes` at once and returns the single reply they hold; fails if not exactly one.
reply read_one(std::string_view bytes) {
  dlock::resp::reader rd;
  rd.feed(bytes);
  std::error_code ec;
  auto r = rd.next(ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(r.has_value()) << "incomplete: " << bytes;
  auto more = rd.next(ec);
  EXPECT_FALSE(more.has_value());
  EXPECT_FALSE(ec);
  return r.value_or(reply{});
}

reply bulk(std::string s) { return reply::make_bulk(std::move(s)); }
reply integer(std::int64_t v) { return reply::make_integer(v); }
reply array(std::vector<reply> e) { return reply::make_array(std::move(e)); }

TEST(reader, simple_string) {
  const auto r = read_one("+OK\r\n");
  EXPECT_EQ(r.type(), reply::kind::simple_string);
  EXPECT_TRUE(r.is_string());
  EXPECT_EQ(r.str(), "OK");
}

TEST(reader, error) {
  const auto r = read_one("-ERR x\r\n");
  EXPECT_EQ(r.type(), reply::kind::error);
  EXPECT_TRUE(r.is_error());
  EXPECT_FALSE(r.is_string());
  EXPECT_EQ(r.str(), "ERR x");
}

TEST(reader, integers) {
  const auto pos = read_one(":42\r\n");
  EXPECT_TRUE(pos.is_integer());
  EXPECT_EQ(pos.integer(), 42);
  const auto neg = read_one(":-7\r\n");
  EXPECT_TRUE(neg.is_integer());
  EXPECT_EQ(neg.integer(), -7);
  EXPECT_EQ(read_one(":0\r\n").integer(), 0);
  EXPECT_EQ(read_one(":9223372036854775807\r\n").integer(),
            std::numeric_limits<std::int64_t>::max());
}

TEST(reader, bulk_string) {
  const auto r = read_one("$5\r\nhello\r\n");
  EXPECT_EQ(r.type(), reply::kind::bulk_string);
  EXPECT_EQ(r.str(), "hello");
}

TEST(reader, bulk_string_with_binary_content) {
  const auto r = read_one("$6\r\na\r\nb\0c\r\n"s);
  EXPECT_EQ(r.str(), "a\r\nb\0c"s);
}

TEST(reader, empty_bulk_string_is_not_nil) {
  const auto r = read_one("$0\r\n\r\n");
  EXPECT_EQ(r.type(), reply::kind::bulk_string);
  EXPECT_FALSE(r.is_nil());
  EXPECT_EQ(r.str(), "");
}

TEST(reader, nil_bulk_string) {
  const auto r = read_one("$-1\r\n");
  EXPECT_TRUE(r.is_nil());
  EXPECT_EQ(r, reply::make_nil());
}

TEST(reader, empty_array) {
  const auto r = read_one("*0\r\n");
  EXPECT_TRUE(r.is_array());
  EXPECT_TRUE(r.elements().empty());
}

TEST(reader, nil_array) {
  const auto r = read_one("*-1\r\n");
  EXPECT_TRUE(r.is_nil());
  EXPECT_FALSE(r.is_array());
}

TEST(reader, nested_arrays_three_levels) {
  const auto r = read_one("*2\r\n*2\r\n*1\r\n:1\r\n$1\r\na\r\n+x\r\n");
  EXPECT_EQ(r, array({array({array({integer(1)}), bulk("a")}), reply::make_simple("x")}));
  ASSERT_EQ(r.elements().size(), 2u);
  ASSERT_EQ(r.elements()[0].elements().size(), 2u);
  ASSERT_EQ(r.elements()[0].elements()[0].elements().size(), 1u);
  EXPECT_EQ(r.elements()[0].elements()[0].elements()[0].integer(), 1);
}

TEST(reader, array_of_mixed_kinds) {
  const auto r =
      read_one("*7\r\n+OK\r\n-WRONGTYPE bad\r\n:5\r\n$3\r\nbar\r\n$-1\r\n*-1\r\n*1\r\n$0\r\n\r\n");
  ASSERT_TRUE(r.is_array());
  const auto& e = r.elements();
  ASSERT_EQ(e.size(), 7u);
  EXPECT_EQ(e[0], reply::make_simple("OK"));
  EXPECT_EQ(e[1], reply::make_error("WRONGTYPE bad"));
  EXPECT_EQ(e[2], integer(5));
  EXPECT_EQ(e[3], bulk("bar"));
  EXPECT_TRUE(e[4].is_nil());
  EXPECT_TRUE(e[5].is_nil());
  EXPECT_EQ(e[6], array({bulk("")}));
}

TEST(reader, pubsub_message_shape) {
  const auto r = read_one("*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n");
  EXPECT_EQ(r, array({bulk("message"), bulk("ch"), bulk("0")}));
}

TEST(reader, nothing_fed_means_no_reply) {
  dlock::resp::reader rd;
  std::error_code ec = dlock::errc::timeout;
  EXPECT_FALSE(rd.next(ec).has_value());
  EXPECT_FALSE(ec);
  rd.feed("");
  EXPECT_FALSE(rd.next(ec).has_value());
  EXPECT_FALSE(ec);
}

// Feeds `bytes` one byte at a time: no reply until the last byte, then exactly `expected`.
void expect_byte_by_byte(std::string_view bytes, const reply& expected) {
  dlock::resp::reader rd;
  std::error_code ec;
  for (std::size_t i = 0; i + 1 < bytes.size(); ++i) {
    rd.feed(bytes.substr(i, 1));
    auto r = rd.next(ec);
    ASSERT_FALSE(ec) << "at byte " << i;
    ASSERT_FALSE(r.has_value()) << "reply before the last byte, at byte " << i << " of " << bytes;
  }
  rd.feed(bytes.substr(bytes.size() - 1));
  auto r = rd.next(ec);
  ASSERT_FALSE(ec);
  ASSERT_TRUE(r.has_value()) << bytes;
  EXPECT_EQ(*r, expected) << to_string(*r);
  EXPECT_FALSE(rd.next(ec).has_value());
}

TEST(reader, split_byte_by_byte) {
  expect_byte_by_byte("+OK\r\n", reply::make_simple("OK"));
  expect_byte_by_byte("-ERR x\r\n", reply::make_error("ERR x"));
  expect_byte_by_byte(":-12345\r\n", integer(-12345));
  expect_byte_by_byte("$10\r\n0123456789\r\n", bulk("0123456789"));
  expect_byte_by_byte("$0\r\n\r\n", bulk(""));
  expect_byte_by_byte("$-1\r\n", reply::make_nil());
  expect_byte_by_byte("*0\r\n", array({}));
  expect_byte_by_byte(
      "*3\r\n$1\r\na\r\n*2\r\n:1\r\n$-1\r\n-E r\r\n",
      array({bulk("a"), array({integer(1), reply::make_nil()}), reply::make_error("E r")}));
}

TEST(reader, coalesced_replies_drain_in_order) {
  dlock::resp::reader rd;
  rd.feed("+OK\r\n:1\r\n$3\r\nfoo\r\n*2\r\n:1\r\n:2\r\n-ERR no\r\n$-1\r\n$7\r\npar");
  std::error_code ec;
  std::vector<reply> got;
  while (auto r = rd.next(ec)) got.push_back(std::move(*r));
  ASSERT_FALSE(ec);
  EXPECT_EQ(got, (std::vector<reply>{reply::make_simple("OK"), integer(1), bulk("foo"),
                                     array({integer(1), integer(2)}), reply::make_error("ERR no"),
                                     reply::make_nil()}));
  // The partial bulk at the end completes with the next feed.
  rd.feed("tial\r\n");
  auto last = rd.next(ec);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(*last, bulk("partial"));
  EXPECT_FALSE(rd.next(ec).has_value());
}

TEST(reader, large_bulk_split_in_chunks) {
  std::string payload(1024 * 1024, '\0');
  for (std::size_t i = 0; i < payload.size(); ++i) {
    payload[i] = static_cast<char>('a' + static_cast<char>(i % 26));
  }
  const std::string wire = "$" + std::to_string(payload.size()) + "\r\n" + payload + "\r\n+OK\r\n";
  dlock::resp::reader rd;
  std::error_code ec;
  constexpr std::size_t chunk = 4093;  // not a divisor of anything in particular
  std::optional<reply> got;
  std::size_t fed = 0;
  while (fed < wire.size() && !got) {
    const auto n = std::min(chunk, wire.size() - fed);
    rd.feed(std::string_view{wire}.substr(fed, n));
    fed += n;
    got = rd.next(ec);
    ASSERT_FALSE(ec);
  }
  ASSERT_TRUE(got.has_value());
  EXPECT_GE(fed, payload.size());  // not complete before the payload was all there
  ASSERT_EQ(got->type(), reply::kind::bulk_string);
  EXPECT_EQ(got->str().size(), payload.size());
  EXPECT_TRUE(got->str() == payload);
  rd.feed(std::string_view{wire}.substr(fed));
  auto ok = rd.next(ec);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(*ok, reply::make_simple("OK"));
}

TEST(reader, protocol_error_on_unknown_type_byte) {
  dlock::resp::reader rd;
  rd.feed("?garbage\r\n");
  std::error_code ec;
  EXPECT_FALSE(rd.next(ec).has_value());
  EXPECT_EQ(ec, dlock::errc::protocol_error);
}

TEST(reader, protocol_error_on_malformed_lengths_and_integers) {
  for (std::string_view bad :
       {"$abc\r\n", ":abc\r\n", "*abc\r\n", "$-5\r\n", ":1x\r\n", "*1\r\n$x\r\n"}) {
    dlock::resp::reader rd;
    rd.feed(bad);
    std::error_code ec;
    EXPECT_FALSE(rd.next(ec).has_value()) << bad;
    EXPECT_EQ(ec, dlock::errc::protocol_error) << bad;
  }
}

TEST(reader, protocol_error_after_good_replies) {
  dlock::resp::reader rd;
  rd.feed("+OK\r\n!oops\r\n");
  std::error_code ec;
  auto first = rd.next(ec);
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(ec);
  EXPECT_FALSE(rd.next(ec).has_value());
  EXPECT_EQ(ec, dlock::errc::protocol_error);
}

TEST(reader, protocol_error_inside_an_array_frees_the_partial_reply) {
  dlock::resp::reader rd;
  rd.feed("*3\r\n$5\r\nhello\r\n*2\r\n:1\r\n?\r\n");
  std::error_code ec;
  EXPECT_FALSE(rd.next(ec).has_value());
  EXPECT_EQ(ec, dlock::errc::protocol_error);
}

TEST(reader, stays_in_error) {
  dlock::resp::reader rd;
  rd.feed("?garbage\r\n");
  std::error_code ec;
  EXPECT_FALSE(rd.next(ec).has_value());
  EXPECT_EQ(ec, dlock::errc::protocol_error);
  rd.feed("+OK\r\n");
  EXPECT_FALSE(rd.next(ec).has_value());
  EXPECT_EQ(ec, dlock::errc::protocol_error);
  EXPECT_FALSE(rd.next(ec).has_value());
  EXPECT_EQ(ec, dlock::errc::protocol_error);
}

TEST(reader, reset_makes_it_usable_again) {
  dlock::resp::reader rd;
  rd.feed("?garbage\r\n");
  std::error_code ec;
  EXPECT_FALSE(rd.next(ec).has_value());
  ASSERT_EQ(ec, dlock::errc::protocol_error);
  rd.reset();
  rd.feed("+OK\r\n");
  auto r = rd.next(ec);
  EXPECT_FALSE(ec);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, reply::make_simple("OK"));
}

TEST(reader, reset_discards_a_partial_reply) {
  dlock::resp::reader rd;
  rd.feed("*2\r\n$3\r\nfoo\r\n$10\r\nabc");
  std::error_code ec;
  EXPECT_FALSE(rd.next(ec).has_value());
  EXPECT_FALSE(ec);
  rd.reset();
  rd.feed(":7\r\n");
  auto r = rd.next(ec);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, integer(7));
}

TEST(reader, destroyed_with_a_partial_reply_does_not_leak) {
  dlock::resp::reader rd;
  rd.feed("*3\r\n*2\r\n$3\r\nfoo\r\n");
  std::error_code ec;
  EXPECT_FALSE(rd.next(ec).has_value());
  EXPECT_FALSE(ec);
}

TEST(reply, to_integer) {
  EXPECT_EQ(integer(42).to_integer(), 42);
  EXPECT_EQ(integer(-7).to_integer(), -7);
  EXPECT_EQ(bulk("123").to_integer(), 123);
  EXPECT_EQ(bulk("-5").to_integer(), -5);
  EXPECT_EQ(reply::make_simple("9").to_integer(), 9);
  EXPECT_EQ(bulk("9223372036854775807").to_integer(), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(bulk("9223372036854775808").to_integer(), std::nullopt);
  EXPECT_EQ(bulk("").to_integer(), std::nullopt);
  EXPECT_EQ(bulk("12a").to_integer(), std::nullopt);
  EXPECT_EQ(bulk(" 12").to_integer(), std::nullopt);
  EXPECT_EQ(bulk("1.5").to_integer(), std::nullopt);
  EXPECT_EQ(reply::make_simple("OK").to_integer(), std::nullopt);
  EXPECT_EQ(reply::make_error("1").to_integer(), std::nullopt);
  EXPECT_EQ(reply::make_nil().to_integer(), std::nullopt);
  EXPECT_EQ(array({integer(1)}).to_integer(), std::nullopt);
}

TEST(reply, accessors_of_other_kinds) {
  EXPECT_EQ(bulk("5").integer(), 0);
  EXPECT_EQ(integer(5).str(), "");
  EXPECT_TRUE(integer(5).elements().empty());
  EXPECT_TRUE(reply{}.is_nil());
}

TEST(reply, to_string) {
  EXPECT_EQ(to_string(reply::make_nil()), "(nil)");
  EXPECT_EQ(to_string(reply::make_simple("OK")), "OK");
  EXPECT_EQ(to_string(reply::make_error("ERR x")), "(error) ERR x");
  EXPECT_EQ(to_string(integer(-3)), "(integer) -3");
  EXPECT_EQ(to_string(bulk("v")), "\"v\"");
  EXPECT_EQ(to_string(array({})), "[]");
  EXPECT_EQ(to_string(array({bulk("message"), bulk("ch"), integer(1)})),
            "[\"message\", \"ch\", (integer) 1]");
  EXPECT_EQ(to_string(array({array({reply::make_nil()}), reply::make_simple("x")})),
            "[[(nil)], x]");
}

TEST(reply, equality) {
  EXPECT_EQ(bulk("a"), bulk("a"));
  EXPECT_NE(bulk("a"), reply::make_simple("a"));
  EXPECT_NE(bulk("a"), reply::make_error("a"));
  EXPECT_NE(integer(1), integer(2));
  EXPECT_NE(array({}), reply::make_nil());
  EXPECT_NE(array({integer(1)}), array({integer(1), integer(1)}));
}

}  // namespace

namespace {

long resident_kb() {
  std::ifstream statm{"/proc/self/statm"};
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// Found by the reply fuzzer: "*22220221\r\n" made the reader allocate room for 22 million
// replies (about 1.7 GB) before a single one arrived.
TEST(reader_limits, an_array_header_costs_nothing_until_its_elements_arrive) {
  dlock::resp::reader r;
  const long before = resident_kb();
  r.feed("*100000000\r\n:1\r\n:2\r\n");
  std::error_code ec;
  EXPECT_FALSE(r.next(ec).has_value());
  EXPECT_FALSE(ec);
  EXPECT_LT(resident_kb() - before, 64 * 1024) << "kB resident after a 100M-element header";
}

TEST(reader_limits, nested_arrays_grow_in_place_and_read_back_in_order) {
  dlock::resp::reader r;
  r.feed("*3\r\n*2\r\n:1\r\n*1\r\n$1\r\na\r\n:2\r\n*0\r\n");
  std::error_code ec;
  auto rep = r.next(ec);
  ASSERT_TRUE(rep);
  EXPECT_EQ(dlock::to_string(*rep), "[[(integer) 1, [\"a\"]], (integer) 2, []]");
}

}  // namespace
