// core/process.cpp: ChildProcess (core/process.h): fork, exec, signal forwarding, wait.
#include "core/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#ifdef __linux__
#include <dirent.h>
#include <sys/prctl.h>
#endif
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/error.h"

namespace gt {
namespace {

volatile sig_atomic_t g_child = 0;

// The signals never forwarded: SIGKILL and SIGSTOP cannot be caught, SIGCHLD is the parent's
// own (its child ended).
bool forwardable(int sig) { return sig != SIGKILL && sig != SIGSTOP && sig != SIGCHLD; }

// The fault signals, raised by the kernel when the parent itself faults: those are not forwarded.
bool fault(int sig) {
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP;
}

void forward(int sig, siginfo_t* info, void*) {
  const int saved = errno;
  const bool from_kernel =
      info && (info->si_code == SI_KERNEL || (fault(sig) && info->si_code > 0));
  const bool from_self = info && info->si_code == SI_USER && info->si_pid == ::getpid();
  if (fault(sig) && info && info->si_code > 0) {
    ::signal(sig, SIG_DFL);  // the parent's own fault: returning re-raises it, with the default
    return;
  }
  // A terminal's Ctrl-C or Ctrl-Z already reached the child (same process group), and a
  // SIGPIPE of the parent's own write is only the parent's: neither is sent again.
  if (!from_kernel && !from_self && g_child > 0) ::kill(g_child, sig);
  if ((sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) && !from_self)
    ::kill(::getpid(), SIGSTOP);  // stopped as the child is; SIGCONT goes on to it too
  errno = saved;
}

}  // namespace

// Forwarding handlers, installed while the child runs and put back (with the signal mask) when
// the object ends. Made before the fork: it blocks the signals so none is lost in between.
struct ChildProcess::Forwarding {
  sigset_t old_mask{};
  struct sigaction old[NSIG] {};
  bool installed[NSIG] = {};

  Forwarding() {
    sigset_t all;
    sigfillset(&all);
    ::sigprocmask(SIG_BLOCK, &all, &old_mask);
  }
  ~Forwarding() {
    for (int sig = 1; sig < NSIG; ++sig)
      if (installed[sig]) ::sigaction(sig, &old[sig], nullptr);
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  }
  void child_reset() const { ::sigprocmask(SIG_SETMASK, &old_mask, nullptr); }
  void install(const std::vector<int>& only) {
    struct sigaction sa {};
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO;  // no SA_RESTART: a wait wakes up, then waits again
    sigemptyset(&sa.sa_mask);
    for (int sig = 1; sig < NSIG; ++sig) {
      if (!forwardable(sig)) continue;
      if (sig >= 32 && sig < SIGRTMIN) continue;  // glibc's own (threads, timers)
      bool wanted = only.empty();
      for (int s : only) wanted |= s == sig;
      if (wanted) installed[sig] = ::sigaction(sig, &sa, &old[sig]) == 0;
    }
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  }
};

ChildProcess::ChildProcess(const std::vector<std::string>& args, const ChildOptions& opt) {
  if (args.empty()) throw Error("cannot start a process: no command");
  int out_fd = -1;
  if (!opt.output_path.empty()) {
    out_fd =
        ::open(opt.output_path.c_str(),
               O_WRONLY | O_CREAT | O_CLOEXEC | (opt.append_output ? O_APPEND : O_TRUNC), 0644);
    if (out_fd < 0)
      throw Error(fmt::format("cannot open {} for the output of {}: {}", opt.output_path, args[0],
                              std::strerror(errno)));
  }
  int go[2] = {-1, -1};
  if (opt.hold && ::pipe2(go, O_CLOEXEC) != 0) {
    const int err = errno;
    if (out_fd >= 0) ::close(out_fd);
    throw Error(std::string("pipe: ") + std::strerror(err));
  }
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  std::fflush(nullptr);
#ifdef __linux__
  // before the fork: a child that forks and exits at once is already adopted
  if (opt.adopt_orphans && ::prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper_) == 0)
    adopting_ = ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
#endif
  forwarding_ = std::make_unique<Forwarding>();
  pid_ = ::fork();
  if (pid_ == 0) {
    forwarding_->child_reset();
    if (out_fd >= 0) {
      ::dup2(out_fd, STDOUT_FILENO);
      ::dup2(out_fd, STDERR_FILENO);
    } else if (opt.stdout_to_stderr) {
      ::dup2(STDERR_FILENO, STDOUT_FILENO);
    }
    if (opt.hold) {
      ::close(go[1]);
      char c;
      while (::read(go[0], &c, 1) < 0 && errno == EINTR) {
      }
    }
    ::execvp(argv[0], argv.data());
    const int err = errno;
    std::fprintf(stderr, "%s: cannot run '%s': %s\n", opt.who.c_str(), argv[0], std::strerror(err));
    ::_exit(err == ENOENT || err == ENOTDIR ? 127 : 126);  // as the shell: not found / not run
  }
  const int fork_err = errno;
  if (out_fd >= 0) ::close(out_fd);
  if (opt.hold) ::close(go[0]);
  if (pid_ < 0) {
    if (opt.hold) ::close(go[1]);
    forwarding_.reset();
    stop_adopting();
    throw Error(std::string("fork: ") + std::strerror(fork_err));
  }
  go_fd_ = opt.hold ? go[1] : -1;
  g_child = pid_;
  forwarding_->install(opt.forward);
}

ChildProcess::~ChildProcess() {
  if (!reaped_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    release();
    reap();
  }
  release();
  g_child = 0;
  stop_adopting();
}

void ChildProcess::stop_adopting() {
#ifdef __linux__
  if (adopting_) ::prctl(PR_SET_CHILD_SUBREAPER, was_subreaper_);
#endif
  adopting_ = false;
}

void ChildProcess::release() {
  if (go_fd_ >= 0) ::close(go_fd_);
  go_fd_ = -1;
}

void ChildProcess::wait_ended(const std::function<void()>& progress, double poll_s) {
  if (reaped_) return;
  const int flags = WEXITED | WNOWAIT | (progress ? WNOHANG : 0);
  for (;;) {
    siginfo_t si{};
    // adopting: any child that ends wakes the wait; an adopted one is reaped, the command not
    if (::waitid(adopting_ ? P_ALL : P_PID, static_cast<id_t>(adopting_ ? 0 : pid_), &si, flags) !=
        0) {
      if (errno == EINTR) continue;
      return;  // no such child: reap() says what became of it
    }
    if (si.si_pid == pid_) return;
    if (si.si_pid != 0) {  // an adopted process ended: its time goes to this process's cutime
      while (::waitpid(si.si_pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      continue;
    }
    progress();  // WNOHANG, still running
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
  }
}

int ChildProcess::reap() {
  if (reaped_) return status_;
  while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  g_child = 0;  // from here on a signal is ignored until the handlers are put back
  return status_;
}

std::vector<pid_t> ChildProcess::adopted_running() {
  std::vector<pid_t> running;
#ifdef __linux__
  if (!adopting_ || !reaped_) return running;
  for (;;) {  // the command is reaped: any child that ended is an adopted one
    const pid_t p = ::waitpid(-1, nullptr, WNOHANG);
    if (p > 0 || (p < 0 && errno == EINTR)) continue;
    break;
  }
  // this process's children, as each of its threads' children file lists them
  const std::string task = "/proc/" + std::to_string(::getpid()) + "/task";
  if (DIR* d = ::opendir(task.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      FILE* f = std::fopen((task + "/" + e->d_name + "/children").c_str(), "re");
      if (!f) continue;
      long p = 0;
      while (std::fscanf(f, "%ld", &p) == 1) running.push_back(static_cast<pid_t>(p));
      std::fclose(f);
    }
    ::closedir(d);
  }
#endif
  return running;
}

int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status)
                           : (WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1);
}

}  // namespace gt
