// fabricsim-nccl-bench: measures NCCL collectives on real GPUs and writes the nccl-tests table (stdout) and
// fabricsim's collective-results JSON ("fabricsim.collective_results/1", the schema of `fabricsim coll
// --json`, with "source": "measurement"), so measured and
// simulated runs compare without conversion. See docs/validation.md for how to run it on a DGX.
//
// Plain C++ against the CUDA runtime and NCCL C APIs (no nvcc, no kernels): buffers are filled from the host
// with small integers whose sums are exact in float32, and results are copied back and checked on the host.
//
// Modes:
//  * single node, one process: ncclCommInitAll over the first --ngpus visible GPUs (default: all);
//  * multi node, one process per GPU: --uid-file PATH on a filesystem all nodes share. Rank 0 creates the
//    NCCL unique id and publishes it atomically (write PATH.tmp.<pid>, rename to PATH); the other ranks poll
//    for it. Rank, size and local GPU come from --rank/--nranks/--local-gpu, else from Slurm
//    (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), else from Open MPI's environment (OMPI_COMM_WORLD_RANK,
//    OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK). No MPI library is linked.
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"
#include "sim/base/units.hpp"
#include "replay/coll_sweep.hpp"
#include "validate/bench_harness.hpp"
#include "validate/nccl_log.hpp"
#include "validate/nccl_table.hpp"

namespace {

using fabricsim::InputError;
namespace fv = fabricsim::validate;

// A CUDA or NCCL call failed: runtime trouble on the machine, not bad input.
struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#define CUDA_OK(call)                                                                                  \
  do {                                                                                                 \
    cudaError_t e_ = (call);                                                                           \
    if (e_ != cudaSuccess)                                                                             \
      throw DeviceError(std::string(#call) + ": " + cudaGetErrorName(e_) + " (" + cudaGetErrorString(e_) + ")"); \
  } while (0)
#define NCCL_OK(call)                                                                                  \
  do {                                                                                                 \
    ncclResult_t r_ = (call);                                                                          \
    if (r_ != ncclSuccess) throw DeviceError(std::string(#call) + ": " + ncclGetErrorString(r_));      \
  } while (0)

const std::vector<std::string> kAllOps = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                          "reduce",     "all_to_all", "sendrecv"};

struct Options {
  std::vector<std::string> ops = kAllOps;
  std::uint64_t min_bytes = 8, max_bytes = 256ull << 20;
  long long factor = 2;
  int warmup = 5, iters = 20;
  int ngpus = 0;  // single-process mode: 0 = all visible
  bool check = true;
  std::uint64_t check_max_bytes = 1ull << 30;  // host-side check only up to this size (host memory/time)
  std::string json_file, json_dir;
  std::string uid_file;
  int rank = -1, nranks = -1, local_gpu = -1;
  double uid_timeout_s = 300;
  bool self_test = false;
  double self_test_stall_s = 0.02;
  bool self_test_legacy_zero = false;
};

const char* kUsage =
    "usage: fabricsim-nccl-bench [options]\n"
    "  --op LIST            comma-separated: all_reduce,all_gather,reduce_scatter,broadcast,reduce,\n"
    "                       all_to_all,sendrecv (default: all)\n"
    "  -b, --min-bytes SIZE smallest message (default 8); sizes accept K/M/G suffixes\n"
    "  -e, --max-bytes SIZE largest message (default 256M)\n"
    "  -f, --step-factor N  multiply the size by the integer N each step (default 2; 1 only when -b equals -e)\n"
    "  -w, --warmup N       warm-up iterations per size (default 5)\n"
    "  -n, --iters N        timed iterations per size (default 20)\n"
    "  -g, --ngpus N        single-process mode: GPUs to use (default: all visible)\n"
    "  -c, --check 0|1      check results on the host (default 1)\n"
    "  --check-max-bytes S  skip the check above this size (default 1G)\n"
    "  --json FILE          write the collective-results JSON (only with a single --op)\n"
    "  --json-dir DIR       write DIR/<op>.json for every op\n"
    "  --uid-file PATH      multi-process mode: NCCL unique id exchanged through PATH on a shared filesystem\n"
    "  --rank R --nranks N --local-gpu D   multi-process identity (default: Slurm, then Open MPI env)\n"
    "  --uid-timeout SEC    how long non-zero ranks wait for PATH (default 300)\n"
    "  --self-test          check the harness itself instead of measuring: every --op at 4 KiB-64 MiB,\n"
    "                       out-of-place and in-place, once with the collective's stream held before the\n"
    "                       collective (a check that did not wait for the GPU would read stale data), once\n"
    "                       with the legacy default stream held before the fill (a buffer operation not\n"
    "                       ordered with the collective would land late); plus a negative control that must\n"
    "                       see stale data. Exit 0 on PASS, 4 on FAIL. One GPU suffices.\n"
    "  --self-test-stall T  how long the stall holds each stream (default 20ms)\n"
    "  --self-test-legacy-zero  zero receive buffers with cudaMemset on the legacy default stream, as the\n"
    "                       harness did before its first real-GPU run: the self-test must then FAIL\n";

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? static_cast<int>(fabricsim::parse_int(v, name)) : dflt;
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw InputError(a, "missing value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (a == "--op") {
      o.ops.clear();
      std::stringstream ss(value());
      std::string tok;
      while (std::getline(ss, tok, ',')) {
        std::string op = fv::normalize_op(tok);
        if (op.empty()) throw InputError("--op " + tok, "unknown collective (see --help)");
        o.ops.push_back(op);
      }
      if (o.ops.empty()) throw InputError("--op", "expected at least one collective");
    } else if (a == "-b" || a == "--min-bytes") {
      o.min_bytes = fabricsim::parse_size(value(), "--min-bytes");
    } else if (a == "-e" || a == "--max-bytes") {
      o.max_bytes = fabricsim::parse_size(value(), "--max-bytes");
    } else if (a == "-f" || a == "--step-factor") {
      o.factor = fabricsim::parse_int(value(), "--step-factor");
    } else if (a == "-w" || a == "--warmup") {
      o.warmup = static_cast<int>(fabricsim::parse_int(value(), "--warmup"));
    } else if (a == "-n" || a == "--iters") {
      o.iters = static_cast<int>(fabricsim::parse_int(value(), "--iters"));
    } else if (a == "-g" || a == "--ngpus") {
      o.ngpus = static_cast<int>(fabricsim::parse_int(value(), "--ngpus"));
    } else if (a == "-c" || a == "--check") {
      o.check = fabricsim::parse_int(value(), "--check") != 0;
    } else if (a == "--check-max-bytes") {
      o.check_max_bytes = fabricsim::parse_size(value(), "--check-max-bytes");
    } else if (a == "--json") {
      o.json_file = value();
    } else if (a == "--json-dir") {
      o.json_dir = value();
    } else if (a == "--uid-file") {
      o.uid_file = value();
    } else if (a == "--rank") {
      o.rank = static_cast<int>(fabricsim::parse_int(value(), "--rank"));
    } else if (a == "--nranks") {
      o.nranks = static_cast<int>(fabricsim::parse_int(value(), "--nranks"));
    } else if (a == "--local-gpu") {
      o.local_gpu = static_cast<int>(fabricsim::parse_int(value(), "--local-gpu"));
    } else if (a == "--self-test") {
      o.self_test = true;
    } else if (a == "--self-test-legacy-zero") {
      o.self_test_legacy_zero = true;
    } else if (a == "--self-test-stall") {
      o.self_test_stall_s = fabricsim::parse_time(value(), "--self-test-stall");
      if (!(o.self_test_stall_s > 0 && o.self_test_stall_s <= 10))
        throw InputError("--self-test-stall", "expected a time in (0, 10s]");
    } else if (a == "--uid-timeout") {
      o.uid_timeout_s = fabricsim::parse_double(value(), "--uid-timeout");
    } else {
      throw InputError(a, "unknown option (see --help)");
    }
  }
  if (o.warmup < 0) throw InputError("--warmup", "must be >= 0");
  if (o.iters < 1) throw InputError("--iters", "must be >= 1");
  if (o.ngpus < 0) throw InputError("--ngpus", "must be >= 0");
  if (!o.json_file.empty() && o.ops.size() != 1) throw InputError("--json", "needs exactly one --op; use --json-dir");
  fabricsim::sim::size_sweep(o.min_bytes, o.max_bytes, o.factor);  // validates the sweep flags
  if (!o.uid_file.empty()) {
    if (o.rank < 0) o.rank = env_int("SLURM_PROCID", env_int("OMPI_COMM_WORLD_RANK", -1));
    if (o.nranks < 0) o.nranks = env_int("SLURM_NTASKS", env_int("OMPI_COMM_WORLD_SIZE", -1));
    if (o.local_gpu < 0) o.local_gpu = env_int("SLURM_LOCALID", env_int("OMPI_COMM_WORLD_LOCAL_RANK", -1));
    if (o.rank < 0 || o.nranks < 1 || o.rank >= o.nranks || o.local_gpu < 0)
      throw InputError("--uid-file", "needs --rank/--nranks/--local-gpu or a Slurm/Open MPI environment");
  }
  return o;
}

std::string hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// One GPU driven by this process.
struct Dev {
  int cuda_dev = 0;
  int rank = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;  // every operation on this GPU's buffers is ordered on this one stream
  float* send = nullptr;
  float* recv = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  float* upload_stage = nullptr;  // pinned, kUploadChunk elements
  float* download = nullptr;      // pinned download slot, grown on demand
  std::size_t download_elems = 0;
};

struct Ctx {
  std::vector<Dev> devs;  // this process's GPUs
  int nranks = 0;
  bool multi_process = false;
  std::size_t buf_bytes = 0;
};

using fv::BenchShape;
constexpr std::size_t kUploadChunk = std::size_t(16) << 20;  // elements (64 MiB) per staged upload

void issue(const std::string& op, Dev& d, int n, const BenchShape& s, bool in_place) {
  float* sb = d.send;
  float* rb = d.recv;
  if (in_place) {
    // nccl-tests' in-place layouts: the send buffer is (a slice of) the receive buffer.
    if (op == "all_gather") sb = rb + static_cast<std::size_t>(d.rank) * s.send;
    else if (op == "reduce_scatter") { sb = d.recv; rb = d.recv + static_cast<std::size_t>(d.rank) * s.recv; }
    else sb = rb;
  }
  if (op == "all_reduce") NCCL_OK(ncclAllReduce(sb, rb, s.send, ncclFloat, ncclSum, d.comm, d.stream));
  else if (op == "all_gather") NCCL_OK(ncclAllGather(sb, rb, s.send, ncclFloat, d.comm, d.stream));
  else if (op == "reduce_scatter") NCCL_OK(ncclReduceScatter(sb, rb, s.recv, ncclFloat, ncclSum, d.comm, d.stream));
  else if (op == "broadcast") NCCL_OK(ncclBroadcast(sb, rb, s.send, ncclFloat, 0, d.comm, d.stream));
  else if (op == "reduce") NCCL_OK(ncclReduce(sb, rb, s.send, ncclFloat, ncclSum, 0, d.comm, d.stream));
  else if (op == "all_to_all") {
    std::size_t per = s.send / n;
    NCCL_OK(ncclGroupStart());
    for (int p = 0; p < n; ++p) {
      NCCL_OK(ncclSend(sb + p * per, per, ncclFloat, p, d.comm, d.stream));
      NCCL_OK(ncclRecv(rb + p * per, per, ncclFloat, p, d.comm, d.stream));
    }
    NCCL_OK(ncclGroupEnd());
  } else if (op == "sendrecv") {
    // As nccl-tests sendrecv_perf: each rank sends to the next rank and receives from the previous one.
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(sb, s.send, ncclFloat, (d.rank + 1) % n, d.comm, d.stream));
    NCCL_OK(ncclRecv(rb, s.recv, ncclFloat, (d.rank + n - 1) % n, d.comm, d.stream));
    NCCL_OK(ncclGroupEnd());
  }
}

void run_once(Ctx& c, const std::string& op, const BenchShape& s, bool in_place) {
  NCCL_OK(ncclGroupStart());
  for (auto& d : c.devs) {
    CUDA_OK(cudaSetDevice(d.cuda_dev));
    issue(op, d, c.nranks, s, in_place);
  }
  NCCL_OK(ncclGroupEnd());
}

void sync_all(Ctx& c) {
  for (auto& d : c.devs) {
    CUDA_OK(cudaSetDevice(d.cuda_dev));
    CUDA_OK(cudaStreamSynchronize(d.stream));
  }
}

void host_sleep(void* seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(*static_cast<double*>(seconds)));
  delete static_cast<double*>(seconds);
}

// The harness's GPU operations (validate/bench_harness.hpp): all of them on the GPU's own stream, with
// cudaMemcpyAsync / cudaMemsetAsync through pinned host memory, so they are ordered with the collectives
// (the legacy default stream, which cudaMemcpy and cudaMemset use, is not ordered with a non-blocking stream).
class CudaBackend : public fv::CollectiveBackend {
 public:
  explicit CudaBackend(Ctx& c) : c_(c) {}
  int nranks() const override { return c_.nranks; }
  int local_count() const override { return static_cast<int>(c_.devs.size()); }
  int rank_of(int local) const override { return c_.devs[local].rank; }
  void upload(int local, fv::BenchBuffer b, std::size_t offset, const std::vector<float>& host) override {
    Dev& d = use(local);
    float* dst = buffer(d, b) + offset;
    for (std::size_t at = 0; at < host.size(); at += kUploadChunk) {
      const std::size_t n = std::min(kUploadChunk, host.size() - at);
      CUDA_OK(cudaStreamSynchronize(d.stream));  // the staging buffer's previous copy has finished
      std::memcpy(d.upload_stage, host.data() + at, n * sizeof(float));
      CUDA_OK(cudaMemcpyAsync(dst + at, d.upload_stage, n * sizeof(float), cudaMemcpyHostToDevice, d.stream));
    }
  }
  void zero(int local, fv::BenchBuffer b, std::size_t offset, std::size_t count) override {
    Dev& d = use(local);
    if (legacy_zero)  // --self-test-legacy-zero: the first H200 run's bug, kept to show the self-test catches it
      CUDA_OK(cudaMemset(buffer(d, b) + offset, 0, count * sizeof(float)));
    else
      CUDA_OK(cudaMemsetAsync(buffer(d, b) + offset, 0, count * sizeof(float), d.stream));
  }
  bool legacy_zero = false;
  void collective(const std::string& op, const BenchShape& s, bool in_place) override { run_once(c_, op, s, in_place); }
  void stall(int local, double seconds) override {
    Dev& d = use(local);
    CUDA_OK(cudaLaunchHostFunc(d.stream, host_sleep, new double(seconds)));
  }
  void stall_default_stream(int local, double seconds) override {
    use(local);
    CUDA_OK(cudaLaunchHostFunc(cudaStreamLegacy, host_sleep, new double(seconds)));
  }
  void download(int local, fv::BenchBuffer b, std::size_t offset, std::size_t count) override {
    Dev& d = use(local);
    if (count > d.download_elems) {
      CUDA_OK(cudaStreamSynchronize(d.stream));
      if (d.download) CUDA_OK(cudaFreeHost(d.download));
      CUDA_OK(cudaMallocHost(&d.download, count * sizeof(float)));
      d.download_elems = count;
    }
    std::fill(d.download, d.download + count, std::nanf(""));  // poison: a stale slot never looks right
    CUDA_OK(cudaMemcpyAsync(d.download, buffer(d, b) + offset, count * sizeof(float), cudaMemcpyDeviceToHost, d.stream));
  }
  void wait(int local) override { CUDA_OK(cudaStreamSynchronize(use(local).stream)); }
  void wait_device(int local) override {
    use(local);
    CUDA_OK(cudaDeviceSynchronize());
  }
  const float* download_slot(int local) const override { return c_.devs[local].download; }
  long long sum_over_ranks(long long v) override;

 private:
  Dev& use(int local) {
    Dev& d = c_.devs[local];
    CUDA_OK(cudaSetDevice(d.cuda_dev));
    return d;
  }
  static float* buffer(Dev& d, fv::BenchBuffer b) { return b == fv::BenchBuffer::Send ? d.send : d.recv; }
  Ctx& c_;
};

// A one-element NCCL all-reduce over all ranks, its copies ordered on the same stream.
template <typename T>
T reduce_over_ranks(Ctx& c, T v, ncclDataType_t type, ncclRedOp_t red) {
  if (!c.multi_process) return v;
  Dev& d = c.devs[0];
  CUDA_OK(cudaSetDevice(d.cuda_dev));
  T* buf = nullptr;
  CUDA_OK(cudaMalloc(&buf, sizeof(T)));
  CUDA_OK(cudaMemcpyAsync(buf, &v, sizeof v, cudaMemcpyHostToDevice, d.stream));
  NCCL_OK(ncclAllReduce(buf, buf, 1, type, red, d.comm, d.stream));
  CUDA_OK(cudaMemcpyAsync(&v, buf, sizeof v, cudaMemcpyDeviceToHost, d.stream));
  CUDA_OK(cudaStreamSynchronize(d.stream));
  CUDA_OK(cudaFree(buf));
  return v;
}

double max_over_ranks(Ctx& c, double v) { return reduce_over_ranks(c, v, ncclDouble, ncclMax); }
long long CudaBackend::sum_over_ranks(long long v) { return reduce_over_ranks(c_, v, ncclInt64, ncclSum); }

// Seconds per iteration: warm-up, then `iters` back-to-back calls between CUDA events on every local GPU;
// the slowest GPU (and, across processes, the slowest rank) defines the time.
double time_op(Ctx& c, const Options& o, const std::string& op, const BenchShape& s, bool in_place) {
  for (int i = 0; i < o.warmup; ++i) run_once(c, op, s, in_place);
  sync_all(c);
  for (auto& d : c.devs) {
    CUDA_OK(cudaSetDevice(d.cuda_dev));
    CUDA_OK(cudaEventRecord(d.start, d.stream));
  }
  for (int i = 0; i < o.iters; ++i) run_once(c, op, s, in_place);
  for (auto& d : c.devs) {
    CUDA_OK(cudaSetDevice(d.cuda_dev));
    CUDA_OK(cudaEventRecord(d.stop, d.stream));
  }
  double worst_ms = 0;
  for (auto& d : c.devs) {
    CUDA_OK(cudaSetDevice(d.cuda_dev));
    CUDA_OK(cudaEventSynchronize(d.stop));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, d.start, d.stop));
    worst_ms = std::max(worst_ms, static_cast<double>(ms));
  }
  return max_over_ranks(c, worst_ms * 1e-3 / o.iters);
}

ncclUniqueId exchange_uid(const Options& o) {
  ncclUniqueId id;
  namespace fs = std::filesystem;
  if (o.rank == 0) {
    NCCL_OK(ncclGetUniqueId(&id));
    std::string tmp = o.uid_file + ".tmp." + std::to_string(getpid());
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      if (!f) throw InputError("--uid-file " + o.uid_file, "cannot write " + tmp);
      f.write(id.internal, sizeof id.internal);
      if (!f) throw InputError("--uid-file " + o.uid_file, "write failed");
    }
    fs::rename(tmp, o.uid_file);
    return id;
  }
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    std::ifstream f(o.uid_file, std::ios::binary);
    if (f && f.read(id.internal, sizeof id.internal) && f.gcount() == sizeof id.internal) return id;
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (waited > o.uid_timeout_s)
      throw InputError("--uid-file " + o.uid_file, "rank 0 did not publish the NCCL unique id within --uid-timeout");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

std::vector<std::string> local_nics() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/class/infiniband", ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Host names of all ranks (multi-process: all-gathered over NCCL as fixed 64-byte records).
std::vector<std::string> all_hosts(Ctx& c) {
  std::string me = hostname();
  if (!c.multi_process) return std::vector<std::string>(c.devs.size(), me);
  constexpr std::size_t kLen = 64;
  Dev& d = c.devs[0];
  CUDA_OK(cudaSetDevice(d.cuda_dev));
  char* buf = nullptr;
  CUDA_OK(cudaMalloc(&buf, kLen * c.nranks));
  std::vector<char> mine(kLen, 0);
  std::memcpy(mine.data(), me.data(), std::min(me.size(), kLen - 1));
  CUDA_OK(cudaMemcpyAsync(buf + kLen * d.rank, mine.data(), kLen, cudaMemcpyHostToDevice, d.stream));
  NCCL_OK(ncclAllGather(buf + kLen * d.rank, buf, kLen, ncclChar, d.comm, d.stream));
  std::vector<char> all(kLen * c.nranks);
  CUDA_OK(cudaMemcpyAsync(all.data(), buf, all.size(), cudaMemcpyDeviceToHost, d.stream));
  CUDA_OK(cudaStreamSynchronize(d.stream));
  CUDA_OK(cudaFree(buf));
  std::vector<std::string> out;
  for (int r = 0; r < c.nranks; ++r) out.emplace_back(all.data() + kLen * r);
  return out;
}

void release(Ctx& c, const Options& o);

int run(int argc, char** argv) {
  Options o = parse_args(argc, argv);
  int visible = 0;
  cudaError_t err = cudaGetDeviceCount(&visible);
  if (err != cudaSuccess || visible == 0) {
    std::cerr << "fabricsim-nccl-bench: no usable CUDA GPU on this machine ("
              << (err != cudaSuccess ? std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err)
                                     : std::string("0 devices"))
              << "); nothing measured.\n";
    return 1;
  }
  Ctx c;
  c.multi_process = !o.uid_file.empty();
  if (c.multi_process) {
    if (o.local_gpu >= visible)
      throw InputError("--local-gpu", "GPU " + std::to_string(o.local_gpu) + " not visible (" + std::to_string(visible) + " GPUs)");
    c.nranks = o.nranks;
    Dev d;
    d.cuda_dev = o.local_gpu;
    d.rank = o.rank;
    ncclUniqueId id = exchange_uid(o);
    CUDA_OK(cudaSetDevice(d.cuda_dev));
    NCCL_OK(ncclCommInitRank(&d.comm, c.nranks, id, d.rank));
    c.devs.push_back(d);
  } else {
    int n = o.ngpus ? o.ngpus : visible;
    if (n > visible) throw InputError("--ngpus", std::to_string(n) + " requested but " + std::to_string(visible) + " visible");
    c.nranks = n;
    std::vector<int> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = i;
    std::vector<ncclComm_t> comms(n);
    NCCL_OK(ncclCommInitAll(comms.data(), n, ids.data()));
    for (int i = 0; i < n; ++i) {
      Dev d;
      d.cuda_dev = i;
      d.rank = i;
      d.comm = comms[i];
      c.devs.push_back(d);
    }
  }
  // The self-test sizes go up to 64 MiB whatever -e says.
  c.buf_bytes = o.self_test ? std::max<std::uint64_t>(o.max_bytes, fv::bench_self_test_sizes().back()) : o.max_bytes;
  for (auto& d : c.devs) {
    CUDA_OK(cudaSetDevice(d.cuda_dev));
    CUDA_OK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc(&d.send, c.buf_bytes + 64));
    CUDA_OK(cudaMalloc(&d.recv, c.buf_bytes + 64));
    CUDA_OK(cudaMallocHost(&d.upload_stage, kUploadChunk * sizeof(float)));
    CUDA_OK(cudaEventCreate(&d.start));
    CUDA_OK(cudaEventCreate(&d.stop));
  }
  const bool leader = !c.multi_process || o.rank == 0;
  CudaBackend backend(c);
  backend.legacy_zero = o.self_test_legacy_zero;
  if (o.self_test) {
    std::string log;
    fv::SelfTestResult r = fv::bench_self_test(backend, o.ops, o.self_test_stall_s, log);
    if (leader) std::cout << log << std::flush;
    release(c, o);
    return r.passed() ? 0 : 4;
  }

  // Machine description (rank lines as nccl-tests prints them).
  int nccl_code = 0;
  NCCL_OK(ncclGetVersion(&nccl_code));
  std::string nccl_version = std::to_string(nccl_code / 10000) + "." + std::to_string(nccl_code / 100 % 100) + "." +
                             std::to_string(nccl_code % 100);
  std::vector<std::string> hosts = all_hosts(c);
  std::vector<fv::RankInfo> ranks;
  std::string gpu_name;
  for (auto& d : c.devs) {
    cudaDeviceProp p{};
    CUDA_OK(cudaGetDeviceProperties(&p, d.cuda_dev));
    gpu_name = p.name;
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x", p.pciDomainID, p.pciBusID, p.pciDeviceID);
    fv::RankInfo r;
    r.rank = d.rank;
    r.group = 0;
    r.pid = getpid();
    r.host = hosts[c.multi_process ? d.rank : 0];
    r.device = d.cuda_dev;
    r.bus_id = bus;
    r.gpu_name = p.name;
    ranks.push_back(r);
  }
  std::map<std::string, std::string> env;
  for (const char* k : {"NCCL_ALGO", "NCCL_PROTO", "NCCL_NET", "NCCL_IB_HCA", "NCCL_NVLS_ENABLE", "CUDA_VISIBLE_DEVICES"})
    if (const char* v = std::getenv(k)) env[k] = v;

  auto sizes = fabricsim::sim::size_sweep(o.min_bytes, o.max_bytes, o.factor);
  long long total_wrong = 0;
  for (const auto& op : o.ops) {
    fv::Measurement m;
    m.source = "fabricsim-nccl-bench";
    m.format = "fabricsim-nccl-bench";  // its JSON's system.format: validate models the slowest rank's time
    m.slowest_rank_time = true;         // and its text says so (kBenchTimeLine)
    m.op = op;
    m.nranks = c.nranks;
    for (const auto& h : hosts)
      if (std::find(m.hosts.begin(), m.hosts.end(), h) == m.hosts.end()) m.hosts.push_back(h);
    m.num_nodes = static_cast<int>(m.hosts.size());
    m.gpu_model = gpu_name;
    m.nccl_version = nccl_version;
    m.env = env;
    m.nics = local_nics();
    m.gpus_per_thread = static_cast<int>(c.devs.size());
    if (auto it = env.find("NCCL_ALGO"); it != env.end()) m.algorithm = it->second;
    if (auto it = env.find("NCCL_PROTO"); it != env.end()) m.protocol = it->second;
    m.ranks = c.multi_process ? std::vector<fv::RankInfo>{} : ranks;  // multi-process: rank 0 knows only itself
    if (c.multi_process)
      for (int r = 0; r < c.nranks; ++r) {
        fv::RankInfo ri;
        ri.rank = r;
        ri.group = 0;
        ri.host = hosts[r];
        ri.device = r == o.rank ? o.local_gpu : -1;
        ri.gpu_name = gpu_name;  // assumes a homogeneous job
        m.ranks.push_back(ri);
      }
    fv::RunHeader h;
    h.nthread = 1;
    h.ngpus = static_cast<int>(c.devs.size());
    h.min_bytes = o.min_bytes;
    h.max_bytes = o.max_bytes;
    h.step = std::to_string(o.factor) + "(factor)";
    h.warmup_iters = o.warmup;
    h.iters = o.iters;
    h.agg_iters = 1;
    h.validation = o.check ? 1 : 0;
    m.header = h;
    m.loop_iters = o.iters;
    const bool has_ip = op != "all_to_all" && op != "sendrecv";
    for (std::uint64_t bytes : sizes) {
      BenchShape s = fv::bench_shape(op, bytes, c.nranks);
      if (s.count == 0) continue;
      fv::Row row;
      row.size_bytes = s.size_bytes;
      row.count = s.count;
      row.type = "float";
      row.redop = (op == "all_gather" || op == "broadcast" || op == "all_to_all" || op == "sendrecv") ? "none" : "sum";
      row.root = (op == "broadcast" || op == "reduce") ? 0 : -1;
      for (bool ip : {false, true}) {
        if (ip && !has_ip) continue;
        fv::bench_fill(backend, op, s, ip);
        double t = time_op(c, o, op, s, ip);
        std::optional<long long> wrong;
        if (o.check && s.size_bytes <= o.check_max_bytes) {
          wrong = fv::bench_fill_run_check(backend, op, s, ip);
          total_wrong += *wrong;
        }
        (ip ? row.ip : row.oop) = fv::side_from_time(op, c.nranks, s.size_bytes, t, wrong);
      }
      m.rows.push_back(row);
    }
    if (leader) {
      std::cout << fv::format_nccl_tests_text(m) << std::flush;
      fabricsim::Json j = fv::measurement_to_json(m);
      if (!o.json_file.empty()) fabricsim::write_file_atomic(o.json_file, j.dump(1) + "\n");
      if (!o.json_dir.empty()) {
        std::filesystem::create_directories(o.json_dir);
        fabricsim::write_file_atomic(o.json_dir + "/" + op + ".json", j.dump(1) + "\n");
      }
    }
  }
  release(c, o);
  return total_wrong ? 4 : 0;
}

void release(Ctx& c, const Options& o) {
  for (auto& d : c.devs) {
    cudaSetDevice(d.cuda_dev);
    cudaFree(d.send);
    cudaFree(d.recv);
    cudaFreeHost(d.upload_stage);
    if (d.download) cudaFreeHost(d.download);
    cudaEventDestroy(d.start);
    cudaEventDestroy(d.stop);
    cudaStreamDestroy(d.stream);
    ncclCommDestroy(d.comm);
  }
  if (c.multi_process && o.rank == 0) std::filesystem::remove(o.uid_file);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const InputError& e) {
    std::cerr << "fabricsim-nccl-bench: error: " << e.what() << "\n";
    return 2;
  } catch (const DeviceError& e) {
    std::cerr << "fabricsim-nccl-bench: CUDA/NCCL failure: " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "fabricsim-nccl-bench: internal error: " << e.what() << "\n";
    return 3;
  }
}
