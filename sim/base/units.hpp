#pragma once
// Units are parsed once, at the edge. Inside the simulator: bytes are uint64_t (or double where a
// fractional byte count is meaningful, e.g. per-flow remaining bytes), bandwidth is bytes/s (double),
// time is seconds (double). Traces carry integer nanoseconds.
#include <cstdint>
#include <string>
#include <string_view>

namespace fabricsim {

// Sizes: "8", "1K", "64M", "8G", "1T" (binary multiples, as nccl-tests' -b/-e), also "1KiB", "4MB" (MB is
// decimal: 10^6), "2GiB". Throws InputError naming `what` on malformed input.
std::uint64_t parse_size(std::string_view text, std::string_view what = "size");

// Bandwidth in bytes/s: "400Gbps" / "400Gb/s" (bits), "25GB/s" / "25GBps" (bytes, decimal), "25GiB/s",
// or a plain number meaning bytes/s. Must be > 0.
double parse_bandwidth(std::string_view text, std::string_view what = "bandwidth");

// Time in seconds: "1.5us", "700ns", "2ms", "3s", or a plain number meaning seconds. Must be >= 0.
double parse_time(std::string_view text, std::string_view what = "time");

// Plain numbers: strict parsing of the whole string.
double parse_double(std::string_view text, std::string_view what);
long long parse_int(std::string_view text, std::string_view what);

// Human-readable formatting (for summaries, never for machine-readable outputs).
std::string format_bytes(double bytes);          // "64 MiB"
std::string format_bandwidth(double bytes_per_s);  // "25.0 GB/s"
std::string format_time(double seconds);          // "1.23 ms"

constexpr double kGB = 1e9;   // nccl-tests reports GB/s with 1 GB = 1e9 bytes
constexpr double kGbps = 1e9 / 8.0;  // bytes/s in one Gb/s

}  // namespace fabricsim
