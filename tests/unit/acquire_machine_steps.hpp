// Helpers of the acquire_machine step tests: constructed times, mutex_acquire.lua's replies, and
// show(), which renders a step's actions as one string in the order the shell carries them out
// (complete, give back, send, subscribe, WAIT, timer), so that a test compares them whole: an
// action that should not be there fails it as surely as a missing one. "" means no actions. An
// attempt shows its expected count, its flags and its budget: "attempt(0,queue,b=3000ms)".
#pragma once

#include <asio/error.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>

#include "dlock/error.hpp"
#include "dlock/reply.hpp"
#include "sync/acquire_machine.hpp"

namespace dlock::test::steps {

using namespace std::chrono_literals;
using dlock::errc;
using dlock::reply;
using machine = dlock::detail::acquire_machine;
using time_point = machine::clock::time_point;

inline const time_point t0 = time_point{} + 1000h;
inline const std::error_code ok{};
inline const std::error_code aborted = asio::error::operation_aborted;
inline std::error_code err(errc e) { return make_error_code(e); }

inline reply script(std::int64_t status, std::int64_t value) {
  return reply::make_array({reply::make_integer(status), reply::make_integer(value)});
}
inline reply acquired(std::int64_t token) { return script(0, token); }
inline reply held(std::int64_t pttl) { return script(1, pttl); }
inline reply yielded(std::int64_t pttl) { return script(2, pttl); }
inline const reply none{};  // the reply that comes with an error

inline std::string name(std::error_code ec) {
  if (!ec) return "ok";
  if (ec == aborted) return "operation_aborted";
  static constexpr std::pair<errc, const char*> names[] = {
      {errc::timeout, "timeout"},
      {errc::shutdown, "shutdown"},
      {errc::connection_lost, "connection_lost"},
      {errc::connection_refused, "connection_refused"},
      {errc::lease_lost, "lease_lost"},
      {errc::loading, "loading"},
      {errc::busy, "busy"},
      {errc::wrong_type, "wrong_type"},
      {errc::wrong_kind, "wrong_kind"},
      {errc::upgrade_refused, "upgrade_refused"},
      {errc::no_replicas, "no_replicas"},
      {errc::protocol_error, "protocol_error"}};
  for (const auto& [e, n] : names) {
    if (ec == e) return n;
  }
  return ec.message();
}

inline std::string span(machine::clock::duration d) {
  if (d % 1ms == 0ns) return std::to_string(d / 1ms) + "ms";
  return std::to_string(d.count()) + "ns";
}
inline std::string at(time_point t) { return "t0+" + span(t - t0); }

inline std::string show(const machine::actions& a) {
  std::string s;
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : " ") + part; };
  if (a.complete) add("complete(" + name(*a.complete) + ")");
  if (a.give_back) add("give_back(" + std::to_string(a.give_back_have) + ")");
  if (a.attempt) {
    add("attempt(" + std::to_string(a.attempt->have) + (a.attempt->queue ? ",queue" : "") +
        (a.attempt->foreign ? ",foreign" : "") + ",b=" + span(a.attempt->budget) + ")");
  }
  if (a.subscribe) add("subscribe");
  if (a.send_wait) add("send_wait");
  if (a.timer) add("timer(" + at(*a.timer) + ")");
  return s;
}

inline machine::params waiting(std::chrono::milliseconds d) {
  machine::params p;
  p.deadline = t0 + d;
  return p;
}
inline machine::params single_try() { return waiting(0ms); }

}  // namespace dlock::test::steps
