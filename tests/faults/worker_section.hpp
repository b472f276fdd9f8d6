// dlock_fault_worker's section loop (fault_worker.cpp says what a section does and prints). A
// section holds one or more parts (worker_lock.hpp, held_lock::part): one lock for every kind
// but multi, whose members are each a lock of the history with its own token and resource. Each
// part's steps are recorded with its lock ("lock" in the history, "" for the worker's one
// lock): its enter, its fenced read and unfenced GET, then — after the one hold — its fenced
// write and unfenced SET, its exit or lost, and the release's outcome.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/client.hpp"
#include "history.hpp"
#include "resource.hpp"
#include "worker_lock.hpp"

namespace dlock::faults {

struct worker_options {
  std::string lock_url, resource_url, name, id, history;
  std::string lock = "dlock", kind = "mutex";
  std::string servers, names;  // --kind red, multi
  long count = 1;
  long permits = 0;
  bool stop_before_write = false;
  std::chrono::milliseconds wait{10000}, lease{0}, hold{100}, jitter{0}, think{0};
  std::optional<std::chrono::milliseconds> hold_first;
  std::uint64_t seed = 1;
};

class worker {
 public:
  // `resources`: the client of the resource server (a resource per part's lock).
  worker(const worker_options& o, history_writer& h, held_lock& l, dlock::client& resources);
  ~worker();

  int run();

 private:
  struct section_state;
  struct held_part;
  using milliseconds = std::chrono::milliseconds;

  milliseconds jittered(milliseconds base);
  resource& resource_of(const std::string& lock);
  void record_lost(const std::shared_ptr<section_state>& st, const char* src);
  bool still_held(const std::shared_ptr<section_state>& st);
  bool resource_error(const char* what, std::error_code ec);
  void section(std::uint64_t token, milliseconds hold);
  void access_all(const std::shared_ptr<section_state>& st, std::vector<held_part>& parts,
                  milliseconds hold);
  bool read_part(const std::shared_ptr<section_state>& st, held_part& p);
  bool write_part(const std::shared_ptr<section_state>& st, held_part& p);
  void stop_in_the_window(std::uint64_t token);
  template <class Send>
  bool write_access(event e, const char* what, Send send);

  const worker_options& o_;
  history_writer& h_;
  held_lock& lock_;
  dlock::client& resources_;
  std::map<std::string, std::unique_ptr<resource>> res_;  // by lock ("" = --name)
  std::mt19937_64 rng_;
  bool stopped_once_ = false;
};

}  // namespace dlock::faults
