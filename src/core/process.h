// core/process.h: one child process, started with fork and exec, with the signals its parent
// receives forwarded to it while it runs, so that a Ctrl-C, a kill or a scheduler's warning
// reaches the command instead of leaving it running without its parent. `greentrain measure`
// runs its command with it, `greentrain ablate` each row's `greentrain train`.
#pragma once
#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gt {

/// How a ChildProcess starts.
struct ChildOptions {
  /// Empty: the child writes to the parent's stdout and stderr. Otherwise both go to this file
  /// (created with mode 0644 when missing).
  std::string output_path{};
  bool append_output = false;  ///< with output_path: append to the file instead of truncating it
  /// Without output_path: the child's stdout goes to the parent's stderr, so that the parent's
  /// stdout holds only what the parent writes there (`measure --json -`).
  bool stdout_to_stderr = false;
  /// The child waits, before exec, until release() is called (so that a meter watching it is
  /// ready before it runs).
  bool hold = false;
  /// The signals forwarded to the child while it runs. Empty: every catchable one (all but
  /// SIGKILL, SIGSTOP, SIGCHLD and glibc's own); a stop (SIGTSTP, SIGTTIN, SIGTTOU) then stops
  /// the parent as well. A signal the kernel sends (a terminal's Ctrl-C, which reached the
  /// child's process group already) and one the parent sends itself are not sent again, and a
  /// fault of the parent's own (SIGSEGV...) is never forwarded.
  std::vector<int> forward{};
  /// Names the parent in the child's message when exec fails: "<who>: cannot run 'X': why".
  std::string who = "greentrain";
  /// Linux: the parent is a child subreaper (prctl PR_SET_CHILD_SUBREAPER) while the object
  /// lives, so that a process the command leaves behind (a daemonizing child, a double fork)
  /// is reparented to the parent, not to init, and stays a descendant that a process-tree
  /// estimate can count; wait_ended() reaps those that end meanwhile. Signals are forwarded to
  /// the command only. The parent must start no other children meanwhile (they would be
  /// reaped). Elsewhere: nothing.
  bool adopt_orphans = false;
};

/// One running child. One at a time per process: the forwarding is process-wide.
class ChildProcess {
 public:
  /// Starts argv[0] (looked up in PATH when it holds no '/') with the arguments argv.
  /// Signals are blocked from before the fork until the forwarding handlers are set, so none is
  /// lost or acted on by default in between. Throws gt::Error when argv is empty, when the
  /// output file cannot be opened (naming it), or when pipe or fork fails. An exec that fails
  /// ends the child with 127 (not found) or 126 (not runnable), as the shell does.
  explicit ChildProcess(const std::vector<std::string>& argv, const ChildOptions& opt = {});
  /// A child not reaped yet is killed (SIGKILL) and reaped; the parent's signal handlers and
  /// mask are put back. Signals that arrive after reap() and before this are ignored.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  /// Lets a held child go on to exec; does nothing when it was not held or is already released.
  void release();
  /// Waits until the child has ended, without reaping it (its totals stay readable, e.g. for a
  /// process-tree estimate). `progress`, when set, is called about every `poll_s` seconds while
  /// the child runs. With adopt_orphans, adopted processes that end meanwhile are reaped.
  void wait_ended(const std::function<void()>& progress = {}, double poll_s = 0.1);
  /// With adopt_orphans, after reap(): reaps the adopted processes that have ended and returns
  /// the ids of those still running (the command left them behind; they go on without the
  /// parent). Empty otherwise.
  std::vector<pid_t> adopted_running();
  /// Reaps the child (waiting for it when needed) and returns its wait status, as waitpid
  /// gives it; from here on no signal is forwarded. A second call returns the same status.
  int reap();

 private:
  pid_t pid_ = -1;
  int go_fd_ = -1;  ///< write end of the pipe a held child waits on
  bool reaped_ = false;
  int status_ = 0;
  bool adopting_ = false;  ///< this object made the parent a child subreaper
  int was_subreaper_ = 0;  ///< the parent's setting before, put back by the destructor
  void stop_adopting();    ///< puts the parent's subreaper setting back
  struct Forwarding;
  std::unique_ptr<Forwarding> forwarding_;
};

/// The exit code the shell gives a wait status: the exit code, 128+N when the process was
/// killed by signal N, otherwise 1.
int exit_code_of(int wait_status);

}  // namespace gt
