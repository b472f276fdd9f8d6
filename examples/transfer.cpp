// multi_lock: move money between two accounts, each guarded by its own lock, holding both or
// neither. Two transfers in opposite directions (A→B and B→A) cannot deadlock: a multi_lock
// never waits while holding a member.
//
//   DLOCK_URL=redis://127.0.0.1:6379 ./transfer
#include <cstdio>
#include <cstdlib>
#include <dlock/dlock.hpp>
#include <mutex>
#include <string>
#include <thread>

namespace {

long long balance(dlock::client& c, const std::string& account) {
  const auto r = c.execute({"GET", "examples:balance:" + account});
  return r.is_nil() ? 0 : std::stoll(r.str());
}

void add(dlock::client& c, const std::string& account, long long amount) {
  c.execute({"INCRBY", "examples:balance:" + account, std::to_string(amount)});
}

// Moves `amount` from `from` to `to` 200 times, under both accounts' locks.
void transfers(dlock::client& c, const std::string& from, const std::string& to, long long amount) {
  dlock::mutex a{c, "examples:account:" + from}, b{c, "examples:account:" + to};
  dlock::multi_lock both{a, b};
  for (int i = 0; i < 200; ++i) {
    std::lock_guard hold{both};  // every member or it waits; throws dlock::lock_error
    // Each account's store would check its own lock's token (both.fencing_tokens()[k]).
    const auto left = balance(c, from);
    if (left < amount) continue;
    add(c, from, -amount);
    add(c, to, amount);
  }
}

}  // namespace

int main() {
  const char* url = std::getenv("DLOCK_URL");
  dlock::client client{dlock::config::from_uri(url ? url : "redis://127.0.0.1:6379")};
  client.execute({"MSET", "examples:balance:alice", "1000", "examples:balance:bob", "1000"});
  std::thread one{[&] { transfers(client, "alice", "bob", 7); }};
  std::thread two{[&] { transfers(client, "bob", "alice", 5); }};
  one.join();
  two.join();
  const auto total = balance(client, "alice") + balance(client, "bob");
  std::printf("alice %lld, bob %lld, total %lld\n", balance(client, "alice"),
              balance(client, "bob"), total);
  return total == 2000 ? 0 : 1;
}
