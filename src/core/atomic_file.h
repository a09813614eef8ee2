// core/atomic_file.h: the one way greentrain writes a whole file: to a temporary name beside it
// ("<path>.tmp.<pid>"), flushed to disk, then renamed over `path`, so a reader (or a crash)
// never sees half a file and the old file stays whole until the new one is complete.
// write_file_atomic writes bytes held in memory; AtomicFile is the same file written in pieces
// (token shards, a mapped page) before it is put in place.
#pragma once
#include <sys/types.h>

#include <string>
#include <string_view>

namespace gt {

/// Writes `bytes` to `path` atomically (above), created with `mode` (less the umask; 0600 for a
/// file only its owner may read). Throws gt::Error naming the path and the reason (folder
/// missing or read-only, disk full, rename refused); the temporary file is removed and `path`
/// is left as it was.
void write_file_atomic(const std::string& path, std::string_view bytes, mode_t mode = 0666);

/// A file written in pieces under its temporary name and put in place by commit(); destroyed
/// before commit(), the temporary file is removed and `path` is left as it was. A temporary file
/// left by an earlier process of the same pid is replaced, never followed if it is a link.
class AtomicFile {
 public:
  /// Creates "<path>.tmp.<pid>" with `mode` (less the umask). Throws gt::Error naming it.
  explicit AtomicFile(std::string path, mode_t mode = 0666);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  /// The open temporary file (read and write), e.g. to size and map it; valid until commit().
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }
  /// Appends `bytes` (short writes and EINTR retried). Throws gt::Error naming the path.
  void write(std::string_view bytes);
  /// Writes `bytes` at `offset` (a header written last). Throws gt::Error naming the path.
  void write_at(std::string_view bytes, off_t offset);
  /// Flushes the file to disk, closes it and renames it over path() (a mapping of it stays
  /// valid). Throws gt::Error naming the path; the temporary file is then removed.
  void commit();

 private:
  [[noreturn]] void fail(const char* what, int err);
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace gt
