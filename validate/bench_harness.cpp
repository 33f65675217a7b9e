#include "validate/bench_harness.hpp"

#include <cmath>
#include <cstdio>

namespace fabricsim::validate {

BenchShape bench_shape(const std::string& op, std::uint64_t bytes, int n) {
  const std::size_t elems = bytes / sizeof(float);
  const std::size_t per = elems / static_cast<std::size_t>(n);
  BenchShape s;
  if (op == "all_gather") s = {per, per * n, per * n, per * n * sizeof(float)};
  else if (op == "reduce_scatter") s = {per * n, per, per * n, per * n * sizeof(float)};
  else if (op == "all_to_all") s = {per * n, per * n, per * n, per * n * sizeof(float)};
  else s = {elems, elems, elems, elems * sizeof(float)};
  return s;
}

float bench_fill_value(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * static_cast<int>(i % 13 + 1));
}

double bench_expected(const std::string& op, int rank, int n, const BenchShape& s, std::size_t i) {
  const double tri = n * (n + 1) / 2.0;
  if (op == "all_reduce" || op == "reduce") return tri * static_cast<double>(i % 13 + 1);
  if (op == "broadcast") return bench_fill_value(0, i);
  if (op == "all_gather") return bench_fill_value(static_cast<int>(i / s.send), i % s.send);
  if (op == "reduce_scatter") return tri * static_cast<double>((static_cast<std::size_t>(rank) * s.recv + i) % 13 + 1);
  if (op == "all_to_all") {
    const std::size_t per = s.send / n;
    return bench_fill_value(static_cast<int>(i / per), static_cast<std::size_t>(rank) * per + i % per);
  }
  if (op == "sendrecv") return bench_fill_value((rank + n - 1) % n, i);
  return std::nan("");
}

void bench_fill(CollectiveBackend& b, const std::string& op, const BenchShape& s, bool in_place) {
  for (int l = 0; l < b.local_count(); ++l) {
    const int rank = b.rank_of(l);
    std::vector<float> h(s.send);
    for (std::size_t i = 0; i < s.send; ++i) h[i] = bench_fill_value(rank, i);
    if (!in_place) {
      b.upload(l, BenchBuffer::Send, 0, h);
      b.zero(l, BenchBuffer::Recv, 0, s.recv);
    } else {
      // nccl-tests' in-place layouts: all_gather sends from its slice of the receive buffer; the others
      // send from the start of it.
      const std::size_t at = op == "all_gather" ? static_cast<std::size_t>(rank) * s.send : 0;
      b.upload(l, BenchBuffer::Recv, at, h);
    }
  }
}

long long bench_count_wrong(CollectiveBackend& b, const std::string& op, const BenchShape& s, bool in_place) {
  long long wrong = 0;
  const int n = b.nranks();
  for (int l = 0; l < b.local_count(); ++l) {
    const int rank = b.rank_of(l);
    if (op == "reduce" && rank != 0) continue;  // only the root has a defined result
    const std::size_t at = in_place && op == "reduce_scatter" ? static_cast<std::size_t>(rank) * s.recv : 0;
    b.download(l, BenchBuffer::Recv, at, s.recv);
    b.wait(l);
    const float* h = b.download_slot(l);
    for (std::size_t i = 0; i < s.recv; ++i)
      if (static_cast<double>(h[i]) != bench_expected(op, rank, n, s, i)) ++wrong;
  }
  return wrong;
}

long long bench_fill_run_check(CollectiveBackend& b, const std::string& op, const BenchShape& s, bool in_place,
                               BenchStall stall, double stall_s) {
  if (stall == BenchStall::DefaultStream)
    for (int l = 0; l < b.local_count(); ++l) b.stall_default_stream(l, stall_s);
  bench_fill(b, op, s, in_place);
  if (stall == BenchStall::OwnStream)
    for (int l = 0; l < b.local_count(); ++l) b.stall(l, stall_s);
  b.collective(op, s, in_place);
  // With the default stream held, let whatever was queued there land before reading, so that a misplaced
  // operation shows in this check's result and not in the next one's.
  if (stall == BenchStall::DefaultStream)
    for (int l = 0; l < b.local_count(); ++l) b.wait_device(l);
  return b.sum_over_ranks(bench_count_wrong(b, op, s, in_place));
}

const std::vector<std::uint64_t>& bench_self_test_sizes() {
  static const std::vector<std::uint64_t> v = {4ull << 10, 512ull << 10, 1ull << 20, 2ull << 20, 8ull << 20, 64ull << 20};
  return v;
}

SelfTestResult bench_self_test(CollectiveBackend& b, const std::vector<std::string>& ops, double stall_s,
                               std::string& log, const std::vector<std::uint64_t>& sizes) {
  SelfTestResult r;
  char line[256];
  for (const auto& op : ops)
    for (std::uint64_t bytes : sizes) {
      const BenchShape s = bench_shape(op, bytes, b.nranks());
      if (s.count == 0) continue;
      for (bool ip : {false, true}) {
        if (ip && (op == "all_to_all" || op == "sendrecv")) continue;
        for (BenchStall where : {BenchStall::OwnStream, BenchStall::DefaultStream}) {
          const long long wrong = bench_fill_run_check(b, op, s, ip, where, stall_s);
          ++r.checks;
          if (wrong) ++r.failed;
          std::snprintf(line, sizeof line, "self-test %-14s %10llu B %-12s %-14s stream held %3.0f ms: %lld wrong  %s\n",
                        op.c_str(), static_cast<unsigned long long>(s.size_bytes), ip ? "in-place" : "out-of-place",
                        where == BenchStall::OwnStream ? "collective's" : "legacy default", stall_s * 1e3, wrong,
                        wrong ? "FAIL" : "ok");
          log += line;
        }
      }
    }
  // Negative control: the same check, reading the result before waiting for the stalled stream.
  const std::string op = ops.empty() ? "all_reduce" : ops.front();
  const BenchShape s = bench_shape(op, sizes.empty() ? 8ull << 20 : sizes.back(), b.nranks());
  bench_fill(b, op, s, false);
  for (int l = 0; l < b.local_count(); ++l) b.stall(l, stall_s);
  b.collective(op, s, false);
  long long stale = 0;
  for (int l = 0; l < b.local_count(); ++l) {
    if (op == "reduce" && b.rank_of(l) != 0) continue;
    b.download(l, BenchBuffer::Recv, 0, s.recv);
    const float* h = b.download_slot(l);  // deliberately no wait(l)
    for (std::size_t i = 0; i < s.recv; ++i)
      if (static_cast<double>(h[i]) != bench_expected(op, b.rank_of(l), b.nranks(), s, i)) ++stale;
    b.wait(l);
  }
  r.control_detected = b.sum_over_ranks(stale) > 0;
  std::snprintf(line, sizeof line, "self-test control: %s read without waiting for the stalled stream: %lld stale  %s\n",
                op.c_str(), stale, r.control_detected ? "ok (a missing synchronisation would be caught)"
                                                      : "FAIL (the stall did not expose an unsynchronised read)");
  log += line;
  std::snprintf(line, sizeof line, "self-test: %d checks, %d failed, control %s -> %s\n", r.checks, r.failed,
                r.control_detected ? "detected" : "NOT detected", r.passed() ? "PASS" : "FAIL");
  log += line;
  return r;
}

}  // namespace fabricsim::validate
