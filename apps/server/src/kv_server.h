#pragma once
// server::kv_server — tessera-kv-server: a Redis-protocol server whose requests are tessera
// tasks on the server's string_tree (docs/architecture.md, "The Redis-protocol server").
//
// Threads: the tessera workers do all the work on connections (reading, parsing, the tree,
// writing replies) and wait for the sockets themselves: a worker that would park blocks in
// epoll_wait instead, through the runtime's idle hook (tessera/idle_hook.h), and turns readiness
// into serve tasks (one worker at a time: the poll role). The thread that calls run() only
// waits for signals and SHUTDOWN and ticks every 100 ms (the expiry sweep, idle clients); it
// never touches a connection. When nothing happens the workers sleep in epoll_wait (or parked)
// and that thread in its own: an idle server burns no CPU.
//
//   server::settings s;  s.port = 6380;
//   server::kv_server srv(s);
//   if (srv.listen(error) == server::listen_outcome::ok) srv.run();  // until SIGTERM/SHUTDOWN

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <tessera/tessera.h>

struct epoll_event;

#include "aof.h"
#include "config.h"
#include "connection.h"
#include "string_tree.h"

namespace server {

enum class listen_outcome : std::uint8_t { ok, protected_mode, failed };

struct server_stats {
  std::atomic<std::uint64_t> connections_received{0};
  std::atomic<std::uint64_t> rejected_connections{0};
  std::atomic<std::uint64_t> commands_processed{0};
  std::atomic<std::uint64_t> keyspace_hits{0};
  std::atomic<std::uint64_t> keyspace_misses{0};
  std::atomic<std::uint64_t> net_input_bytes{0};
  std::atomic<std::uint64_t> net_output_bytes{0};
  std::atomic<std::uint64_t> output_limit_disconnects{0};
  /// Batches that a flow went on with from its last batch's end (kv_server::batch_done).
  std::atomic<std::uint64_t> continued_batches{0};
};

class kv_server {
 public:
  explicit kv_server(const settings& s);
  kv_server(const kv_server&) = delete;
  kv_server& operator=(const kv_server&) = delete;
  ~kv_server();

  /// With appendonly yes: opens the log and replays it (aof.h), before listen(). `message` is
  /// the line to print either way.
  load_outcome load(std::string& message);
  /// Opens the listening sockets (protected mode refuses non-loopback addresses without
  /// requirepass). Writes the reason to `error` otherwise.
  listen_outcome listen(std::string& error);
  /// Serves until SIGTERM, SIGINT or SHUTDOWN; then stops accepting, lets the requests in flight
  /// finish and closes every connection. Returns the process's exit status.
  int run();
  /// From any thread: run() stops as above.
  void request_shutdown() noexcept;

  // ---- used by the connection flow and the commands --------------------------------------------
  settings& config() noexcept { return m_settings; }  ///< CONFIG SET on the serve flow
  std::mutex& config_mutex() noexcept { return m_config_mutex; }
  /// After a change of config() (under config_mutex()): refreshes the settings that every
  /// request reads without the mutex (below).
  void config_changed() noexcept;
  /// Whether requirepass is set, and maxmemory (0: none), as of the last config_changed().
  [[nodiscard]] bool auth_required() const noexcept {
    return m_auth_required.load(std::memory_order_acquire);
  }
  [[nodiscard]] std::uint64_t maxmemory() const noexcept {
    return m_maxmemory.load(std::memory_order_acquire);
  }
  string_tree& tree() noexcept { return *m_tree; }
  tessera::runtime& runtime() noexcept { return *m_rt; }
  server_stats& stats() noexcept { return m_stats; }
  std::int64_t start_ms() const noexcept { return m_start_ms; }
  std::size_t client_count() const;
  /// CLIENT LIST's text.
  std::string client_list() const;
  /// CLIENT KILL's filters (0 / empty: any).
  struct kill_filter {
    std::uint64_t id = 0;
    std::string addr;
    std::string laddr;
    bool none = false;  ///< a type or user no client has (master, replica, pubsub)
  };
  /// Closes the clients `f` matches (each by its own flow: the socket is shut down, and the
  /// flow's next read ends it), except `self`: skipped if `skip_self`, else counted and reported
  /// in `self_matched` (its flow closes it after the reply). Returns how many it closed.
  std::size_t kill_clients(const kill_filter& f, const connection& self, bool skip_self,
                           bool& self_matched);
  void set_client_name(connection& c, std::string name);
  std::string client_name(const connection& c) const;
  /// The connection's flow: after a readiness event (serve task) and after a batch's last task.
  void serve(connection& c, tessera::context& ctx);
  void batch_done(connection& c, tessera::context& ctx);
  std::vector<int> ports() const { return m_ports; }
  /// Updates the limits every connection's parser applies (CONFIG SET proto-max-bulk-len).
  parse_limits limits() const;
  /// The append-only log, or nullptr with appendonly no.
  aof_log* aof() noexcept { return m_aof.get(); }
  /// Runs `fn` in a task that the poll role's holder spawns outside any task (a fresh operation of
  /// the epoch mechanism). From any thread; dropped once the server stops.
  void post(std::function<void(tessera::context&)> fn);
  /// Goes on with a connection whose replies waited for the log (aof_log::park).
  void resume_flow(connection& c) { finish_flow(c); }

 private:
  void accept_all(int listener);
  /// A readiness event, handled by the worker that holds the poll role (outside any task).
  void handle_event(const epoll_event& e);
  /// The runtime's idle hook (tessera/idle_hook.h): a worker with nothing to do polls the
  /// sockets (timeout 0) or blocks in epoll_wait, if no other worker does.
  tessera::idle_wait idle_wait(tessera::worker_id w, std::chrono::nanoseconds timeout);
  /// The idle hook's wake: an eventfd write that ends the poll role holder's epoll_wait.
  void wake_poller() noexcept;
  /// Sends what is pending and ends the flow (or closes the connection).
  void finish_flow(connection& c);
  void send_and_release(connection& c);
  void advance(connection& c, tessera::context& ctx);
  bool run_batch(connection& c, tessera::context& ctx);
  void complete_batch(connection& c);
  enum class flush_outcome : std::uint8_t { sent, pending, failed };
  flush_outcome flush(connection& c);
  /// The end of a flow: `flow` back to 0, unless events came meanwhile or, `blocked` false,
  /// requests or input are left; then the poll role spawns a fresh serve task (queue_serve).
  /// `blocked`: replies wait for the client to read (EPOLLOUT's edge starts the next flow).
  void release(connection& c, bool blocked);
  void queue_serve(connection& c);
  void close_connection(connection& c);
  /// The poll role's holder, after a round of events: frees the connections closed before it.
  void free_closed();
  void tick();
  void spawn_posted();

  settings m_settings;
  mutable std::mutex m_config_mutex;
  // release stores in config_changed(), acquire loads per request (no mutex on that path).
  std::atomic<bool> m_auth_required{false};
  std::atomic<std::uint64_t> m_maxmemory{0};
  std::unique_ptr<tessera::runtime> m_rt;
  std::unique_ptr<string_tree> m_tree;
  server_stats m_stats;
  int m_epoll = -1;
  int m_signal_fd = -1;
  int m_wake_fd = -1;     // in m_epoll: posted work, flows to go on with, the idle hook's wake
  int m_main_epoll = -1;  // run()'s: the signals and m_stop_fd
  int m_stop_fd = -1;     // request_shutdown's eventfd
  /// Held by the one worker that waits in (or polls) m_epoll, and by run() from the shutdown
  /// on. acquire/release: the events array, the connections freed after a round (free_closed).
  std::atomic<bool> m_poll_role{false};
  std::unique_ptr<epoll_event[]> m_events;  // the poll role's
  std::vector<int> m_listeners;
  std::vector<int> m_ports;
  std::atomic<bool> m_stopping{false};
  std::atomic<bool> m_sweeping{false};
  std::int64_t m_start_ms = 0;
  std::atomic<std::uint64_t> m_next_id{1};
  mutable std::mutex m_clients_mutex;
  std::map<std::uint64_t, connection*> m_clients;  // GUARDED_BY(m_clients_mutex)
  std::map<std::uint64_t, std::string> m_names;    // GUARDED_BY(m_clients_mutex)
  leaf_walk m_sweep;
  std::unique_ptr<aof_log> m_aof;
  std::mutex m_posted_mutex;
  std::vector<std::function<void(tessera::context&)>> m_posted;  // GUARDED_BY(m_posted_mutex)
  std::vector<connection*> m_reserve;  // GUARDED_BY(m_posted_mutex): flows to go on with
  std::vector<connection*> m_closed;   // GUARDED_BY(m_posted_mutex): to free (free_closed)
  std::atomic<bool> m_have_closed{false};  ///< m_closed may be non-empty (relaxed hint)
};

}  // namespace server
