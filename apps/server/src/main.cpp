// tessera-kv-server: a Redis-protocol server on the tessera runtime (kv_server.h).
#include <cstdio>
#include <string>

#include <unistd.h>

#include "config.h"
#include "kv_server.h"

int main(int argc, char** argv) {
  server::settings s;
  std::string error;
  switch (server::load_config(argc, argv, s, error)) {
    case server::config_outcome::help:
      std::fputs(server::usage_text().c_str(), stdout);
      return 0;
    case server::config_outcome::version:
      std::puts("tessera-kv-server 0.1.0 (Redis 7.0 protocol)");
      return 0;
    case server::config_outcome::error:
      std::fprintf(stderr, "tessera-kv-server: %s\n", error.c_str());
      return 1;
    case server::config_outcome::ok: break;
  }
  if (!s.logfile.empty() && std::freopen(s.logfile.c_str(), "a", stdout) == nullptr) {
    std::fprintf(stderr, "tessera-kv-server: cannot open logfile %s\n", s.logfile.c_str());
    return 1;
  }
  if (!s.trace.empty()) {
    // The timeline is written when the server stops: say now, not then, that it cannot be.
    const std::string::size_type slash = s.trace.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : s.trace.substr(0, slash + 1);
    if (::access(dir.c_str(), W_OK) != 0) {
      std::fprintf(stderr, "tessera-kv-server: cannot write the trace into %s\n", dir.c_str());
      return 1;
    }
  }
  server::kv_server srv(s);
  std::string loaded;
  const server::load_outcome lo = srv.load(loaded);
  if (!loaded.empty()) {
    std::printf("tessera-kv-server: %s\n", loaded.c_str());
    std::fflush(stdout);
  }
  if (lo == server::load_outcome::failed) {
    std::fprintf(stderr, "tessera-kv-server: %s\n", loaded.c_str());
    return 1;
  }
  switch (srv.listen(error)) {
    case server::listen_outcome::ok: break;
    case server::listen_outcome::protected_mode:
    case server::listen_outcome::failed:
      std::fprintf(stderr, "tessera-kv-server: %s\n", error.c_str());
      return 1;
  }
  std::string where;
  for (const auto& b : s.bind) where += (where.empty() ? "" : ", ") + b;
  std::printf("tessera-kv-server: listening on %s port %d, %u workers, pid %d\n", where.c_str(),
              srv.ports().front(), srv.runtime().workers(), static_cast<int>(::getpid()));
  if (!s.trace.empty())
    std::printf("tessera-kv-server: tracing the workers' tasks into %s (written at exit)\n",
                s.trace.c_str());
  std::fflush(stdout);
  return srv.run();
}
