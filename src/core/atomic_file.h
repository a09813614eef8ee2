// core/atomic_file.h: the one way greentrain writes a whole file: to a temporary name beside it
// ("<path>.tmp.<pid>"), flushed to disk, then renamed over `path`, so a reader (or a crash)
// never sees half a file and the old file stays whole until the new one is complete.
#pragma once
#include <string>
#include <string_view>

namespace gt {

/// Writes `bytes` to `path` atomically (above). Throws gt::Error naming the path and the
/// reason (folder missing or read-only, disk full, rename refused); the temporary file is
/// removed and `path` is left as it was.
void write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace gt
