#pragma once
// Writing measurements in the nccl-tests text layout (the current one: root column and #wrong), shared by
// fabricsim-nccl-bench and the reports, plus the algbw/busbw arithmetic (the size sweep is sim::size_sweep,
// replay/coll_sweep.hpp). The text this
// writes is read back by parse_nccl_tests_text (tests check the round trip).
#include <cstdint>
#include <string>
#include <vector>

#include "validate/nccl_log.hpp"

namespace fabricsim::validate {

// nccl-tests binary name for a fabricsim op: all_reduce -> "all_reduce_perf", all_to_all ->
// "alltoall_perf", sendrecv -> "sendrecv_perf".
std::string perf_binary_name(const std::string& op);

// A measured placement from its time: algbw = size / time (GB/s, 1e9 bytes), busbw = algbw * factor.
Side side_from_time(const std::string& op, int nranks, std::uint64_t size_bytes, double time_s,
                    std::optional<long long> wrong);

// The run as nccl-tests prints it: "# Collective test starting", the header (when m.header is set), the
// rank lines, the table (sides not present print N/A), "# Out of bounds values" and "# Avg bus
// bandwidth" (mean of the out-of-place busbw over the rows, as nccl-tests computes it).
std::string format_nccl_tests_text(const Measurement& m);

// A simulation (`fabricsim coll --json`'s collective-results document) as an nccl-tests log, what `fabricsim coll
// --nccl-tests FILE` writes: the header (nGpus = GPUs per thread, 1 when coll did not model it; iters = coll's
// --iters, else nccl-tests' default 20), one rank line per GPU (ranks host-major on hosts "host0", "host1", ...;
// GPU name = the topology's GPU model), the simulated time as both the out-of-place and the in-place column.
// `validate` reads it back to the same op, ranks, hosts and times (as printed: 2 decimals in microseconds).
// Throws InputError naming `where` for what the text layout cannot carry: a forced algorithm or protocol, and
// a rooted collective (broadcast, reduce) simulated as one call rather than nccl-tests' loop (--iters).
std::string simulation_as_nccl_tests_text(const Json& coll_doc, const std::string& where);

}  // namespace fabricsim::validate
