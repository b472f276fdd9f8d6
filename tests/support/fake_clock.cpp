// fake_clock (fake_clock.hpp): writes the parameters clock_shim.c reads in redis-server.
#include "support/fake_clock.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <stdexcept>

#include "support/posix_util.hpp"
#include "support/redis_server.hpp"

#ifndef DLOCK_CLOCK_SHIM
#error "DLOCK_CLOCK_SHIM must name the dlock_clock_shim library"
#endif

namespace dlock::test {

// clock_shim.c's struct dlock_clock_params, field for field.
struct fake_clock::params {
  std::uint32_t magic;
  std::uint32_t seq;  // seqlock: odd while write() changes the fields below
  std::int64_t anchor_ns;
  std::int64_t offset_ns;
  std::int64_t rate_ppm;
};

namespace {

constexpr std::uint32_t magic = 0x4b434c44u;  // "DLCK"
constexpr std::int64_t ppm = 1'000'000;

// The shim reads the mapping with C11 atomics in another process: only lock-free atomics are
// address-free, so only they work across processes.
static_assert(std::atomic_ref<std::int64_t>::is_always_lock_free);
static_assert(std::atomic_ref<std::uint32_t>::is_always_lock_free);

std::int64_t real_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

template <class T>
T load(T& field) {
  return std::atomic_ref<T>{field}.load(std::memory_order_relaxed);
}

// The shim's formula (clock_shim.c), on this process' real clock.
std::int64_t fake_at(std::int64_t real, std::int64_t anchor, std::int64_t offset,
                     std::int64_t rate) {
  __extension__ typedef __int128 wide;  // the product overflows 64 bits after a few hours
  const auto scaled = static_cast<wide>(real - anchor) * rate / ppm;
  return anchor + offset + static_cast<std::int64_t>(scaled);
}

}  // namespace

std::string clock_shim_path() { return DLOCK_CLOCK_SHIM; }

fake_clock::fake_clock() : dir_{make_temp_dir("dlock-clock-")}, path_{dir_ + "/clock"} {
  posix::unique_fd fd{::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)};
  if (fd.get() < 0 || ::ftruncate(fd.get(), sizeof(params)) != 0) {
    const int err = errno;
    std::filesystem::remove_all(dir_);
    posix::throw_errno("fake_clock: " + path_, err);
  }
  void* map = ::mmap(nullptr, sizeof(params), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) {
    const int err = errno;
    std::filesystem::remove_all(dir_);
    posix::throw_errno("fake_clock: mmap " + path_, err);
  }
  map_ = static_cast<params*>(map);  // zero-filled by ftruncate: seq 0, no magic yet
  write(0, 0, ppm);
  std::atomic_ref<std::uint32_t>{map_->magic}.store(magic, std::memory_order_release);
}

fake_clock::~fake_clock() {
  ::munmap(map_, sizeof(params));
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void fake_clock::write(std::int64_t anchor_ns, std::int64_t offset_ns, std::int64_t rate_ppm) {
  std::atomic_ref<std::uint32_t> seq{map_->seq};
  const auto s = seq.load(std::memory_order_relaxed);
  seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // odd is seen before any new field
  std::atomic_ref<std::int64_t>{map_->anchor_ns}.store(anchor_ns, std::memory_order_relaxed);
  std::atomic_ref<std::int64_t>{map_->offset_ns}.store(offset_ns, std::memory_order_relaxed);
  std::atomic_ref<std::int64_t>{map_->rate_ppm}.store(rate_ppm, std::memory_order_relaxed);
  seq.store(s + 2, std::memory_order_release);
}

void fake_clock::step(std::chrono::nanoseconds d) {
  std::lock_guard lock{mu_};
  write(load(map_->anchor_ns), load(map_->offset_ns) + d.count(), load(map_->rate_ppm));
}

void fake_clock::set_rate(double rate) {
  if (!(rate > 0) || !std::isfinite(rate)) throw std::invalid_argument("fake_clock: rate <= 0");
  std::lock_guard lock{mu_};
  // Re-anchored at now, so the fake time goes on from where the old rate had brought it.
  const auto real = real_now_ns();
  const auto fake =
      fake_at(real, load(map_->anchor_ns), load(map_->offset_ns), load(map_->rate_ppm));
  write(real, fake - real, std::llround(rate * ppm));
}

void fake_clock::reset() {
  std::lock_guard lock{mu_};
  write(0, 0, ppm);
}

std::chrono::nanoseconds fake_clock::offset() const {
  std::lock_guard lock{mu_};
  const auto real = real_now_ns();
  return std::chrono::nanoseconds{
      fake_at(real, load(map_->anchor_ns), load(map_->offset_ns), load(map_->rate_ppm)) - real};
}

}  // namespace dlock::test
