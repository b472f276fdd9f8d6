// dlock/multi_lock.hpp — several locks taken as one: all of them or none (Redisson's RMultiLock).
//
//   dlock::mutex a{east, "account:1"}, b{west, "account:2"};
//   dlock::multi_lock both{{a, b}};
//   {
//     std::lock_guard guard{both};                  // every member, or it waits
//     transfer(both.fencing_tokens());               // one token per member
//   }
//
// Members are dlock::mutex objects on the same or different clients (servers, clusters).
// Acquisition runs rounds: each round attempts every member at once, and members that share a
// client (and, in a Redis Cluster, a slot) are taken by one script, all or none. When a member
// is held by someone else, what the round took is released at once in the background, and the
// next round follows after a jittered pause (5-100 ms, shorter when the holder's lease ends
// sooner), or soon after that member is unlocked, until the deadline. A multi_lock never waits
// while holding a member, so two multi_locks over overlapping sets cannot deadlock, and the
// jitter lets one of them through.
// (Redisson's takes members one after another, waiting on each while holding the others.)
//
// What it guarantees: while held, every member is held by this acquisition. The combined lease
// is trusted until the earliest member's trust ends (lease_time_left()), lease_lost() is
// requested when any member's lease may be lost, and each member has its fencing token. Without
// a lease the watchdog renews every member; with one, every member gets it.
//
// Owners: each member is held by a lease owner of its own (`<client-uuid>:<n>`), so a thread
// holding a member directly cannot also take the multi_lock (errc::would_deadlock, not a
// self-wait). The Lockable forms belong to the calling thread and are reentrant per thread
// (counted locally: the members are taken once); async forms complete with a dlock::multi_lease.
// Completion: on the I/O thread of the member client whose reply decided it (or the first
// member's, whose timer paces the rounds); give the handler an executor to choose.
// Errors: errc::invalid_argument (no members, the same lock twice, a bad name or lease),
// errc::wrong_type / errc::wrong_kind (a member's key is no mutex), errc::would_deadlock, the
// members' connection errors (at the deadline), errc::shutdown.
#pragma once

#include <functional>
#include <initializer_list>
#include <vector>

#include "dlock/detail/group_base.hpp"
#include "dlock/mutex.hpp"

namespace dlock {

class multi_lock : public detail::group_base {
 public:
  explicit multi_lock(std::vector<std::reference_wrapper<mutex>> members);
  multi_lock(std::initializer_list<std::reference_wrapper<mutex>> members)
      : multi_lock{std::vector<std::reference_wrapper<mutex>>(members)} {}
};

}  // namespace dlock
