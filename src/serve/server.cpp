// serve/server.cpp: see server.h.
#include "serve/server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "energy/daemon_client.h"
#include "serve/clocks.h"

namespace gt::serve {

using nlohmann::json;
namespace ed = energy::daemon;

namespace {

constexpr std::size_t kMaxQueued = 64;  // requests read ahead per connection
constexpr int kMaxPerTurn = 32;         // requests answered per connection per loop turn

}  // namespace

Server::Server(ServerOptions opt, ServeContext ctx) : opt_(std::move(opt)), ctx_(std::move(ctx)) {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw Error(fmt::format("eventfd: {}", std::strerror(errno)));
  if (!ctx_.log) ctx_.log = [](const std::string&) {};
}

Server::~Server() {
  for (auto& [fd, c] : conns_) {
    if (ctx_.leases)
      for (const auto& l : ctx_.leases->release_all(c.id)) ctx_.log(l);
    ::close(fd);
  }
  conns_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (bound_) ::unlink(opt_.socket_path.c_str());
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Server::listen() {
  const std::string& path = opt_.socket_path;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    throw Error(
        fmt::format("socket path '{}': expected 1 to {} bytes", path, sizeof addr.sun_path - 1));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && !std::filesystem::exists(dir)) {
    std::filesystem::create_directories(dir, ec);
    if (ec)
      throw Error(
          fmt::format("{}: cannot create the socket's folder: {}", dir.string(), ec.message()));
    ::chmod(dir.c_str(), 0755);
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    std::string why;
    if (auto other = ed::DaemonClient::connect(path, &why, nullptr, 2))
      throw Error(
          fmt::format("{}: {} already serves there; stop it first", path, other->describe()));
    if (!S_ISSOCK(st.st_mode))
      throw Error(fmt::format("{}: exists and is not a socket; expected a free path", path));
    ::unlink(path.c_str());  // left by a daemon that ended
  }
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw Error(fmt::format("socket: {}", std::strerror(errno)));
  // Bind with a umask that leaves the socket closed until its mode is set.
  const mode_t old = ::umask(0177);
  const int rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  const int e = errno;
  ::umask(old);
  if (rc != 0) throw Error(fmt::format("{}: cannot bind: {}", path, std::strerror(e)));
  bound_ = true;
  if (!opt_.socket_group.empty()) {
    group gr{}, *res = nullptr;
    std::vector<char> buf(16384);
    if (::getgrnam_r(opt_.socket_group.c_str(), &gr, buf.data(), buf.size(), &res) != 0 || !res)
      throw Error(fmt::format("socket_group '{}': no such group", opt_.socket_group));
    if (::chown(path.c_str(), static_cast<uid_t>(-1), gr.gr_gid) != 0)
      throw Error(fmt::format("{}: cannot give it to group {}: {}", path, opt_.socket_group,
                              std::strerror(errno)));
  }
  if (::chmod(path.c_str(), opt_.socket_mode) != 0)
    throw Error(fmt::format("{}: chmod {:o}: {}", path, opt_.socket_mode, std::strerror(errno)));
  if (::listen(listen_fd_, 512) != 0)
    throw Error(fmt::format("{}: listen: {}", path, std::strerror(errno)));
}

void Server::stop() {
  stop_ = true;
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void Server::notify_sample() {
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void Server::accept_all(double now) {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or an error that the next poll shows again
    ++stats_.connections;
    if (static_cast<int>(conns_.size()) >= opt_.max_clients) {
      std::string out;
      ed::append_frame(out, ed::error_response(nullptr, "too_many_clients",
                                               fmt::format("the daemon serves {} clients at once "
                                                           "(max_clients); try again later",
                                                           opt_.max_clients)));
      (void)!::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      ++stats_.dropped;
      continue;
    }
    Conn c;
    c.fd = fd;
    c.id = next_id_++;
    c.connected_s = now;
    try {
      c.peer = Peer::of_socket(fd);
    } catch (const std::exception& e) {
      ctx_.log(std::string("refused a connection: ") + e.what());
      ::close(fd);
      continue;
    }
    c.events = EPOLLIN;
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &e);
    conns_.insert_or_assign(fd, std::move(c));  // a closed one may have had this number
    stats_.clients = static_cast<int>(conns_.size());
  }
}

void Server::send_text(Conn& c, const std::string& text, double now) {
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out_off = 0;
    c.out_since_s = now;
  }
  try {
    ed::append_frame(c.out, text);
  } catch (const ed::ProtocolError&) {  // a response over the limit: say so instead
    ed::append_frame(c.out, ed::error_response(nullptr, "failed",
                                               "the response would exceed the "
                                               "protocol's size limit"));
  }
  if (c.out.size() - c.out_off > ed::kMaxPendingResponseBytes) {
    close_conn(c, "it reads no responses (more than 8 MiB waiting)");
    ++stats_.dropped;
  }
}

void Server::answer(Conn& c, const std::string& payload) {
  ++stats_.requests;
  const double now = mono_now();
  json id;
  try {
    const ed::Request req = ed::parse_request(payload);
    id = req.id;
    if (req.op == "read") {
      bool fresh = false;
      if (auto f = req.body.find("fresh"); f != req.body.end() && !f->is_null()) {
        if (!f->is_boolean())
          throw ed::ProtocolError("bad_request",
                                  "\"fresh\": expected true "
                                  "or false");
        fresh = f->get<bool>();
      }
      if (fresh) {
        c.wait_seq = ctx_.reader->request_fresh();
        c.wait_id = id;
        auto p = ctx_.reader->latest();
        if (p->sample.seq >= c.wait_seq) {
          c.wait_seq = 0;
          send_text(c, read_response(*p, id), now);
        }
        return;
      }
      send_text(c, read_response(*ctx_.reader->latest(), id), now);
      return;
    }
    send_text(
        c,
        [&] {
          json r = handle_request(ctx_, c.id, c.peer, req, opt_.socket_path);
          r["v"] = ed::kProtocolVersion;
          r["ok"] = true;
          if (!id.is_null()) r["id"] = id;
          return r.dump(-1, ' ', false, json::error_handler_t::replace);
        }(),
        now);
  } catch (const ed::ProtocolError& e) {
    ++stats_.errors;
    send_text(c, ed::error_response(id.is_null() ? e.id() : id, e.code(), e.what()), now);
  } catch (const std::exception& e) {
    ++stats_.errors;
    send_text(c, ed::error_response(id, "failed", e.what()), now);
  }
}

void Server::process(Conn& c) {
  for (int n = 0; n < kMaxPerTurn && !c.closing && c.wait_seq == 0 && !c.queue.empty(); ++n) {
    std::string p = std::move(c.queue.front());
    c.queue.pop_front();
    answer(c, p);
  }
}

void Server::on_readable(Conn& c, double now) {
  char buf[65536];
  for (int rounds = 0; rounds < 4 && c.queue.size() < kMaxQueued; ++rounds) {
    ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) c.eof = true;
      break;
    }
    if (n == 0) {
      c.eof = true;
      break;
    }
    if (c.in.buffered() == 0) c.msg_start_s = now;
    c.in.feed(buf, static_cast<std::size_t>(n));
    const bool drained = static_cast<std::size_t>(n) < sizeof buf;  // no second recv for EAGAIN
    std::string payload;
    for (;;) {
      const auto st = c.in.next(&payload);
      if (st == ed::FrameReader::Status::kNeedMore) break;
      if (st == ed::FrameReader::Status::kTooLarge) {
        ++stats_.errors;
        send_text(c,
                  ed::error_response(nullptr, "too_large",
                                     fmt::format("a request of {} bytes; expected at most {} "
                                                 "bytes (the connection is closed: the next "
                                                 "message cannot be found)",
                                                 *c.in.pending_length(), ed::kMaxRequestBytes)),
                  now);
        c.closing = true;
        return;
      }
      c.spoke = true;
      c.queue.push_back(std::move(payload));
      if (c.in.buffered() > 0) c.msg_start_s = now;
    }
    if (drained) break;
  }
}

void Server::flush(Conn& c, double now) {
  while (c.out_off < c.out.size()) {
    ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) c.eof = c.closing = true;
      return;
    }
    c.out_off += static_cast<std::size_t>(n);
    c.out_since_s = now;
  }
  c.out.clear();
  c.out_off = 0;
}

void Server::close_conn(Conn& c, const std::string& why) {
  if (c.fd < 0) return;
  if (ctx_.leases)
    for (const auto& l : ctx_.leases->release_all(c.id)) ctx_.log(l);
  if (!why.empty())
    ctx_.log(fmt::format("client pid {} (user {}) dropped: {}", c.peer.pid, c.peer.user, why));
  ::close(c.fd);
  c.fd = -1;
}

void Server::sweep_timeouts(double now) {
  for (auto& [fd, c] : conns_) {
    if (c.fd < 0) continue;
    if (c.out_off < c.out.size() && now - c.out_since_s > opt_.message_timeout_s) {
      ++stats_.dropped;
      close_conn(c,
                 fmt::format("it read none of its responses for {:g} s", opt_.message_timeout_s));
      continue;
    }
    if (c.closing) continue;
    std::string why;
    if (!c.spoke && now - c.connected_s > opt_.first_request_timeout_s)
      why = fmt::format("no request within {:g} s of connecting", opt_.first_request_timeout_s);
    else if (c.in.buffered() > 0 && now - c.msg_start_s > opt_.message_timeout_s)
      why = fmt::format("a message begun and not finished within {:g} s", opt_.message_timeout_s);
    if (!why.empty()) {
      ++stats_.errors;
      send_text(c, ed::error_response(nullptr, "timeout", why + "; the connection is closed"), now);
      c.closing = true;
      ctx_.log(fmt::format("client pid {} (user {}): {}", c.peer.pid, c.peer.user, why));
    }
  }
}

// The events a connection wants now: input while it may queue more, output while some waits.
std::uint32_t Server::wanted_events(const Conn& c) const {
  std::uint32_t ev = 0;
  if (!c.closing && !c.eof && c.queue.size() < kMaxQueued) ev |= EPOLLIN;
  if (c.out_off < c.out.size()) ev |= EPOLLOUT;
  return ev;
}

// After a connection was served: closes it when it is done, else updates its epoll interest.
void Server::settle(Conn& c) {
  const bool drained = c.out_off >= c.out.size();
  const bool idle = c.queue.empty() && c.wait_seq == 0;
  if (c.fd >= 0 &&
      ((c.closing && drained) || (c.eof && (idle || c.closing) && drained) || (c.eof && c.closing)))
    close_conn(c, "");
  if (c.fd < 0) return;
  const std::uint32_t ev = wanted_events(c);
  if (ev != c.events) {
    epoll_event e{};
    e.events = ev;
    e.data.fd = c.fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &e);
    c.events = ev;
  }
}

void Server::run() {
  // epoll: a turn of the loop costs in proportion to the connections that did something, not
  // to all of them (200 readers at 10 Hz wake it 2000 times a second).
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw Error(fmt::format("epoll_create1: {}", std::strerror(errno)));
  for (int fd : {wake_fd_, listen_fd_}) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &e);
  }
  std::vector<epoll_event> evs(256);
  std::vector<int> touched;
  double next_sweep = 0;
  while (!stop_) {
    // connections with requests still queued (kMaxPerTurn a turn) go on without waiting
    const int n =
        ::epoll_wait(epoll_fd_, evs.data(), static_cast<int>(evs.size()), busy_.empty() ? 100 : 0);
    if (n < 0 && errno != EINTR) throw Error(fmt::format("epoll_wait: {}", std::strerror(errno)));
    const double now = mono_now();
    touched.assign(busy_.begin(), busy_.end());
    busy_.clear();
    bool sampled = false;
    for (int i = 0; i < n; ++i) {
      const int fd = evs[static_cast<std::size_t>(i)].data.fd;
      const std::uint32_t re = evs[static_cast<std::size_t>(i)].events;
      if (fd == wake_fd_) {
        std::uint64_t v;
        while (::read(wake_fd_, &v, sizeof v) > 0) {
        }
        sampled = true;
      } else if (fd == listen_fd_) {
        accept_all(now);
      } else if (auto it = conns_.find(fd); it != conns_.end()) {
        Conn& c = it->second;
        if (re & EPOLLIN) on_readable(c, now);
        if ((re & (EPOLLHUP | EPOLLERR)) && !(re & EPOLLIN)) c.eof = true;
        if (re & EPOLLOUT) flush(c, now);
        touched.push_back(fd);
      }
    }
    if (sampled) {  // fresh reads whose sample has come
      const auto latest = ctx_.reader->latest();
      for (auto it = waiting_.begin(); it != waiting_.end();) {
        auto c = conns_.find(*it);
        if (c == conns_.end() || c->second.wait_seq == 0) {
          it = waiting_.erase(it);
        } else if (latest->sample.seq >= c->second.wait_seq) {
          c->second.wait_seq = 0;
          send_text(c->second, read_response(*latest, c->second.wait_id), now);
          touched.push_back(*it);
          it = waiting_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (int fd : touched) {
      auto it = conns_.find(fd);
      if (it == conns_.end()) continue;
      Conn& c = it->second;
      if (c.fd >= 0) process(c);
      if (c.fd >= 0 && c.wait_seq) waiting_.insert(fd);
      if (c.fd >= 0 && c.wait_seq == 0 && !c.closing && !c.queue.empty()) busy_.insert(fd);
      if (c.fd >= 0) flush(c, now);
      settle(c);
      if (c.fd < 0) conns_.erase(it);
    }
    if (now >= next_sweep) {  // timeouts, ten times a second
      next_sweep = now + 0.1;
      sweep_timeouts(now);
      for (auto it = conns_.begin(); it != conns_.end();) {
        if (it->second.fd >= 0) {
          flush(it->second, now);
          settle(it->second);
        }
        it = it->second.fd < 0 ? conns_.erase(it) : std::next(it);
      }
    }
    stats_.clients = static_cast<int>(conns_.size());
  }
}

}  // namespace gt::serve
