#pragma once
// Writing measurements in the nccl-tests text layout (the current one: root column and #wrong), shared by
// fabricsim-nccl-bench and the reports, plus the size sweep and the algbw/busbw arithmetic. The text this
// writes is read back by parse_nccl_tests_text (tests check the round trip).
#include <cstdint>
#include <string>
#include <vector>

#include "validate/nccl_log.hpp"

namespace fabricsim::validate {

// nccl-tests binary name for a fabricsim op: all_reduce -> "all_reduce_perf", all_to_all ->
// "alltoall_perf", sendrecv -> "sendrecv_perf".
std::string perf_binary_name(const std::string& op);

// Sizes min, min*factor, ... <= max (factor > 1), as nccl-tests' -b/-e/-f. Throws InputError when
// min == 0, min > max or factor <= 1.
std::vector<std::uint64_t> size_sweep(std::uint64_t min_bytes, std::uint64_t max_bytes, double factor);

// A measured placement from its time: algbw = size / time (GB/s, 1e9 bytes), busbw = algbw * factor.
Side side_from_time(const std::string& op, int nranks, std::uint64_t size_bytes, double time_s,
                    std::optional<long long> wrong);

// The run as nccl-tests prints it: "# Collective test starting", the header (when m.header is set), the
// rank lines, the table (sides not present print N/A), "# Out of bounds values" and "# Avg bus
// bandwidth" (mean of the out-of-place busbw over the rows, as nccl-tests computes it).
std::string format_nccl_tests_text(const Measurement& m);

}  // namespace fabricsim::validate
