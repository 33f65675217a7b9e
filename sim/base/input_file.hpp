#pragma once
// Reading an input file whole, with a size bound (docs/reliability.md): every text and binary input format
// (JSON, nccl-tests logs, ASTRA-sim text, Chakra .et/JSON, sweep and compare CSVs) is read through here.
#include <cstddef>
#include <string>

namespace fabricsim {

// At most this many bytes are read from one input file (512 MiB, the same bound as kMaxJsonBytes).
constexpr std::size_t kMaxInputBytes = 512ull << 20;

// The contents of `path`. A regular file over `max_bytes` is refused by its size before it is read; a
// device or pipe (/dev/zero, a FIFO), which has no size, is read in chunks and refused once more than
// `max_bytes` have arrived, so it can neither hang the reader forever nor exhaust memory. Errors are
// InputErrors naming `path` ("cannot open file for reading", the size and the limit).
std::string read_input_file(const std::string& path, std::size_t max_bytes = kMaxInputBytes);

}  // namespace fabricsim
