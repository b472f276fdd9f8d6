// Bonus points made idempotent by a unique key, not by a lock (the end of the lock tutorial,
// docs/examples.md). Every paid order earns its user points; the "order paid" events come from
// an at-least-once queue, so some arrive twice or three times (a redelivery after a lost ack, a
// retried producer). Three consumers on the same deliveries:
//   - naive: INCRBY for every delivery — a duplicate is counted again;
//   - under a lock: a dlock::mutex per user around the INCRBY — still counted again, because the
//     duplicate arrives after the first delivery's lock was released: a lock orders concurrent
//     work, it does not remember what was already done;
//   - keyed: one Lua script records the event's unique key (user + source type + source id,
//     the tutorial's unique constraint) with HSETNX and adds the points only when the key is
//     new, atomically, so each order counts once however often it is delivered.
//
//   ./idempotent_points redis://127.0.0.1:6379   (or DLOCK_URL=redis://... ./idempotent_points)
//
// Exit status 0 when the keyed consumer's totals are exact for every user and the other two
// over-count (as they must with duplicates); 1 otherwise; 2 on Redis errors.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <dlock/dlock.hpp>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace idempotent_points {

constexpr int orders = 300, consumers = 4;
constexpr std::size_t users = 20;

struct event {
  std::size_t user;
  std::string source;  // "order:<id>": the source type and id the points come from
  int points;
};

// KEYS[1] the user's points, KEYS[2] the user's applied sources (hash); ARGV[1] points,
// ARGV[2] source. Returns the new total, or nil when this source was applied before.
const dlock::script add_once{R"(
if redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[1]) == 0 then return nil end
return redis.call('INCRBY', KEYS[1], ARGV[1]))"};

std::string points_key(const std::string& run,
                       std::size_t user) {  // {user}: one cluster slot per user
  return "examples:points:" + run + ":{user" + std::to_string(user) + "}";
}

// What the queue delivers: every order once, then the redeliveries (a third of the orders
// again, a fifth a third time), as they come after an ack timeout.
std::vector<event> deliveries(std::vector<long long>& expected) {
  std::vector<event> first, again;
  expected.assign(users, 0);
  for (int i = 0; i < orders; ++i) {
    const event e{static_cast<std::size_t>(i) % users, "order:" + std::to_string(1000 + i),
                  10 + i % 7};
    expected[e.user] += e.points;
    first.push_back(e);
    if (i % 3 == 0) again.push_back(e);
    if (i % 5 == 0) again.push_back(e);
  }
  first.insert(first.end(), again.begin(), again.end());
  return first;
}

// Consumers take deliveries in queue order, `consumers` at a time, each applying `apply`.
// Rethrows the first error a consumer met, once all have stopped.
void consume(const std::vector<event>& queue, const std::function<void(const event&)>& apply) {
  std::atomic<std::size_t> next{0};
  std::mutex first_error_mutex;
  std::exception_ptr first_error;
  std::vector<std::thread> pool;
  for (int t = 0; t < consumers; ++t) {
    pool.emplace_back([&] {
      try {
        for (std::size_t k; (k = next++) < queue.size();) apply(queue[k]);
      } catch (const dlock::lock_error&) {
        std::lock_guard g{first_error_mutex};
        if (!first_error) first_error = std::current_exception();
        next = queue.size();  // stop the others too
      }
    });
  }
  for (auto& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

// Prints the run's totals against the expected ones; true if every user's total is exact.
bool exact(dlock::client& c, const std::string& run, const std::vector<long long>& expected) {
  long long total = 0, want = 0;
  int wrong = 0;
  for (std::size_t u = 0; u < users; ++u) {
    const auto r = c.execute({"GET", points_key(run, u)});
    const long long got = r.is_nil() ? 0 : std::stoll(r.str());
    total += got;
    want += expected[u];
    wrong += got != expected[u];
  }
  std::printf("%-7s %lld points given, %lld earned: %d of %zu users %s\n", run.c_str(), total, want,
              wrong, users, wrong ? "over-credited" : "wrong");
  return wrong == 0;
}

}  // namespace idempotent_points

namespace ip = idempotent_points;

int main(int argc, char** argv) {
  const char* env = std::getenv("DLOCK_URL");
  const std::string url = argc > 1 ? argv[1] : env ? env : "redis://127.0.0.1:6379";
  try {
    dlock::client client{dlock::config::from_uri(url)};
    std::vector<long long> expected;
    const auto queue = ip::deliveries(expected);
    std::printf("%d orders for %zu users, %zu deliveries (at least once)\n", ip::orders, ip::users,
                queue.size());
    for (const char* run : {"naive", "locked", "keyed"}) {
      for (std::size_t u = 0; u < ip::users; ++u) {
        const auto key = ip::points_key(run, u);
        client.execute({"DEL", key, key + ":applied"});
      }
    }

    ip::consume(queue, [&](const ip::event& e) {
      client.execute({"INCRBY", ip::points_key("naive", e.user), std::to_string(e.points)});
    });
    ip::consume(queue, [&](const ip::event& e) {
      dlock::mutex user_lock{client, ip::points_key("locked", e.user) + ":lock"};
      std::lock_guard hold{user_lock};  // concurrent adds take turns; a later duplicate does not
      client.execute({"INCRBY", ip::points_key("locked", e.user), std::to_string(e.points)});
    });
    ip::consume(queue, [&](const ip::event& e) {
      const auto key = ip::points_key("keyed", e.user);
      client.eval(ip::add_once, {key, key + ":applied"}, {std::to_string(e.points), e.source});
    });

    const bool naive = ip::exact(client, "naive", expected);
    const bool locked = ip::exact(client, "locked", expected);
    const bool keyed = ip::exact(client, "keyed", expected);
    return keyed && !naive && !locked ? 0 : 1;
  } catch (const dlock::lock_error& e) {
    std::fprintf(stderr, "idempotent_points: %s\n", e.what());
    return 2;
  }
}
