// energy/sample_page.h: the daemon's latest sample in a shared, read-only page, so that a client
// reading "the latest sample" (a Meter's tick that is no window boundary) costs the daemon
// nothing: no request, no wake-up, no system call. The daemon writes each sample it publishes;
// clients map the file read-only and copy the text under a sequence lock (as the Linux
// kernel's seqlock_t and its vDSO clock page do: the writer makes the counter odd, writes, makes
// it even; a reader retries when the counter was odd or changed while it copied). Requests that
// need the daemon (fresh reads for window boundaries, power limits, attribution) still go
// through the socket; the page holds exactly the text a socket read would return.
//
// File layout (native byte order; a page is only read on the node that wrote it):
//   bytes 0-63   header: magic "GTPAGE1\n", seq (u64, odd while writing), length (u32),
//                capacity (u32), writer pid (i64), sample's t_mono_s (f64, CLOCK_MONOTONIC),
//                the writer's random token (u64: which writer's file it is)
//   bytes 64-    the sample's JSON text (energy::daemon::sample_to_json), length bytes
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace gt::energy {

/// The daemon's side: creates the page file and publishes samples into it.
class SamplePageWriter {
 public:
  /// Creates `path` (written under a temporary name and renamed, so a reader never maps a
  /// half-made file) with room for `capacity` bytes of text, mode `mode` (e.g. 0644, or 0640
  /// with `gid` the socket's group; gid -1: the daemon's). Throws gt::Error naming the path
  /// and the system's reason.
  SamplePageWriter(std::string path, unsigned mode, gid_t gid = static_cast<gid_t>(-1),
                   std::size_t capacity = 256 * 1024);
  ~SamplePageWriter();  ///< unmaps and removes the file (clients then use the socket)
  SamplePageWriter(const SamplePageWriter&) = delete;
  SamplePageWriter& operator=(const SamplePageWriter&) = delete;

  /// Publishes one sample's JSON text taken at t_mono_s (CLOCK_MONOTONIC seconds). A text
  /// longer than the capacity publishes an empty page (readers then ask the socket). One
  /// writer thread at a time.
  void publish(const std::string& json_text, double t_mono_s);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* map_ = nullptr;
  std::size_t bytes_ = 0;
  std::uint64_t token_ = 0;
};

/// A client's side: a read-only mapping of a page.
class SamplePageReader {
 public:
  /// Maps `path`. Empty optional with *why (the path and the system's reason, or "not a sample
  /// page") when it cannot.
  static std::optional<SamplePageReader> open(const std::string& path, std::string* why);
  SamplePageReader(SamplePageReader&& o) noexcept;
  SamplePageReader& operator=(SamplePageReader&& o) noexcept;
  ~SamplePageReader();

  /// The latest sample's text when it was taken at most max_age_s ago (CLOCK_MONOTONIC, the
  /// clock every process of the node shares); empty optional when the page is empty, older
  /// (a daemon that stopped or was replaced: ask the socket, which reconnects), or kept
  /// changing under 1000 attempts to copy it.
  std::optional<std::string> read(double max_age_s) const;

 private:
  SamplePageReader() = default;
  const void* map_ = nullptr;
  std::size_t bytes_ = 0;
  std::uint32_t capacity_ = 0;
};

/// CLOCK_MONOTONIC in seconds (the daemon's t_mono_s).
double monotonic_s();

}  // namespace gt::energy
