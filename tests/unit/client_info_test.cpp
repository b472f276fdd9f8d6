// transport::parse_client_info: the identity a connection learns in its handshake (CLIENT INFO),
// which the next connection's handshake uses to fence it (transport/link.hpp, "Fencing").
#include <gtest/gtest.h>

#include "transport/link.hpp"

using dlock::reply;
using dlock::transport::parse_client_info;

TEST(client_info, takes_id_addr_and_laddr_from_redis_7s_reply) {
  const auto who = parse_client_info(reply::make_bulk(
      "id=12 addr=127.0.0.1:50310 laddr=127.0.0.1:6379 fd=8 name=dlock age=0 idle=0 flags=N db=0 "
      "sub=0 psub=0 ssub=0 multi=-1 qbuf=26 qbuf-free=20448 argv-mem=10 multi-mem=0 rbs=1024 "
      "rbp=0 obl=0 oll=0 omem=0 tot-mem=22298 events=r cmd=client|info user=default redir=-1 "
      "resp=2\n"));
  ASSERT_TRUE(who);
  EXPECT_EQ(who->id, "12");
  EXPECT_EQ(who->addr, "127.0.0.1:50310");
  EXPECT_EQ(who->laddr, "127.0.0.1:6379");
}

TEST(client_info, an_ipv6_address_and_fields_in_any_order) {
  const auto who =
      parse_client_info(reply::make_bulk("laddr=[::1]:6379 fd=9 id=7 addr=[::1]:41000"));
  ASSERT_TRUE(who);
  EXPECT_EQ(who->id, "7");
  EXPECT_EQ(who->addr, "[::1]:41000");
  EXPECT_EQ(who->laddr, "[::1]:6379");
}

TEST(client_info, anything_else_is_no_identity) {
  EXPECT_FALSE(
      parse_client_info(reply::make_error("ERR unknown subcommand 'INFO'")));  // before 6.2
  EXPECT_FALSE(parse_client_info(reply::make_error("NOPERM this user has no permissions")));
  EXPECT_FALSE(parse_client_info(reply::make_integer(12)));
  EXPECT_FALSE(parse_client_info(reply::make_nil()));
  EXPECT_FALSE(parse_client_info(reply::make_bulk("")));
  EXPECT_FALSE(parse_client_info(reply::make_bulk("id=12 addr=127.0.0.1:50310")));  // no laddr
  EXPECT_FALSE(parse_client_info(reply::make_bulk("id= addr=a laddr=b"))) << "an empty id";
  EXPECT_FALSE(parse_client_info(reply::make_bulk("id=x1 addr=a laddr=b"))) << "not a number";
  EXPECT_FALSE(parse_client_info(reply::make_bulk("xid=1 xaddr=a xladdr=b"))) << "keys match whole";
}
