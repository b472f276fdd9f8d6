// The flash sale of the lock tutorial (docs/examples.md): 100 items, many buyers at once, one
// purchase per user, sold only inside the sale's window. The tutorial's first version takes a
// distributed lock and then makes six round trips (window, stock, "has this user bought?",
// decrement, record...). Every bit of that state lives in Redis, so one Lua script does the
// same checks and writes atomically in one round trip, and nothing waits for anything: here a
// dlock::script run with client::eval, against the lock-based version, on the same load.
//
// When is a lock the wrong tool? When the critical section only reads and writes Redis keys:
// a script is atomic by construction, cannot be left half done by a crashed holder, has no
// lease to outlive, and costs one round trip. A lock is for work Redis cannot do inside a
// script: a database transaction, a file, a call to another service (and then with a fencing
// token that the resource checks, see examples/fencing.cpp).
//
//   ./flash_sale redis://127.0.0.1:6379        (or DLOCK_URL=redis://... ./flash_sale)
//
// Exit status 0 when both versions sold exactly 100, to 100 different users, nothing before the
// window opened; 1 otherwise; 2 on Redis errors.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlock/dlock.hpp>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace flash_sale {

constexpr int stock = 100, users = 500, attempts = 1000, threads = 8;

// KEYS[1] the sale (hash: start, end in Unix seconds), KEYS[2] its buyers (set), KEYS[3] its
// stock; ARGV[1] the user. Returns 1 sold, 0 sold out, -1 outside the window, -2 bought before.
const dlock::script buy{R"(
local window = redis.call('HMGET', KEYS[1], 'start', 'end')
local now = tonumber(redis.call('TIME')[1])
if not window[1] or now < tonumber(window[1]) or now >= tonumber(window[2]) then return -1 end
if tonumber(redis.call('GET', KEYS[3]) or '0') <= 0 then return 0 end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return -2 end
redis.call('DECR', KEYS[3])
redis.call('SADD', KEYS[2], ARGV[1])
return 1)"};

struct sale {
  std::string act, buyers, stock;  // one {tag}: the script's keys share a cluster slot
  explicit sale(const std::string& tag)
      : act{"examples:{" + tag + "}:act"},
        buyers{act + ":buyers"},
        stock{"examples:{" + tag + "}:stock"} {}
};

long long server_time(dlock::client& c) {
  return std::stoll(c.execute({"TIME"}).elements().at(0).str());
}

// The same checks with a lock around them: six round trips while every other buyer waits.
int buy_under_lock(dlock::client& c, dlock::mutex& m, const sale& s, const std::string& user) {
  std::lock_guard hold{m};
  const auto window = c.execute({"HMGET", s.act, "start", "end"}).elements();
  const long long now = server_time(c);
  if (window.at(0).is_nil() || now < std::stoll(window.at(0).str()) ||
      now >= std::stoll(window.at(1).str()))
    return -1;
  if (std::stoll(c.execute({"GET", s.stock}).str()) <= 0) return 0;
  if (c.execute({"SISMEMBER", s.buyers, user}).integer() == 1) return -2;
  c.execute({"DECR", s.stock});
  c.execute({"SADD", s.buyers, user});
  return 1;
}

struct outcome {
  int sold = 0, twice = 0, early = 0, errors = 0;
  double per_second = 0;
};

// Runs `attempts` purchases (user k % users) on `threads` threads; counts what was sold.
template <class Buy>
outcome run(dlock::client& c, const sale& s, Buy buy_one) {
  const long long now = server_time(c);
  c.execute({"DEL", s.act, s.buyers, s.stock});
  c.execute({"SET", s.stock, std::to_string(stock)});
  c.execute(
      {"HSET", s.act, "start", std::to_string(now + 3600), "end", std::to_string(now + 7200)});
  outcome o;
  for (int k = 0; k < 10; ++k) o.early += buy_one("early-" + std::to_string(k)) == 1;
  c.execute({"HSET", s.act, "start", std::to_string(now - 1), "end", std::to_string(now + 600)});

  std::vector<std::atomic<int>> bought(users);
  std::atomic<int> next{0}, errors{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int k; (k = next++) < attempts;) {
        try {
          const auto user = static_cast<std::size_t>(k % users);
          if (buy_one("user-" + std::to_string(user)) == 1) ++bought[user];
        } catch (const dlock::lock_error& e) {  // counted, and fails the check
          if (errors++ == 0) std::fprintf(stderr, "flash_sale: %s\n", e.what());
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  o.per_second = attempts / took.count();
  o.errors = errors;
  for (const auto& b : bought) {
    o.sold += b;
    o.twice += b > 1;
  }
  return o;
}

bool check(dlock::client& c, const sale& s, const char* what, const outcome& o) {
  const auto left = c.execute({"GET", s.stock}).str();
  const auto buyers = c.execute({"SCARD", s.buyers}).integer();
  std::printf(
      "%-15s sold %d, %lld buyers, stock left %s, users who bought twice %d, "
      "sold before the window %d: %.0f attempts/s\n",
      what, o.sold, static_cast<long long>(buyers), left.c_str(), o.twice, o.early, o.per_second);
  if (o.errors > 0) std::printf("%-15s %d attempts failed with an error\n", what, o.errors);
  return o.sold == stock && buyers == stock && left == "0" && o.twice == 0 && o.early == 0 &&
         o.errors == 0;
}

}  // namespace flash_sale

namespace fs = flash_sale;

int main(int argc, char** argv) {
  const char* env = std::getenv("DLOCK_URL");
  const std::string url = argc > 1 ? argv[1] : env ? env : "redis://127.0.0.1:6379";
  try {
    dlock::client client{dlock::config::from_uri(url)};
    std::printf("flash sale: stock %d, %d attempts by %d users on %d threads\n", fs::stock,
                fs::attempts, fs::users, fs::threads);

    const fs::sale scripted{"sale-script"};
    const auto by_script = fs::run(client, scripted, [&](const std::string& user) {
      return static_cast<int>(
          client.eval(fs::buy, {scripted.act, scripted.buyers, scripted.stock}, {user}).integer());
    });
    const bool script_ok = fs::check(client, scripted, "one Lua script", by_script);

    const fs::sale locked{"sale-lock"};
    dlock::mutex m{client, "examples:{sale-lock}:mutex"};
    const auto by_lock = fs::run(client, locked, [&](const std::string& user) {
      return fs::buy_under_lock(client, m, locked, user);
    });
    const bool lock_ok = fs::check(client, locked, "dlock::mutex", by_lock);

    std::printf("the script served %.1fx the attempts per second of the lock\n",
                by_script.per_second / by_lock.per_second);
    return script_ok && lock_ok ? 0 : 1;
  } catch (const dlock::lock_error& e) {
    std::fprintf(stderr, "flash_sale: %s\n", e.what());
    return 2;
  }
}
