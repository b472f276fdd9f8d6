// Internal to the test support library (redis_server.hpp's implementation): descriptors, files,
// processes and loopback sockets on POSIX calls, shared by process_util.cpp, resp_client.cpp,
// redis_server.cpp and tls_material.cpp. Not for tests: they use redis_server.hpp.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlock::test::posix {

using clock_type = std::chrono::steady_clock;

// Throws std::runtime_error("<what>: <strerror(err)>").
[[noreturn]] void throw_errno(const std::string& what, int err);

class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) noexcept : fd_{fd} {}
  ~unique_fd() { reset(); }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  unique_fd(unique_fd&& o) noexcept : fd_{o.release()} {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  int get() const noexcept { return fd_; }
  int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// The whole file ("" when it cannot be read); writes `contents` over the file (throws on failure).
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& contents);
// The last `lines` lines of `text`.
std::string tail_lines(const std::string& text, std::size_t lines);

// Milliseconds left until `deadline`, rounded up, for poll(); 0 once it passed.
int poll_ms(clock_type::time_point deadline);

// `name` if it holds a '/', else its first executable match in PATH (throws if none).
std::string resolve_executable(const std::string& name);

// Starts `exe` with `argv` (argv[0] included), stdin from /dev/null and stdout and stderr to
// `out_fd`; the child dies with the test process (see process_util.cpp). Throws on failure.
pid_t spawn(const std::string& exe, const std::vector<std::string>& argv, int out_fd);

// A non-blocking socket connected to 127.0.0.1:port by `deadline` (throws on failure), and
// whether a connection is accepted within `limit`.
unique_fd connect_loopback(std::uint16_t port, clock_type::time_point deadline);
bool tcp_accepts(std::uint16_t port, std::chrono::milliseconds limit);

}  // namespace dlock::test::posix
