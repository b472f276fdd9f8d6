// dlock/red_lock.hpp — one lock name on N independent Redis servers, held by a majority
// (Redis' Redlock algorithm; Redisson's deprecated RRedLock, repaired).
//
//   dlock::client a{cfg_a}, b{cfg_b}, c{cfg_c};
//   dlock::red_lock job{{a, b, c}, "nightly-report"};
//   if (job.try_lock_for(5s)) {
//     write(job.fencing_token());   // larger than any token of an earlier holder
//     job.unlock();
//   }
//
// Acquisition rounds attempt every server at once, each with a timeout small against the lease
// (a tenth of it, at most the client's command timeout), and succeed when at least N/2+1
// servers took the name and the validity — lease − elapsed − drift, from the round's sends — is
// still ahead. The fencing token is the largest of the quorum's tokens, and it is written back
// to every server that holds it as a floor of its counters before the call completes: any later
// quorum shares a server with this one, so its token is larger. A failed round releases what it
// took at once, in the background, and the next follows after a random pause (5-100 ms, shorter
// when the holder's lease ends sooner) or soon after the name is unlocked. A round is decided
// as soon as a majority holds and the rest had as long again (a dead server does not slow every
// acquisition down), or as soon as a majority is out of reach.
//
// While held, the watchdog (or the fixed lease) keeps the name on every member; lease_lost() is
// requested when fewer than a majority are still trusted, and lease_time_left() is the majority's
// (the needed-th longest member trust).
//
// Redlock's limits (docs/red_lock.md): its safety assumes bounded clock drift and process
// pauses shorter than the lease; a server restarted without persistence while held forgets the
// name, and a quorum may form again behind the holder's back. Check lease_time_left() before
// each protected write and give the resource the fencing token: it refuses the stale holder.
// Where one Redis with replicas suffices, a dlock::mutex with config::wait_replicas is simpler.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/detail/group_base.hpp"

namespace dlock {

class red_lock : public detail::group_base {
 public:
  red_lock(std::vector<std::reference_wrapper<client>> servers, std::string name);
  red_lock(std::initializer_list<std::reference_wrapper<client>> servers, std::string name)
      : red_lock{std::vector<std::reference_wrapper<client>>(servers), std::move(name)} {}
  const std::string& name() const noexcept { return name_; }

 private:
  std::string name_;
};

}  // namespace dlock
