#pragma once
// The correctness half of fabricsim-nccl-bench, free of CUDA so that its ordering can be tested on a CPU.
//
// What a check does, per collective, size and placement: fill every local GPU's send side (or the in-place
// slice) with small integers whose sums are exact in float32, zero the receive side, run the collective,
// copy the result back and count the elements that differ from the closed form. Every one of those steps is
// *stream-ordered* on the GPU's one stream (CollectiveBackend below); the host reads a result only after
// wait() has returned for that GPU. The first real-GPU run (one H200, tests/data/nccl-harness-h200) failed
// because the fill used cudaMemcpy / cudaMemset on the legacy default stream while NCCL ran on a
// non-blocking stream: the two are not ordered, so the zeroing of the out-of-place receive buffer could land
// after NCCL had written it (every element wrong at 512 KiB-8 MiB), and CUDA_LAUNCH_BLOCKING=1 hid it.
// With every buffer operation on the collective's own stream there is one order, and a test double of the
// backend that defers all stream work until wait() (tests/validate/test_bench_harness.cpp) shows that the
// harness never reads a result it has not waited for.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fabricsim::validate {

// Per-op element counts for a nominal size: what each rank sends (`send`), receives (`recv`), and the size
// nccl-tests reports (`size_bytes`, after rounding counts to multiples of nranks like nccl-tests does).
struct BenchShape {
  std::size_t send = 0, recv = 0, count = 0;
  std::uint64_t size_bytes = 0;
};
BenchShape bench_shape(const std::string& op, std::uint64_t bytes, int nranks);

// Deterministic fill value: integers whose sums over <= 1024 ranks stay exact in float32.
float bench_fill_value(int rank, std::size_t i);
// The element `i` of rank `rank`'s result for `op` (broadcast/reduce root 0; sendrecv from the previous rank).
double bench_expected(const std::string& op, int rank, int nranks, const BenchShape& s, std::size_t i);

enum class BenchBuffer { Send, Recv };

// The GPU operations a check needs, for the GPUs one process drives. Everything but wait() and the
// sum over ranks is enqueued on the GPU's stream and returns at once; only wait(local) makes its effects
// (and the contents of the download slot) visible to the host.
class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual int nranks() const = 0;           // communicator size
  virtual int local_count() const = 0;      // GPUs driven by this process
  virtual int rank_of(int local) const = 0;
  // Copies `host` into buffer `b` at element `offset` (the backend stages it: `host` may go away).
  virtual void upload(int local, BenchBuffer b, std::size_t offset, const std::vector<float>& host) = 0;
  virtual void zero(int local, BenchBuffer b, std::size_t offset, std::size_t count) = 0;
  // The collective on every local GPU (in-place layouts as nccl-tests': see the CUDA backend).
  virtual void collective(const std::string& op, const BenchShape& s, bool in_place) = 0;
  // Holds the GPU's stream for `seconds` (self-test: a result read before wait() is then certainly stale).
  virtual void stall(int local, double seconds) = 0;
  // Holds the GPU's legacy default stream, which the harness must not use, for `seconds` (self-test: an
  // operation that went there instead of the collective's stream would then land after the collective).
  virtual void stall_default_stream(int local, double seconds) = 0;
  // Copies `count` elements of `b` from `offset` into this GPU's download slot; the host may poison the
  // slot first, so stale contents never look right.
  virtual void download(int local, BenchBuffer b, std::size_t offset, std::size_t count) = 0;
  virtual void wait(int local) = 0;
  // Waits for every stream of the GPU (the legacy default stream too).
  virtual void wait_device(int local) = 0;
  virtual const float* download_slot(int local) const = 0;
  // Sum over every rank of every process (multi-process: a tiny collective; one process: the value).
  virtual long long sum_over_ranks(long long v) = 0;
};

// Fills the send side (or in-place slice) of every local GPU and zeroes an out-of-place receive buffer.
void bench_fill(CollectiveBackend& b, const std::string& op, const BenchShape& s, bool in_place);
// Wrong elements on this process's GPUs (the result of the last collective). Waits before reading.
long long bench_count_wrong(CollectiveBackend& b, const std::string& op, const BenchShape& s, bool in_place);
// Which stream a check holds back: none, the collective's own (before the collective, after the fill), or
// the legacy default stream (before the fill).
enum class BenchStall { None, OwnStream, DefaultStream };
// fill, optional stall, collective, count (summed over all ranks).
long long bench_fill_run_check(CollectiveBackend& b, const std::string& op, const BenchShape& s, bool in_place,
                               BenchStall stall = BenchStall::None, double stall_s = 0);

// The harness's self-test (fabricsim-nccl-bench --self-test): every op at sizes around the range the first
// H200 run failed in, out-of-place and in-place, once with its own stream stalled before the collective
// (exposes a read that does not wait for the GPU) and once with the legacy default stream stalled before the
// fill (exposes a buffer operation on a stream not ordered with the collective, the first run's bug), must
// come back with 0 wrong elements; then a negative control reads a stalled result *without* waiting and must
// see it wrong (proof that the stall would expose a missing synchronisation). Lines go to `log`.
struct SelfTestResult {
  int checks = 0, failed = 0;
  bool control_detected = false;  // the unsynchronised read saw stale data, as it must
  bool passed() const { return failed == 0 && control_detected; }
};
// 4 KiB-64 MiB: brackets the 512 KiB-8 MiB range where the first H200 run reported every element wrong.
const std::vector<std::uint64_t>& bench_self_test_sizes();
SelfTestResult bench_self_test(CollectiveBackend& b, const std::vector<std::string>& ops, double stall_s,
                               std::string& log,
                               const std::vector<std::uint64_t>& sizes = bench_self_test_sizes());

}  // namespace fabricsim::validate
