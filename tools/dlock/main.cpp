// The dlock command: run commands under distributed locks, inspect and release locks.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <dlock/version.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli.hpp"

namespace {

const char* examples = R"(
Examples:
  dlock exec nightly-report -- ./report.sh --full     # one host at a time, wait as long as it takes
  dlock exec --wait 0 backup -- pg_dump db             # skip (exit 75) if another host runs it
  dlock exec --wait 30s --lease 10m import -- ./import # fixed lease, no watchdog
  dlock exec --fair deploy -- ./deploy.sh              # waiters served in arrival order
  dlock exec --shared catalog -- ./read-catalog.sh     # many readers at once...
  dlock exec --rw catalog -- ./rebuild-catalog.sh      # ...or one writer
  dlock exec --permits 3 reports -- ./report.sh        # at most 3 at once across the fleet
  dlock exec ledger:alice ledger:bob -- ./transfer.sh  # both names or neither (a multi_lock)
  dlock --url redis://r1 --url redis://r2 --url redis://r3 exec nightly -- ./run.sh
                                                       # held on a majority of 3 (a red_lock)
  dlock latch shards-loaded set 5                      # the coordinator, once
  dlock latch shards-loaded count-down                 # each of the 5 loaders, when done
  dlock latch shards-loaded wait --timeout 1h && ./start-batch.sh
  dlock status nightly-report --json
  dlock status --metrics --match 'orders:*'            # Prometheus gauges for every orders:* lock
  dlock unlock --force nightly-report
  DLOCK_URL=rediss://redis.internal:6380 dlock --ca /etc/ssl/ca.pem ping
  dlock --url redis+cluster://10.0.0.5:7000,10.0.0.6:7000 ping  # every node of a Redis Cluster
  dlock --url redis+sentinel://10.0.0.5:26379,10.0.0.6:26379/mymaster ping  # the master named

Exit codes: exec: the command's (128+N if killed by signal N); 75 not acquired within --wait;
70 the lease was lost or about to end while the command ran (it was stopped), or had too little
time left to start it; 69 Redis unreachable, auth or TLS failure;
64 bad usage or input (also: NAME is a key of another type, or a lock of another kind, or
--permits N does not match the semaphore's total); 127 command not found. The same with several
NAMEs or --url.
status and unlock --force: 0 held (a semaphore: permits in use), 1 free. status --metrics: 0.
latch: 0; set: 1 if the latch already had a count; wait --timeout: 75 if still closed.
ping: 0, or 69 if Redis (on a cluster, any node) cannot be reached.
)";

// exec's forms and what its command gets, for `dlock exec --help`.
const char* exec_forms = R"(
Forms:
  dlock exec [OPTIONS] NAME -- CMD [ARGS...]            one lock
  dlock exec [OPTIONS] NAME1 NAME2... -- CMD [ARGS...]  every NAME on the one server, or none
                                                        (a multi_lock; not with --fair, --shared,
                                                        --rw, --permits)
  dlock --url A --url B --url C exec [OPTIONS] NAME -- CMD [ARGS...]
                                   NAME on a majority of those independent servers (a red_lock;
                                   3 or more; 2 need both; not with --fair, --shared, --rw,
                                   --permits)
CMD's environment: DLOCK_NAME (several: separated by spaces), DLOCK_FENCING_TOKEN (several NAMEs:
the largest; a red_lock: the majority's token), DLOCK_FENCING_TOKENS (several NAMEs: each one's,
in order), DLOCK_PERMIT_ID (--permits, instead of a token).
)";

// The global options, into `g`.
void add_global_options(CLI::App& app, dlock_cli::global_options& g) {
  app.add_option("--url", g.urls,
                 "Redis URI: redis[s]://host:port, redis[s]+cluster://host:port,host:port for "
                 "a Redis Cluster, or redis[s]+sentinel://host:port,host:port/master-name for "
                 "Redis Sentinel (default: $DLOCK_URL, else redis://127.0.0.1:6379). exec takes "
                 "several, one per independent server: a red_lock held by a majority of them")
      ->allow_extra_args(false)  // one URI each: `--url A NAME` must not take NAME
      ->type_name("URL");
  app.add_option("--user", g.user, "ACL user name");
  app.add_option("--password", g.password, "password (or user:password in the URI)");
  app.add_option("--ca", g.ca, "TLS: CA bundle (PEM) to verify the server with");
  app.add_option("--cert", g.cert, "TLS: client certificate (PEM)");
  app.add_option("--key", g.key, "TLS: client private key (PEM)");
  app.add_option("--sni", g.sni, "TLS: host name the server certificate must carry");
  app.add_option("--timeout", g.timeout, "timeout of each Redis call, e.g. 500ms (default 3s)");
  app.add_flag("-v,--verbose", g.verbose, "diagnostics on stderr");
}

// exec and its options, into `eo`.
CLI::App* add_exec(CLI::App& app, dlock_cli::exec_options& eo) {
  auto* exec = app.add_subcommand("exec", "run a command while holding a lock");
  exec->footer(std::string{exec_forms} + examples);
  exec->add_option("--wait", eo.wait,
                   "give up after waiting this long (0: one try; default: forever)");
  exec->add_option("--lease", eo.lease,
                   "fixed lease instead of the renewed watchdog lease; also a limit on the run "
                   "time (SIGTERM, then SIGKILL before it ends)");
  exec->add_option("--kill-after", eo.kill_after,
                   "when the lease is lost or about to end: SIGKILL this long after SIGTERM "
                   "(at most a third of the lease; default: a third, at most 10s)");
  exec->add_flag("--fair", eo.fair,
                 "a fair lock (Redisson's RFairLock): waiters served in arrival order");
  exec->add_flag("--shared", eo.shared,
                 "a read hold of a read-write lock (Redisson's RReadWriteLock): shared with "
                 "other --shared execs, excludes --rw");
  exec->add_flag("--rw", eo.rw,
                 "the write hold of a read-write lock: excludes every other hold; waiting, it "
                 "holds back new --shared execs");
  exec->add_option("--permits", eo.permits,
                   "hold one permit of a leased semaphore of N permits instead of a lock: at "
                   "most N commands at once (sets N if the semaphore has none, else must match "
                   "its total)")
      ->type_name("N");
  exec->add_option("name", eo.names,
                   "lock name (with --permits: semaphore name); several: all of them or none (a "
                   "multi_lock). Then --, the command and its arguments")
      ->required();
  return exec;
}

// dlock's own arguments end at the first `--` after `exec`: the command follows. CLI11 drops the
// `--` and fills positionals in order, so it could not tell `exec A B -- CMD` from
// `exec A -- B CMD`. The index of that `--`, or argc.
int own_arguments(int argc, char** argv) {
  int i = 1;
  while (i < argc && std::string_view{argv[i]} != "exec") ++i;
  while (i < argc && std::string_view{argv[i]} != "--") ++i;
  return i;
}

// exec's NAMEs and command, from the words before the `--` and `command` after it; without a
// `--`, as before several NAMEs were taken: NAME, then the command. False (and why on stderr)
// when there is no command.
bool split_exec_words(dlock_cli::exec_options& eo, bool dashes, std::vector<std::string> command) {
  if (dashes) {
    eo.command = std::move(command);
  } else if (eo.names.size() > 1) {
    eo.command.assign(eo.names.begin() + 1, eo.names.end());
    eo.names.resize(1);
  }
  eo.name = dlock_cli::join(eo.names);
  if (!eo.command.empty()) return true;
  dlock_cli::complain("exec", "no command to run: give it after --, as in dlock exec NAME -- CMD");
  return false;
}

// The --url given into `g`: several only for exec (`exec_parsed`). False (and why on stderr)
// otherwise.
bool read_urls(dlock_cli::global_options& g, bool exec_parsed) {
  if (g.urls.size() == 1) g.url = g.urls.front();
  if (g.urls.size() <= 1 || exec_parsed) return true;
  dlock_cli::complain("--url", "only exec takes several (a red_lock over independent servers)");
  return false;
}

// latch and its words and --timeout, into `lo`.
CLI::App* add_latch(CLI::App& app, dlock_cli::latch_options& lo) {
  auto* latch = app.add_subcommand(
      "latch", "a count-down latch: NAME set N | count-down [N] | wait [--timeout DUR] | count");
  latch->add_option("words", lo.words, "NAME, then set N, count-down [N], wait or count");
  latch->add_option("--timeout", lo.timeout,
                    "wait: give up after this long (exit 75); default: wait as long as it takes");
  return latch;
}

// status and its options.
struct status_args {
  std::string name;
  bool json = false, metrics = false;
  std::optional<std::string> match, limit;
};

CLI::App* add_status(CLI::App& app, status_args& sa) {
  auto* status = app.add_subcommand(
      "status",
      "show a lock of any kind (holders, queues, lease, fencing counter), a semaphore (permits "
      "in use and their holders) or a latch's count; with --metrics, every one whose name "
      "matches a pattern, in the Prometheus text format");
  status->add_option("name", sa.name, "lock name (not with --metrics)");
  status->add_flag("--json", sa.json, "machine-readable output (see docs/cli.md)");
  status->add_flag("--metrics", sa.metrics,
                   "instead of NAME: the server-side view of every lock, semaphore and latch "
                   "whose name matches --match, found with SCAN (never KEYS; every master of a "
                   "cluster), as Prometheus gauges (see docs/cli.md)");
  status
      ->add_option("--match", sa.match,
                   "--metrics: the names to report, a SCAN MATCH glob (default '*')")
      ->type_name("PATTERN");
  status
      ->add_option("--limit", sa.limit,
                   "--metrics: read at most N names, then stop and report the view truncated "
                   "(default 10000)")
      ->type_name("N");
  return status;
}

// status NAME [--json], or status --metrics [--match PATTERN] [--limit N].
int run_status_of(const dlock_cli::global_options& g, const status_args& sa) {
  using namespace dlock_cli;
  if (!sa.metrics) {
    if (sa.match || sa.limit) {
      complain("status", "--match and --limit go with --metrics");
      return exit_usage;
    }
    if (sa.name.empty()) {
      complain("status", "give a lock NAME, or --metrics for every name matching --match");
      return exit_usage;
    }
    return run_status(g, sa.name, sa.json);
  }
  if (!sa.name.empty() || sa.json) {
    complain("status", "--metrics reports the names matching --match: give no NAME, no --json");
    return exit_usage;
  }
  metrics_options mo;
  if (sa.match) mo.match = *sa.match;
  if (sa.limit) mo.limit = *sa.limit;
  return run_status_metrics(g, mo);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dlock_cli;
  CLI::App app{"dlock: distributed locks on Redis (Redisson-compatible)", "dlock"};
  app.footer(examples);
  // "dlock 0.1.0": help2man builds dlock(1) from --help and this.
  app.set_version_flag("--version", "dlock " + std::string{dlock::version},
                       "print dlock's version and exit");
  app.require_subcommand(1);
  app.fallthrough();  // global options may also follow the subcommand: `dlock exec -v ...`
  global_options g;
  add_global_options(app, g);
  exec_options eo;
  auto* exec = add_exec(app, eo);

  status_args sa;
  auto* status = add_status(app, sa);
  std::string name;
  bool force = false;
  auto* unlock = app.add_subcommand("unlock", "release a lock whoever holds it (--force)");
  unlock->add_flag("--force", force, "required: delete the lock and wake its waiters");
  unlock->add_option("name", name, "lock name")->required();
  latch_options lo;
  auto* latch = add_latch(app, lo);
  auto* ping = app.add_subcommand("ping",
                                  "check the connection (on a cluster, to every node); warn about "
                                  "lock-evicting policies");

  const int own = own_arguments(argc, argv);
  try {
    app.parse(own, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : exit_usage;
  }
  if (!read_urls(g, exec->parsed()) ||
      (exec->parsed() &&
       !split_exec_words(eo, own < argc,
                         std::vector<std::string>(argv + std::min(own + 1, argc), argv + argc)))) {
    return exit_usage;
  }
  try {
    if (exec->parsed()) return run_exec(g, eo);
    if (status->parsed()) return run_status_of(g, sa);
    if (unlock->parsed()) return run_unlock(g, name, force);
    if (ping->parsed()) return run_ping(g);
    if (latch->parsed()) return run_latch(g, lo);
  } catch (const dlock::lock_error& e) {
    std::fprintf(stderr, "dlock: %s\n", e.what());
    return exit_code_for(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock: %s\n", e.what());
    return exit_software;
  }
  return exit_usage;
}
