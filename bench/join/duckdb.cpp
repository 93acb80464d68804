// join on DuckDB: its own hash join of the same query on the same columns, in a helper process
// (duckdb_join.py, run by the project's .venv Python: no libduckdb is packaged for Debian 12,
// the PyPI wheel is the DuckDB we have) that loads the columns into in-memory tables once per
// configuration and times each query itself; this side sends "run" per sample and reads
// "<seconds> <count> <sum>". With --pin the helper is bound to the CPUs of tessera's workers
// 0..W-1 before DuckDB starts its threads.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "join/join.h"
#include "tessera/runtime.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): for posix_spawn

namespace tessera::bench::join_bench {

namespace {

/// The helper process and the pipes to it.
class duckdb_helper {
 public:
  explicit duckdb_helper(const config& cfg) {
    std::vector<std::string> args{TESSERA_JOIN_PYTHON,
                                  TESSERA_BENCH_DUCKDB_SCRIPT,
                                  "--cache",
                                  cfg.cache.string(),
                                  "--join",
                                  std::string(::join::to_string(cfg.kind)),
                                  "--threads",
                                  std::to_string(cfg.workers)};
    if (cfg.tessera.pin) {
      const std::vector<unsigned> cpus = default_worker_cpus();
      std::string list;
      for (unsigned i = 0; i < cfg.workers && !cpus.empty(); ++i)
        list += (list.empty() ? "" : ",") + std::to_string(cpus[i % cpus.size()]);
      args.insert(args.end(), {"--cpus", list});
    }
    std::array<int, 2> to{};
    std::array<int, 2> from{};
    if (::pipe2(to.data(), O_CLOEXEC) != 0 || ::pipe2(from.data(), O_CLOEXEC) != 0)
      throw bench_failure(std::string("duckdb: pipe: ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to[0], 0);
    posix_spawn_file_actions_adddup2(&actions, from[1], 1);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&m_pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(to[0]);
    ::close(from[1]);
    m_to = ::fdopen(to[1], "w");
    m_from = ::fdopen(from[0], "r");
    if (rc != 0) {
      close_pipes();
      throw bench_failure(std::string("duckdb: cannot start ") + args[0] + ": " +
                          std::strerror(rc) + " (run scripts/install-deps.sh for the .venv)");
    }
    const std::string ready = read_line();
    if (ready.rfind("ready", 0) != 0) {
      finish();
      throw bench_failure("duckdb: the helper " + args[1] + " did not start (see above)");
    }
  }
  duckdb_helper(const duckdb_helper&) = delete;
  duckdb_helper& operator=(const duckdb_helper&) = delete;
  ~duckdb_helper() { finish(); }

  /// One query: its time and answer.
  std::pair<double, ::join::join_result> run() {
    std::fputs("run\n", m_to);
    std::fflush(m_to);
    const std::string line = read_line();
    double seconds = 0;
    unsigned long long count = 0;
    long long sum = 0;
    if (std::sscanf(line.c_str(), "%lf %llu %lld", &seconds, &count, &sum) != 3)
      throw bench_failure("duckdb: the helper answered '" + line + "' (see above)");
    return {seconds, ::join::join_result{count, static_cast<std::int64_t>(sum)}};
  }

 private:
  std::string read_line() {
    std::array<char, 256> buf{};
    if (std::fgets(buf.data(), static_cast<int>(buf.size()), m_from) == nullptr) return {};
    std::string s = buf.data();
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  void close_pipes() noexcept {
    if (m_to != nullptr) std::fclose(m_to);
    if (m_from != nullptr) std::fclose(m_from);
    m_to = nullptr;
    m_from = nullptr;
  }
  void finish() noexcept {
    if (m_to != nullptr) {
      std::fputs("quit\n", m_to);
      std::fflush(m_to);
    }
    close_pipes();
    if (m_pid > 0) {
      int status = 0;
      while (::waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
      }
      m_pid = 0;
    }
  }

  pid_t m_pid = 0;
  std::FILE* m_to = nullptr;
  std::FILE* m_from = nullptr;
};

}  // namespace

measurement run_duckdb(const config& cfg) {
  duckdb_helper helper(cfg);
  return measure(cfg.label, cfg.repeat, [&] {
    const auto [seconds, r] = helper.run();
    return checked("duckdb", cfg, r, seconds);
  });
}

}  // namespace tessera::bench::join_bench
