// The NCCL harness's correctness check (validate/bench_harness.*) against a CPU double of the GPU backend
// whose stream work runs only when the host waits, as a GPU's may. It shows that the harness reads no
// result it has not waited for, and it reproduces the first real-GPU failure (one H200,
// tests/data/nccl-harness-h200): an out-of-place receive buffer zeroed on a stream not ordered with the
// collective comes back all wrong, the in-place rows stay right.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "validate/bench_harness.hpp"

using namespace fabricsim::validate;

namespace {

// n ranks in one process. Every enqueued operation waits in a queue until some wait(); with
// `unordered_zero`, zero() goes to a second queue that lands just after the next collective (like
// cudaMemset on the legacy default stream racing a non-blocking NCCL stream).
class DeferredBackend : public CollectiveBackend {
 public:
  DeferredBackend(int n, std::size_t elems, bool unordered_zero = false)
      : n_(n), unordered_zero_(unordered_zero), send_(n, std::vector<float>(elems)),
        recv_(n, std::vector<float>(elems)), slot_(n) {}
  int nranks() const override { return n_; }
  int local_count() const override { return n_; }
  int rank_of(int local) const override { return local; }
  void upload(int l, BenchBuffer b, std::size_t off, const std::vector<float>& host) override {
    queue_.push_back([this, l, b, off, host] { std::copy(host.begin(), host.end(), buf(l, b).begin() + off); });
  }
  void zero(int l, BenchBuffer b, std::size_t off, std::size_t count) override {
    auto op = [this, l, b, off, count] { std::fill_n(buf(l, b).begin() + off, count, 0.0f); };
    (unordered_zero_ ? late_ : queue_).push_back(op);
  }
  void collective(const std::string& op, const BenchShape& s, bool ip) override {
    queue_.push_back([this, op, s, ip] {
      run(op, s, ip);
      for (auto& f : late_) f();
      late_.clear();
    });
    ++collectives;
  }
  void stall(int, double) override { ++stalls; }  // the queue is already held until wait()
  void stall_default_stream(int, double) override { ++default_stalls; }  // unordered work lands late anyway
  void download(int l, BenchBuffer b, std::size_t off, std::size_t count) override {
    slot_[l].assign(count, std::nanf(""));
    queue_.push_back([this, l, b, off, count] {
      std::copy_n(buf(l, b).begin() + off, count, slot_[l].begin());
    });
  }
  void wait(int) override {
    for (auto& f : queue_) f();
    queue_.clear();
  }
  void wait_device(int l) override { wait(l); }
  const float* download_slot(int l) const override { return slot_[l].data(); }
  long long sum_over_ranks(long long v) override { return v; }
  int collectives = 0, stalls = 0, default_stalls = 0;

 private:
  std::vector<float>& buf(int l, BenchBuffer b) { return b == BenchBuffer::Send ? send_[l] : recv_[l]; }
  // Reference semantics of each collective on the (send, recv) layouts the harness uses.
  void run(const std::string& op, const BenchShape& s, bool ip) {
    std::vector<std::vector<float>> in(n_);
    for (int r = 0; r < n_; ++r) {
      const std::vector<float>& src = ip ? recv_[r] : send_[r];
      const std::size_t at = ip && op == "all_gather" ? r * s.send : 0;
      in[r].assign(src.begin() + at, src.begin() + at + s.send);
    }
    for (int r = 0; r < n_; ++r) {
      float* out = recv_[r].data() + (ip && op == "reduce_scatter" ? r * s.recv : 0);
      for (std::size_t i = 0; i < s.recv; ++i) {
        double v = 0;
        if (op == "all_reduce" || (op == "reduce" && r == 0)) for (int j = 0; j < n_; ++j) v += in[j][i];
        else if (op == "reduce") continue;
        else if (op == "broadcast") v = in[0][i];
        else if (op == "all_gather") v = in[i / s.send][i % s.send];
        else if (op == "reduce_scatter") for (int j = 0; j < n_; ++j) v += in[j][r * s.recv + i];
        else if (op == "all_to_all") v = in[i / (s.send / n_)][r * (s.send / n_) + i % (s.send / n_)];
        else if (op == "sendrecv") v = in[(r + n_ - 1) % n_][i];
        out[i] = static_cast<float>(v);
      }
    }
  }
  int n_;
  bool unordered_zero_;
  std::vector<std::vector<float>> send_, recv_, slot_;
  std::vector<std::function<void()>> queue_, late_;
};

const std::vector<std::string> kOps = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                       "reduce", "all_to_all", "sendrecv"};

}  // namespace

TEST_CASE("bench harness: every op checks right when the GPU runs only at wait()") {
  for (int n : {1, 3}) {
    for (const auto& op : kOps)
      for (bool ip : {false, true}) {
        if (ip && (op == "all_to_all" || op == "sendrecv")) continue;
        DeferredBackend b(n, 6 * 1024);
        const BenchShape s = bench_shape(op, 12 * 1024, n);  // 3072 floats, rounded to multiples of n
        CAPTURE(op);
        CAPTURE(n);
        CAPTURE(ip);
        CHECK(bench_fill_run_check(b, op, s, ip, BenchStall::OwnStream, 0.01) == 0);
        CHECK(bench_fill_run_check(b, op, s, ip, BenchStall::DefaultStream, 0.01) == 0);
        CHECK(b.collectives == 2);
        CHECK(b.stalls == n);
        CHECK(b.default_stalls == n);
      }
  }
}

TEST_CASE("bench harness: the first H200 failure, a zeroing not ordered with the collective, is caught") {
  // Out-of-place: the late zeroing wipes NCCL's result, every element of every rank is wrong (as logged at
  // 512 KiB-8 MiB on the H200); in-place rows do not zero and stay right.
  const int n = 2;
  for (const auto& op : {std::string("all_gather"), std::string("reduce_scatter"), std::string("broadcast")}) {
    DeferredBackend b(n, 8192, /*unordered_zero=*/true);
    const BenchShape s = bench_shape(op, 16 * 1024, n);
    CAPTURE(op);
    CHECK(bench_fill_run_check(b, op, s, false) == static_cast<long long>(s.recv) * n);
    CHECK(bench_fill_run_check(b, op, s, true) == 0);
  }
}

TEST_CASE("bench self-test passes on an ordered backend and fails on the racing one") {
  const std::vector<std::uint64_t> sizes = {4096, 64 * 1024};
  std::string log;
  DeferredBackend good(2, 64 * 1024 / 4);
  SelfTestResult r = bench_self_test(good, kOps, 0.02, log, sizes);
  // (7 ops x 2 sizes out-of-place + 5 ops x 2 sizes in-place) x 2 streams held.
  CHECK(r.checks == 48);
  CHECK(r.failed == 0);
  CHECK(r.control_detected);  // the read without wait() saw the poisoned slot
  CHECK(r.passed());
  CHECK(log.find("-> PASS") != std::string::npos);

  std::string bad_log;
  DeferredBackend racing(2, 64 * 1024 / 4, /*unordered_zero=*/true);
  SelfTestResult bad = bench_self_test(racing, kOps, 0.02, bad_log, sizes);
  CHECK(bad.failed == 28);  // every out-of-place check (7 ops x 2 sizes x 2), none of the in-place ones
  CHECK_FALSE(bad.passed());
  CHECK(bad_log.find("-> FAIL") != std::string::npos);
}

TEST_CASE("bench shapes round counts to multiples of the rank count, as nccl-tests does") {
  BenchShape ag = bench_shape("all_gather", 1000, 3);  // 250 floats -> 83 per rank
  CHECK(ag.send == 83);
  CHECK(ag.recv == 249);
  CHECK(ag.size_bytes == 996);
  BenchShape rs = bench_shape("reduce_scatter", 1000, 3);
  CHECK(rs.send == 249);
  CHECK(rs.recv == 83);
  BenchShape ar = bench_shape("all_reduce", 1000, 3);
  CHECK(ar.send == 250);
  CHECK(ar.size_bytes == 1000);
}

// The harness's real-GPU runs on one H200 (tests/data/nccl-harness-h200/README.md): before the fix, the
// out-of-place all_gather/reduce_scatter/broadcast/reduce rows from 512 KiB to 8 MiB came back all wrong;
// after it, the same sweep has no wrong element in any row.
#include "validate/nccl_log.hpp"

namespace {
long long wrong_in(const std::vector<Measurement>& ms, const std::string& op, bool oop, std::uint64_t lo,
                   std::uint64_t hi, int* rows_checked = nullptr) {
  long long w = 0;
  for (const auto& m : ms) {
    if (m.op != op) continue;
    for (const auto& r : m.rows) {
      if (r.size_bytes < lo || r.size_bytes > hi) continue;
      const Side& s = oop ? r.oop : r.ip;
      if (!s.present || !s.wrong) continue;
      w += *s.wrong;
      if (rows_checked) ++*rows_checked;
    }
  }
  return w;
}
// Wrong elements over every op, size and placement of a sweep; `rows` counts the rows checked.
long long wrong_everywhere(const std::vector<Measurement>& ms, int* rows) {
  long long total = 0;
  for (const auto& op : kOps) {
    total += wrong_in(ms, op, true, 0, ~0ull, rows);
    total += wrong_in(ms, op, false, 0, ~0ull, rows);
  }
  return total;
}
}  // namespace

TEST_CASE("bench harness on a real H200: the pre-fix sweep's wrong rows, the fixed sweep's none") {
  const std::string dir = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nccl-harness-h200/";
  auto before = load_measurements(dir + "run1_all_ops_1gpu.txt");
  auto after = load_measurements(dir + "run3/allops.txt");
  REQUIRE(before.size() == 7);
  REQUIRE(after.size() == 7);
  for (const std::string op : {"all_gather", "reduce_scatter", "broadcast", "reduce"}) {
    CAPTURE(op);
    CHECK(wrong_in(before, op, true, 512 << 10, 8 << 20) > 0);
    int rows = 0;
    CHECK(wrong_in(after, op, true, 512 << 10, 8 << 20, &rows) == 0);
    CHECK(rows >= 2);  // the 512 KiB, 2 MiB, 8 MiB rows of the -f 4 sweep were checked
  }
  int rows = 0;
  CHECK(wrong_everywhere(after, &rows) == 0);
  CHECK(rows > 100);
}

// The same checks on one H100 (tests/data/nccl-harness-h100/README.md), with the fixed harness: the all-ops sweep
// checked every row and found no wrong element; the self-test's legacy-zero variant failed exactly the
// out-of-place checks with the legacy default stream held (the 7 ops x 5 sizes of its table) and no other.
TEST_CASE("bench harness on a real H100: the sweep has no wrong row, the legacy-zero self-test fails where it must") {
  const std::string dir = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nccl-harness-h100/run1/";
  const auto after = load_measurements(dir + "allops.txt");
  REQUIRE(after.size() == 7);
  int rows = 0;
  CHECK(wrong_everywhere(after, &rows) == 0);
  CHECK(rows > 100);
  std::ifstream in(dir + "selftest_legacy.txt");
  REQUIRE(in);
  int failed = 0, failed_elsewhere = 0;
  std::string summary;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("self-test: ", 0) == 0) summary = line;
    if (line.size() < 4 || line.compare(line.size() - 4, 4, "FAIL") != 0 || line.rfind("self-test ", 0) != 0) continue;
    ++failed;
    if (line.find("out-of-place legacy default stream held") == std::string::npos) ++failed_elsewhere;
  }
  CHECK(failed == 35);
  CHECK(failed_elsewhere == 0);
  CHECK(summary.find("35 failed") != std::string::npos);
}
