/* dlock_clock_shim: a fake wall clock for redis-server, LD_PRELOADed by the test fixture
 * (redis_server_options::clock_file) and driven at run time by dlock::test::fake_clock
 * (fake_clock.hpp). Redis expires keys, and answers TIME, by its wall clock; libfaketime does not
 * work with Debian's redis-server, this does.
 *
 * It overrides clock_gettime (CLOCK_REALTIME and CLOCK_REALTIME_COARSE only; every other clock,
 * CLOCK_MONOTONIC above all, passes through), gettimeofday and time. Fake time is
 *
 *   fake(real) = anchor + offset + (real - anchor) * rate
 *
 * with anchor, offset and rate read from a file mapped shared (path in DLOCK_CLOCK_SHIM_FILE),
 * which the test rewrites while the server runs. Without the variable or the file every call
 * passes through. The layout below is also fake_clock.cpp's: change both together.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define DLOCK_CLOCK_MAGIC 0x4b434c44u /* "DLCK" */

struct dlock_clock_params {
  uint32_t magic;
  uint32_t seq;      /* seqlock: odd while the writer changes the fields below */
  int64_t anchor_ns; /* real CLOCK_REALTIME at the last rate change */
  int64_t offset_ns; /* fake - real at the anchor */
  int64_t rate_ppm;  /* fake nanoseconds per real nanosecond, in millionths */
};

typedef int (*clock_gettime_fn)(clockid_t, struct timespec*);

static clock_gettime_fn real_clock_gettime_fn;
static const struct dlock_clock_params* params;

static clock_gettime_fn real_clock_gettime(void) {
  clock_gettime_fn fn = __atomic_load_n(&real_clock_gettime_fn, __ATOMIC_ACQUIRE);
  if (fn == NULL) {
    /* Called before the constructor (another library's): resolving twice is harmless. */
    void* sym = dlsym(RTLD_NEXT, "clock_gettime");
    memcpy(&fn, &sym, sizeof fn); /* ISO C has no object-to-function pointer cast */
    __atomic_store_n(&real_clock_gettime_fn, fn, __ATOMIC_RELEASE);
  }
  return fn;
}

__attribute__((constructor)) static void dlock_clock_shim_init(void) {
  real_clock_gettime();
  const char* path = getenv("DLOCK_CLOCK_SHIM_FILE");
  if (path == NULL || *path == '\0') return;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  void* map = mmap(NULL, sizeof(struct dlock_clock_params), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return;
  const struct dlock_clock_params* p = map;
  if (__atomic_load_n(&p->magic, __ATOMIC_RELAXED) != DLOCK_CLOCK_MAGIC) {
    munmap(map, sizeof(struct dlock_clock_params));
    return;
  }
  __atomic_store_n(&params, p, __ATOMIC_RELEASE);
}

/* fake(real); real itself when there is no file or a writer died halfway through an update. */
static int64_t fake_ns(int64_t real) {
  const struct dlock_clock_params* p = __atomic_load_n(&params, __ATOMIC_ACQUIRE);
  if (p == NULL) return real;
  for (int tries = 0; tries < 100000; ++tries) {
    const uint32_t before = __atomic_load_n(&p->seq, __ATOMIC_ACQUIRE);
    if (before & 1u) continue;
    const int64_t anchor = __atomic_load_n(&p->anchor_ns, __ATOMIC_RELAXED);
    const int64_t offset = __atomic_load_n(&p->offset_ns, __ATOMIC_RELAXED);
    const int64_t rate = __atomic_load_n(&p->rate_ppm, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&p->seq, __ATOMIC_RELAXED) != before) continue;
    /* 128 bits: (real - anchor) * rate overflows 64 bits after a few hours. */
    __extension__ typedef __int128 wide;
    const wide scaled = (wide)(real - anchor) * rate / 1000000;
    return anchor + offset + (int64_t)scaled;
  }
  return real;
}

static int64_t real_now_ns(void) {
  struct timespec ts;
  if (real_clock_gettime()(CLOCK_REALTIME, &ts) != 0) return 0;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void split_ns(int64_t ns, time_t* sec, long* frac_ns) {
  int64_t s = ns / 1000000000, f = ns % 1000000000;
  if (f < 0) {
    f += 1000000000;
    --s;
  }
  *sec = (time_t)s;
  *frac_ns = (long)f;
}

int clock_gettime(clockid_t clock, struct timespec* ts) {
  const int rc = real_clock_gettime()(clock, ts);
  if (rc != 0 || (clock != CLOCK_REALTIME && clock != CLOCK_REALTIME_COARSE)) return rc;
  split_ns(fake_ns((int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec), &ts->tv_sec, &ts->tv_nsec);
  return 0;
}

/* The timezone argument is obsolete (always NULL in Redis): zeroed if given. glibc declares
 * `tv` nonnull. */
int gettimeofday(struct timeval* restrict tv, void* restrict tz) {
  if (tz != NULL) {
    struct timezone* zone = tz;
    zone->tz_minuteswest = 0;
    zone->tz_dsttime = 0;
  }
  long frac = 0;
  split_ns(fake_ns(real_now_ns()), &tv->tv_sec, &frac);
  tv->tv_usec = frac / 1000;
  return 0;
}

time_t time(time_t* out) {
  long frac = 0;
  time_t sec = 0;
  split_ns(fake_ns(real_now_ns()), &sec, &frac);
  if (out != NULL) *out = sec;
  return sec;
}
