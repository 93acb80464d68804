// server::kv_server — see kv_server.h: the poll role (the workers' idle hook) and the connection
// flow.
#include "kv_server.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "commands.h"

namespace server {
namespace {

/// epoll's data for the descriptors that are not connections.
char signal_tag;
char wake_tag;
char stop_tag;

/// Events taken by one epoll_wait.
constexpr int max_events = 256;

constexpr std::size_t read_chunk = std::size_t{16} * 1024;
/// Bytes read per readiness event before the batch runs (the rest on the next event).
constexpr std::size_t read_per_event = std::size_t{1024} * 1024;
/// Requests per batch at most.
constexpr std::size_t batch_limit = 512;
/// Batches a flow goes on with from the end of the one before (batch_done), after its first.
constexpr std::uint8_t continued_limit = 4;
/// Redis's client-query-buffer-limit: unparsed input beyond it closes the connection.
constexpr std::size_t query_buffer_limit = std::size_t{1} << 30;

/// Reads and answers a connection after a readiness event.
class serve_task final : public tessera::task {
 public:
  serve_task(kv_server* srv, connection* c) : m_srv(srv), m_conn(c) {}
  tessera::task* execute(tessera::context& ctx) override {
    m_srv->serve(*m_conn, ctx);
    return nullptr;
  }

 private:
  kv_server* m_srv;
  connection* m_conn;
};

/// Starts the expiry sweep: a walk over every leaf that removes expired slots.
class sweep_task final : public tessera::task {
 public:
  sweep_task(string_tree* tree, leaf_walk* w) : m_tree(tree), m_walk(w) {}
  tessera::task* execute(tessera::context& ctx) override {
    m_tree->walk(*m_walk, ctx);
    return nullptr;
  }

 private:
  string_tree* m_tree;
  leaf_walk* m_walk;
};

walk_step sweep_leaf(leaf_walk& /*w*/, leaf_access& a, leaf& l) {
  for (std::size_t i = l.slots.size(); i-- > 0;) {
    const slot& s = l.slots[i];
    if (s.expire_ms != 0 && s.expire_ms <= a.now_ms()) {
      const std::string key = s.key;
      a.find(key);  // a writer's find removes the expired slot (and counts it)
    }
  }
  return walk_step::next_leaf;
}

void sweep_done(leaf_walk& w, tessera::context& /*ctx*/) {
  // release: the walk's state is reusable once the tick sees the flag cleared.
  static_cast<std::atomic<bool>*>(w.user)->store(false, std::memory_order_release);
}

std::string peer_name(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = {};
  int port = 0;
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
    port = ntohs(in->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

/// Whether the process may run on one CPU only (its affinity mask).
bool one_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return false;
  return CPU_COUNT(&set) == 1;
}

bool is_loopback(const std::string& addr) {
  return addr == "127.0.0.1" || addr == "::1" || addr == "localhost" ||
         addr.rfind("127.", 0) == 0;
}

}  // namespace

kv_server::kv_server(const settings& s) : m_settings(s) {
  // SIGTERM and SIGINT go to run()'s signalfd: blocked here, before the workers start, so
  // that every thread inherits the mask. SIGPIPE is ignored (a write to a closed peer fails).
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  // A log that reaches RLIMIT_FSIZE fails its write with EFBIG (handled as any write error,
  // aof.h) instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  m_signal_fd = ::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  m_wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  m_stop_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  m_epoll = ::epoll_create1(EPOLL_CLOEXEC);
  m_main_epoll = ::epoll_create1(EPOLL_CLOEXEC);
  m_events = std::make_unique<epoll_event[]>(max_events);
  {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &wake_tag;
    ::epoll_ctl(m_epoll, EPOLL_CTL_ADD, m_wake_fd, &ev);
  }
  tessera::runtime_options o;
  if (s.workers != 0) o.workers = s.workers;
  if (s.worker_spin_us < 0 && one_cpu()) {
    // On one CPU an idle worker that spins only burns it: the sockets wake it in epoll_wait
    // (the idle hook), and a second worker would need the CPU it holds (performance-notes.md,
    // "The server's CPU per request"; with two CPUs shared by two workers the spin paid in
    // throughput). Reported by CONFIG GET.
    m_settings.worker_spin_us = 0;
  }
  if (m_settings.worker_spin_us >= 0) {
    o.spin_before_park = std::chrono::microseconds(m_settings.worker_spin_us);
  }
  // The workers wait for the sockets themselves (idle_wait): no thread hands events over.
  o.idle.wait = [this](tessera::worker_id w, std::chrono::nanoseconds timeout) {
    return idle_wait(w, timeout);
  };
  o.idle.wake = [this](tessera::worker_id /*w*/) { wake_poller(); };
  o.trace.file = s.trace;
  if (s.trace_events != 0) o.trace.events_per_worker = s.trace_events;
  config_changed();
  m_rt = std::make_unique<tessera::runtime>(o);
  m_tree = std::make_unique<string_tree>(*m_rt);
  m_start_ms = steady_ms();
  m_sweep.writes = true;
  m_sweep.visit = &sweep_leaf;
  m_sweep.on_done = &sweep_done;
  m_sweep.user = &m_sweeping;
  if (s.appendonly) m_aof = std::make_unique<aof_log>(*this, s);
}

kv_server::~kv_server() {
  m_rt->wait_idle();
  {
    const std::lock_guard<std::mutex> lock(m_clients_mutex);
    for (auto& [id, c] : m_clients) {
      ::close(c->fd);
      delete c;  // NOLINT(cppcoreguidelines-owning-memory): the registry owns its connections
    }
    m_clients.clear();
  }
  {
    const std::lock_guard<std::mutex> lock(m_posted_mutex);
    for (connection* c : m_closed) delete c;  // NOLINT(cppcoreguidelines-owning-memory)
    m_closed.clear();
  }
  m_aof.reset();
  m_tree.reset();
  m_rt->stop();
  for (const int fd : m_listeners) ::close(fd);
  if (m_epoll >= 0) ::close(m_epoll);
  if (m_signal_fd >= 0) ::close(m_signal_fd);
  if (m_wake_fd >= 0) ::close(m_wake_fd);
  if (m_main_epoll >= 0) ::close(m_main_epoll);
  if (m_stop_fd >= 0) ::close(m_stop_fd);
}

void kv_server::config_changed() noexcept {
  m_auth_required.store(!m_settings.requirepass.empty(), std::memory_order_release);
  m_maxmemory.store(m_settings.maxmemory, std::memory_order_release);
}

parse_limits kv_server::limits() const {
  const std::lock_guard<std::mutex> lock(m_config_mutex);
  parse_limits l;
  l.max_bulk_len = m_settings.proto_max_bulk_len;
  return l;
}

load_outcome kv_server::load(std::string& message) {
  if (!m_aof) return load_outcome::loaded;
  return m_aof->load(message);
}

void kv_server::post(std::function<void(tessera::context&)> fn) {
  {
    const std::lock_guard<std::mutex> lock(m_posted_mutex);
    m_posted.push_back(std::move(fn));
  }
  const std::uint64_t one = 1;
  // The eventfd write wakes the poll role's holder (or is seen by the next worker to take it),
  // which takes the list under the mutex (spawn_posted).
  [[maybe_unused]] const auto n = ::write(m_wake_fd, &one, sizeof(one));
}

void kv_server::spawn_posted() {
  std::vector<std::function<void(tessera::context&)>> posted;
  {
    const std::lock_guard<std::mutex> lock(m_posted_mutex);
    posted.swap(m_posted);
  }
  for (auto& fn : posted) {
    m_rt->spawn([f = std::move(fn)](tessera::context& ctx) { f(ctx); });
  }
}

listen_outcome kv_server::listen(std::string& error) {
  if (m_settings.protected_mode && m_settings.requirepass.empty()) {
    for (const auto& b : m_settings.bind) {
      if (!is_loopback(b)) {
        error = "protected mode: refusing to listen on " + b +
                " without requirepass (set a password, or --protected-mode no)";
        return listen_outcome::protected_mode;
      }
    }
  }
  for (const auto& b : m_settings.bind) {
    const bool v6 = b.find(':') != std::string::npos;
    const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      error = std::string("socket: ") + std::strerror(errno);
      return listen_outcome::failed;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_storage addr{};
    socklen_t len = 0;
    const std::string host = b == "localhost" ? "127.0.0.1" : b;
    if (v6) {
      auto* in = reinterpret_cast<sockaddr_in6*>(&addr);
      in->sin6_family = AF_INET6;
      in->sin6_port = htons(static_cast<std::uint16_t>(m_settings.port));
      if (::inet_pton(AF_INET6, host.c_str(), &in->sin6_addr) != 1) {
        ::close(fd);
        error = "bad bind address " + b;
        return listen_outcome::failed;
      }
      len = sizeof(sockaddr_in6);
    } else {
      auto* in = reinterpret_cast<sockaddr_in*>(&addr);
      in->sin_family = AF_INET;
      in->sin_port = htons(static_cast<std::uint16_t>(m_settings.port));
      if (::inet_pton(AF_INET, host.c_str(), &in->sin_addr) != 1) {
        ::close(fd);
        error = "bad bind address " + b;
        return listen_outcome::failed;
      }
      len = sizeof(sockaddr_in);
    }
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 511) != 0) {
      error = "could not listen on " + b + ":" + std::to_string(m_settings.port) + ": " +
              std::strerror(errno);
      ::close(fd);
      return listen_outcome::failed;
    }
    sockaddr_storage bound{};
    socklen_t blen = sizeof(bound);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen);
    m_ports.push_back(bound.ss_family == AF_INET6
                          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port));
    epoll_event ev{};
    ev.events = EPOLLIN;
    m_listeners.push_back(fd);
    ev.data.u64 = static_cast<std::uint64_t>(fd) << 8 | 1;  // listener: low byte 1, fd above
    ::epoll_ctl(m_epoll, EPOLL_CTL_ADD, fd, &ev);
  }
  return listen_outcome::ok;
}

void kv_server::request_shutdown() noexcept {
  m_stopping.store(true, std::memory_order_relaxed);
  const std::uint64_t one = 1;
  // The eventfd write wakes run(); it reads m_stopping after it (the write is a syscall).
  [[maybe_unused]] const auto n = ::write(m_stop_fd, &one, sizeof(one));
}

void kv_server::wake_poller() noexcept {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(m_wake_fd, &one, sizeof(one));
}

tessera::idle_wait kv_server::idle_wait(tessera::worker_id /*w*/,
                                        std::chrono::nanoseconds timeout) {
  const bool poll = timeout.count() == 0;
  // From the shutdown on, run() takes the role for good: no worker takes it again.
  if (m_stopping.load(std::memory_order_relaxed)) {
    return poll ? tessera::idle_wait::waited : tessera::idle_wait::declined;
  }
  // One worker at a time takes events (and frees closed connections after its round, which
  // needs every round that could name them handled); the others park as without the hook.
  // acquire: the last holder's round (its handling of the events array and of m_closed).
  if (m_poll_role.exchange(true, std::memory_order_acquire)) {
    return poll ? tessera::idle_wait::waited : tessera::idle_wait::declined;
  }
  // Woken since this worker entered the hook, its wake_poller() write maybe read by another
  // worker's round: a poll, not a wait (idle_hook.h). A wake-up not seen here writes m_wake_fd
  // after this point, and only the role's holder reads it.
  const bool woken = !poll && tessera::idle_woken();
  // Rounded up: a wait shorter than a millisecond would be a poll.
  const int ms = poll || woken ? 0 : static_cast<int>((timeout.count() + 999'999) / 1'000'000);
  const int n = ::epoll_wait(m_epoll, m_events.get(), max_events, ms);
  // Each serve task spawned here, outside any task, begins an operation of its own (epochs);
  // it goes to this worker's pools and runs when the hook returns.
  for (int i = 0; i < n; ++i) handle_event(m_events[static_cast<std::size_t>(i)]);
  // After the round: a connection closed before this point had its EPOLL_CTL_DEL done before
  // the next epoll_wait, so no later round can name it.
  if (m_have_closed.load(std::memory_order_relaxed)) free_closed();
  m_poll_role.store(false, std::memory_order_release);
  return tessera::idle_wait::waited;
}

int kv_server::run() {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &signal_tag;
  ::epoll_ctl(m_main_epoll, EPOLL_CTL_ADD, m_signal_fd, &ev);
  ev.data.ptr = &stop_tag;
  ::epoll_ctl(m_main_epoll, EPOLL_CTL_ADD, m_stop_fd, &ev);
  // Connections already accepted by the workers may wait for an event: a worker that parked
  // before the hook could see a listener (none was registered) waits in epoll_wait by now, or
  // will at its next idle.
  wake_poller();
  epoll_event events[4];
  std::int64_t next_tick = steady_ms() + 100;
  while (!m_stopping.load(std::memory_order_relaxed)) {
    const int n = ::epoll_wait(m_main_epoll, events, 4, 100);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.ptr == &signal_tag) {
        signalfd_siginfo si{};
        while (::read(m_signal_fd, &si, sizeof(si)) == sizeof(si)) {
          std::printf("tessera-kv-server: signal %u, shutting down\n", si.ssi_signo);
          std::fflush(stdout);
        }
        request_shutdown();
      } else {
        std::uint64_t v = 0;
        [[maybe_unused]] const auto r = ::read(m_stop_fd, &v, sizeof(v));
      }
    }
    const std::int64_t now = steady_ms();
    if (now >= next_tick) {
      next_tick = now + 100;
      tick();
    }
  }
  // Stop accepting: take the poll role for good (its holder is woken out of epoll_wait and
  // gives it up after its round; m_stopping keeps the workers from taking it again), so that no
  // worker takes events from here on; the workers park as without the hook.
  while (m_poll_role.exchange(true, std::memory_order_acquire)) {
    wake_poller();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (m_have_closed.load(std::memory_order_relaxed)) free_closed();
  // Let what is in flight finish (its replies are written), close everything.
  for (const int fd : m_listeners) ::close(fd);
  m_listeners.clear();
  m_rt->wait_idle();
  // The log: what is buffered written and fdatasync'ed, the replies that waited for it sent.
  if (m_aof) m_aof->shutdown();
  std::printf("tessera-kv-server: ready to exit, bye bye\n");
  std::fflush(stdout);
  return 0;
}

void kv_server::handle_event(const epoll_event& e) {
  void* tag = e.data.ptr;
  if (tag == &wake_tag) {
    std::uint64_t v = 0;
    [[maybe_unused]] const auto r = ::read(m_wake_fd, &v, sizeof(v));
    if (!m_stopping.load(std::memory_order_relaxed)) spawn_posted();
    std::vector<connection*> ready;
    {
      const std::lock_guard<std::mutex> lock(m_posted_mutex);
      ready.swap(m_reserve);
    }
    // Flows that go on (their `flow` count stays above 0); outside any task, as below.
    for (connection* c : ready) m_rt->spawn(m_rt->make_task<serve_task>(this, c));
  } else if ((e.data.u64 & 0xFF) == 1) {
    accept_all(static_cast<int>(e.data.u64 >> 8));
  } else {
    auto* c = static_cast<connection*>(tag);
    // acquire: a count of 0 was stored by the last flow's release (connection.h). Only the
    // event that finds 0 starts a flow; a running flow sees the count move and goes on.
    if (c->flow.fetch_add(1, std::memory_order_acquire) != 0) return;
    // Outside any task: each serve task begins an operation of its own (epochs).
    m_rt->spawn(m_rt->make_task<serve_task>(this, c));
  }
}

void kv_server::tick() {
  const std::int64_t now = steady_ms();
  if (m_aof) m_aof->tick();
  // The expiry sweep, at most every 100 ms and only while keys have deadlines. acquire: the
  // last sweep's writes to m_sweep are done (sweep_done's release).
  if (m_tree->counters().volatile_keys.load(std::memory_order_relaxed) > 0 &&
      !m_sweeping.load(std::memory_order_acquire)) {
    m_sweeping.store(true, std::memory_order_relaxed);
    m_sweep.from.clear();
    m_rt->spawn(m_rt->make_task<sweep_task>(m_tree.get(), &m_sweep));
  }
  std::uint64_t timeout_s = 0;
  {
    const std::lock_guard<std::mutex> lock(m_config_mutex);
    timeout_s = m_settings.timeout_s;
  }
  if (timeout_s != 0) {
    const std::lock_guard<std::mutex> lock(m_clients_mutex);
    for (auto& [id, c] : m_clients) {
      if (now - c->last_ms.load(std::memory_order_relaxed) >
          static_cast<std::int64_t>(timeout_s) * 1000) {
        // The connection's own flow closes it: its next read sees the end.
        ::shutdown(c->fd, SHUT_RDWR);
      }
    }
  }
}

void kv_server::accept_all(int listener) {
  while (true) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&addr), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or an error that the next readiness repeats
    m_stats.connections_received.fetch_add(1, std::memory_order_relaxed);
    std::uint64_t maxclients = 0;
    {
      const std::lock_guard<std::mutex> lock(m_config_mutex);
      maxclients = m_settings.maxclients;
    }
    if (client_count() >= maxclients) {
      static constexpr std::string_view msg = "-ERR max number of clients reached\r\n";
      [[maybe_unused]] const auto w = ::write(fd, msg.data(), msg.size());
      ::close(fd);
      m_stats.rejected_connections.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const std::uint64_t id = m_next_id.fetch_add(1, std::memory_order_relaxed);
    // NOLINTNEXTLINE(cppcoreguidelines-owning-memory): the registry owns it until close
    auto* c = new connection(*this, fd, id, peer_name(addr), limits());
    c->created_ms = steady_ms();
    c->last_ms.store(c->created_ms, std::memory_order_relaxed);
    {
      const std::lock_guard<std::mutex> lock(m_config_mutex);
      c->authenticated = m_settings.requirepass.empty();
    }
    {
      const std::lock_guard<std::mutex> lock(m_clients_mutex);
      m_clients.emplace(id, c);
    }
    // Registered once, edge-triggered: an event per arrival of input (or of room for output
    // after a send that found none), counted in `flow` (connection.h). The registration itself
    // reports the socket writable: a first serve task that finds nothing to read.
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.ptr = c;
    ::epoll_ctl(m_epoll, EPOLL_CTL_ADD, fd, &ev);
  }
}

std::size_t kv_server::client_count() const {
  const std::lock_guard<std::mutex> lock(m_clients_mutex);
  return m_clients.size();
}

void kv_server::set_client_name(connection& c, std::string name) {
  const std::lock_guard<std::mutex> lock(m_clients_mutex);
  if (name.empty()) {
    m_names.erase(c.id);
  } else {
    m_names[c.id] = std::move(name);
  }
}

std::string kv_server::client_name(const connection& c) const {
  const std::lock_guard<std::mutex> lock(m_clients_mutex);
  const auto it = m_names.find(c.id);
  return it == m_names.end() ? std::string() : it->second;
}

std::string kv_server::client_list() const {
  const std::lock_guard<std::mutex> lock(m_clients_mutex);
  const std::int64_t now = steady_ms();
  std::string r;
  for (const auto& [id, c] : m_clients) {
    const auto it = m_names.find(id);
    r += "id=" + std::to_string(id) + " addr=" + c->addr + " fd=" + std::to_string(c->fd) +
         " name=" + (it == m_names.end() ? std::string() : it->second) +
         " age=" + std::to_string((now - c->created_ms) / 1000) +
         " idle=" + std::to_string((now - c->last_ms.load(std::memory_order_relaxed)) / 1000) +
         " flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 user=default\n";
  }
  return r;
}

std::size_t kv_server::kill_clients(const kill_filter& f, const connection& self,
                                    bool skip_self, bool& self_matched) {
  self_matched = false;
  if (f.none) return 0;
  std::size_t n = 0;
  // Under the registry's mutex: a connection is removed from it before its socket is closed
  // (close_connection), so every fd seen here is still the connection's.
  const std::lock_guard<std::mutex> lock(m_clients_mutex);
  for (const auto& [id, c] : m_clients) {
    if (f.id != 0 && id != f.id) continue;
    if (!f.addr.empty() && c->addr != f.addr) continue;
    if (!f.laddr.empty()) {
      sockaddr_storage local{};
      socklen_t len = sizeof(local);
      if (::getsockname(c->fd, reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
          peer_name(local) != f.laddr) {
        continue;
      }
    }
    if (c == &self && skip_self) continue;
    ++n;
    if (c == &self) {
      self_matched = true;
    } else {
      ::shutdown(c->fd, SHUT_RDWR);  // as the idle timeout does (tick)
    }
  }
  return n;
}

// ---- the connection flow ----------------------------------------------------------------------

kv_server::flush_outcome kv_server::flush(connection& c) {
  while (c.out_pos < c.out.size()) {
    const ssize_t n =
        ::send(c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_pos += static_cast<std::size_t>(n);
      m_stats.net_output_bytes.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      std::uint64_t limit = 0;
      {
        const std::lock_guard<std::mutex> lock(m_config_mutex);
        limit = m_settings.output_buffer_limit;
      }
      if (limit != 0 && c.out.size() - c.out_pos > limit) {
        m_stats.output_limit_disconnects.fetch_add(1, std::memory_order_relaxed);
        return flush_outcome::failed;
      }
      return flush_outcome::pending;
    }
    if (n < 0 && errno == EINTR) continue;
    return flush_outcome::failed;
  }
  c.out.clear();
  c.out_pos = 0;
  return flush_outcome::sent;
}

void kv_server::release(connection& c, bool blocked) {
  const bool more_ready =
      !blocked && (c.input_may_remain || (c.in_pos < c.in.size() && !c.parse_waits));
  if (!more_ready) {
    std::uint64_t seen = c.flow_seen;
    // release: this flow's writes to the connection happen before the next flow's (the poll role's
    // acquire RMW that finds 0). The last touch of the connection by this flow on success.
    if (c.flow.compare_exchange_strong(seen, 0, std::memory_order_release,
                                       std::memory_order_relaxed)) {
      return;
    }
    // Events came after this flow read the count: input or room for output that it may not
    // have seen. A fresh serve task reads again.
  }
  queue_serve(c);
}

void kv_server::queue_serve(connection& c) {
  // The flow goes on in a serve task spawned by the poll role (outside any task, so that it
  // begins an operation of its own: a task spawned here would extend this one's, see
  // batch_done). `flow` stays above 0 meanwhile: the poll role's events start nothing.
  {
    const std::lock_guard<std::mutex> lock(m_posted_mutex);
    m_reserve.push_back(&c);
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(m_wake_fd, &one, sizeof(one));
}

void kv_server::close_connection(connection& c) {
  {
    const std::lock_guard<std::mutex> lock(m_clients_mutex);
    m_clients.erase(c.id);
    m_names.erase(c.id);
  }
  ::epoll_ctl(m_epoll, EPOLL_CTL_DEL, c.fd, nullptr);
  ::close(c.fd);
  // Not freed here: the poll role may hold an event of this connection from an epoll_wait before the
  // DEL (its count is above 0, so that event starts nothing). The poller frees it after its
  // current round of events (free_closed); no task holds it any more.
  {
    const std::lock_guard<std::mutex> lock(m_posted_mutex);
    m_closed.push_back(&c);
  }
  m_have_closed.store(true, std::memory_order_relaxed);
}

void kv_server::free_closed() {
  std::vector<connection*> closed;
  {
    const std::lock_guard<std::mutex> lock(m_posted_mutex);
    closed.swap(m_closed);
    m_have_closed.store(false, std::memory_order_relaxed);
  }
  for (connection* c : closed) delete c;  // NOLINT(cppcoreguidelines-owning-memory)
}

void kv_server::serve(connection& c, tessera::context& ctx) {
  // The events counted so far are answered by what this task reads and sends from now on; one
  // counted later makes the flow's end go round again (release).
  c.flow_seen = c.flow.load(std::memory_order_acquire);
  c.continued = 0;
  c.input_may_remain = false;
  if (c.out_pos < c.out.size()) {
    switch (flush(c)) {
      case flush_outcome::pending: return release(c, true);
      case flush_outcome::failed: return close_connection(c);
      case flush_outcome::sent: break;
    }
    if (c.close_after_reply) return close_connection(c);
  }
  std::size_t got = 0;
  bool eof = false;
  // Read into the worker's buffer and append what came (growing c.in by a whole chunk first
  // would zero-fill 16 KiB per read: a sixth of a pipelined GET's instructions).
  thread_local std::unique_ptr<char[]> chunk = std::make_unique_for_overwrite<char[]>(read_chunk);
  // Edge-triggered: read until the socket is empty (a short read), or to the per-event limit,
  // after which the flow's end goes round again (input_may_remain).
  c.input_may_remain = true;
  while (got < read_per_event) {
    if (c.in_pos > 0 && c.in_pos == c.in.size()) {
      c.in.clear();
      c.in_pos = 0;
    }
    const ssize_t n = ::recv(c.fd, chunk.get(), read_chunk, 0);
    if (n > 0) {
      c.in.append(chunk.get(), static_cast<std::size_t>(n));
      got += static_cast<std::size_t>(n);
      if (static_cast<std::size_t>(n) < read_chunk) {
        c.input_may_remain = false;
        break;
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      c.input_may_remain = false;
      break;
    }
    if (n < 0 && errno == EINTR) continue;
    eof = true;  // the peer closed, or an error
    break;
  }
  if (got > 0) {
    m_stats.net_input_bytes.fetch_add(got, std::memory_order_relaxed);
    c.last_ms.store(steady_ms(), std::memory_order_relaxed);
  }
  if (eof || c.in.size() - c.in_pos > query_buffer_limit) return close_connection(c);
  advance(c, ctx);
}

void kv_server::advance(connection& c, tessera::context& ctx) {
  while (true) {
    if (!run_batch(c, ctx)) return;  // tree tasks in flight: the last one goes on (batch_done)
    const bool had_requests = !c.cmds.empty();
    complete_batch(c);
    if (c.close_after_reply || !had_requests) break;
    // Replies that wait for the log end the flow (finish_flow parks the connection).
    if (c.wait_lsn != 0 && !m_aof->is_safe(c.wait_lsn)) break;
    if (c.out.size() - c.out_pos >= std::size_t{64} * 1024) {
      if (flush(c) == flush_outcome::failed) return close_connection(c);
      if (c.out_pos < c.out.size()) return release(c, true);  // the client reads slowly
    }
  }
  finish_flow(c);
}

void kv_server::batch_done(connection& c, tessera::context& ctx) {
  complete_batch(c);
  // Requests read already and left over (a batch ends before a request on a key that it
  // writes, or that it reads and the request writes; before a whole-store command; at
  // batch_limit) are served from here: the rest of a cut pipeline would otherwise wait for the
  // poll role, which a busy worker takes only once its queues are empty (a round of every
  // connection; the tail of MSET's latency, performance-notes.md). Its tasks belong to this
  // flow's operation, so a flow goes on so a few times only (continued_limit): a flow that never
  // ended would hold the epoch (and every retired value and directory) for ever. Past that, and
  // with replies that wait for the log, a fresh serve task that the poll role spawns from outside
  // serves the rest (release, queue_serve).
  if (c.continued < continued_limit && !c.close_after_reply && c.wait_lsn == 0 &&
      c.in_pos < c.in.size() && !c.parse_waits) {
    // The replies so far go out first (the rest's may take a while).
    switch (flush(c)) {
      case flush_outcome::pending: return release(c, true);  // the client reads slowly
      case flush_outcome::failed: return close_connection(c);
      case flush_outcome::sent: break;
    }
    ++c.continued;
    m_stats.continued_batches.fetch_add(1, std::memory_order_relaxed);
    return advance(c, ctx);
  }
  finish_flow(c);
}

void kv_server::finish_flow(connection& c) {
  bool kick = false;
  if (c.wait_lsn != 0) {
    // The log's leader goes on with the connection once its records are safe (aof.h).
    if (!m_aof->is_safe(c.wait_lsn)) return m_aof->park(c);
    c.wait_lsn = 0;
    kick = m_aof->policy() == fsync_policy::no;
  }
  send_and_release(c);
  // appendfsync no: the replies went out at once; the records are written now, by this flow
  // unless another one is writing (drain() touches no connection of ours).
  if (kick) m_aof->drain();
}

void kv_server::send_and_release(connection& c) {
  switch (flush(c)) {
    case flush_outcome::pending: return release(c, true);
    case flush_outcome::failed: return close_connection(c);
    case flush_outcome::sent: break;
  }
  if (c.close_after_reply) return close_connection(c);
  release(c, false);
}

bool kv_server::run_batch(connection& c, tessera::context& ctx) {
  c.pending.store(1, std::memory_order_relaxed);  // the flow's own count
  std::size_t parsed = 0;
  c.parse_waits = false;
  while (c.cmds.size() < batch_limit && !c.close_after_reply) {
    const std::string_view rest(c.in.data() + c.in_pos + parsed, c.in.size() - c.in_pos - parsed);
    const std::size_t first_arg = c.args.size();
    const parse_result r = c.parser.parse(rest, c.args, c.authenticated);
    if (r.outcome == parse_outcome::need_more) {
      c.parse_waits = true;  // nothing more to run until input comes (an event)
      break;
    }
    if (r.outcome == parse_outcome::protocol_error) {
      c.error_reply = std::string(r.error);
      c.close_after_reply = true;
      break;
    }
    const std::size_t nargs = c.args.size() - first_arg;
    if (nargs == 0) {
      parsed += r.consumed;
      continue;
    }
    const dispatch_outcome d = dispatch(*this, c, ctx, first_arg, nargs);
    if (d == dispatch_outcome::end_before) {
      c.args.resize(first_arg);
      break;
    }
    parsed += r.consumed;
    if (d == dispatch_outcome::end_after) break;
  }
  c.batch_bytes = parsed;
  if (!c.group.empty()) {
    // The flow's own count keeps the batch open meanwhile: no request's settle finishes it.
    m_tree->submit_group(c.group, ctx);
    c.group.clear();
  }
  // Every dispatched command made one entry (counted per batch: one shared RMW, not one each).
  m_stats.commands_processed.fetch_add(c.cmds.size(), std::memory_order_relaxed);
  // acq_rel: see connection.h; the task that takes it to 0 finishes the batch.
  return c.pending.fetch_sub(1, std::memory_order_acq_rel) == 1;
}

void kv_server::complete_batch(connection& c) {
  if (c.txn_aborted) [[unlikely]] {  // EXEC whose watched keys changed: nil, nothing ran
    reply_writer(c.out, c.proto).null_array();
    c.txn_aborted = false;
  } else {
    for (batch_command& cmd : c.cmds) finalize(*this, c, cmd);
  }
  if (m_aof) {
    for (std::size_t i = 0; i < c.ops.size(); ++i) c.wait_lsn = std::max(c.wait_lsn, c.ops[i].lsn);
    if (c.walk) c.wait_lsn = std::max(c.wait_lsn, c.walk->lsn);
  }
  if (!c.error_reply.empty()) {
    c.out.append(c.error_reply);
    c.error_reply.clear();
  }
  c.in_pos += c.batch_bytes;
  c.batch_bytes = 0;
  c.args.clear();
  c.cmds.clear();
  c.ops.clear();
  c.batch_keys.clear();
  c.batch_writes = false;
  c.walk.reset();
  if (c.txn_active) {  // EXEC's batch (transaction.cpp)
    c.txn_active = false;
    c.exec_args.clear();
    c.exec_watched.clear();
    c.txn_records.clear();
  }
  c.parser.clear_owned();
  if (c.in_pos == c.in.size()) {
    c.in.clear();
    c.in_pos = 0;
  } else if (c.in_pos > std::size_t{64} * 1024) {
    c.in.erase(0, c.in_pos);
    c.in_pos = 0;
  }
}

}  // namespace server
