// fabricsim-kernel-bench: measures the kernels a transformer training step is made of on the GPU at hand and
// writes them as "fabricsim.kernel_measurements/1" JSON, which `fabricsim calibrate --compute` turns into a
// compute calibration (docs/calibration.md).
//
// What it times (CUDA events around `--iters` back-to-back launches after `--warmup`, on one stream):
//  * dense GEMMs through cuBLASLt, bf16 (fp32 accumulate, bf16 out) and fp8 e4m3 (per-tensor scales, bf16 out),
//    at the shapes of Llama-3 8B / 70B / 405B linear layers under TP 1/2/4/8 for 4096 and 16384 tokens, as
//    forward (M x N x K = tokens x out x in), dgrad and wgrad, plus square reference sizes; or the shapes listed
//    in a --shapes file;
//  * equal-size grouped GEMMs (MoE experts; cuBLASLt strided batches) at 16-16384 tokens per expert;
//  * memory-bound kernels written here (copy, RMSNorm, LayerNorm, residual add, row softmax, SwiGLU, fp8 cast
//    with amax, AdamW, cross-entropy forward) and the launch gap, eager and inside a CUDA graph;
//  * with --overlap, GEMMs beside a kernel that holds SMs as NCCL's collectives do (run_overlap, CSV).
// Every point is independent: a shape cuBLASLt has no algorithm for is reported on stderr and skipped.
// No fabricsim library is linked, so the file also builds alone:
//   nvcc -O3 -std=c++17 -arch=sm_90a kernel_bench.cu -lcublasLt -o fabricsim-kernel-bench
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

struct Fail : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#define CK(call)                                                                                    \
  do {                                                                                              \
    cudaError_t e_ = (call);                                                                        \
    if (e_ != cudaSuccess) throw Fail(std::string(#call) + ": " + cudaGetErrorString(e_));         \
  } while (0)
#define LT(call)                                                                                    \
  do {                                                                                              \
    cublasStatus_t s_ = (call);                                                                     \
    if (s_ != CUBLAS_STATUS_SUCCESS) throw Fail(std::string(#call) + ": cublas status " + std::to_string(int(s_))); \
  } while (0)

struct Options {
  int warmup = 3, iters = 10;
  std::string out;
  std::string shapes_file;
  std::vector<std::string> only;  // gemm, grouped_gemm, memory_bound, launch
  bool quick = false;             // a few shapes per kind (install check)
  std::string overlap_csv;        // GEMMs beside a communication stand-in, as CSV (run_overlap)
};

const char* kUsage =
    "usage: fabricsim-kernel-bench -o kernels.json [options]\n"
    "  -o, --out FILE     write the fabricsim.kernel_measurements/1 JSON here (required)\n"
    "  -w, --warmup N     warm-up launches per point (default 3)\n"
    "  -n, --iters N      timed launches per point (default 10)\n"
    "  --only LIST        comma-separated kinds: gemm,grouped_gemm,memory_bound,launch (default: all)\n"
    "  --shapes FILE      GEMMs to time instead of the built-in Llama-3 set: one 'M N K precision [label]'\n"
    "                     per line (precision bf16 or fp8; '#' starts a comment)\n"
    "  --quick            a handful of points per kind (checks an install in seconds)\n"
    "  --overlap FILE     also time GEMMs beside a communication stand-in kernel (CTAs that poll or copy,\n"
    "                     as NCCL's do) and write the CSV here; with --overlap alone, -o is not needed\n";

// ---------------------------------------------------------------------------------------------------------
// Output
struct Point {
  std::string json;  // one kernels[] entry
};
std::vector<Point> g_points;

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o;
}

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

// Writes `text` to `path` through a temporary file renamed into place (never a half-written file).
void write_whole(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    if (!f) throw std::invalid_argument(path + ": cannot write");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::invalid_argument(path + ": cannot write");
}

// ---------------------------------------------------------------------------------------------------------
// Two events around work queued on a stream: `seconds()` waits for the second and returns the time between.
struct EventPair {
  cudaEvent_t a = nullptr, b = nullptr;
  EventPair() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  ~EventPair() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  double seconds() {
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1e-3;
  }
};

// Timing: seconds per launch of `fn` on `stream`. `enqueued`, if given, runs once the timed launches are
// queued and before they are waited for (work another stream starts while they run).
double time_it(cudaStream_t stream, const Options& o, const std::function<void()>& fn,
               const std::function<void()>& enqueued = {}) {
  for (int i = 0; i < o.warmup; ++i) fn();
  EventPair ev;
  CK(cudaEventRecord(ev.a, stream));
  for (int i = 0; i < o.iters; ++i) fn();
  CK(cudaEventRecord(ev.b, stream));
  if (enqueued) enqueued();
  const double s = ev.seconds();
  CK(cudaGetLastError());
  return s / o.iters;
}

__global__ void fill_random(__nv_bfloat16* p, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    std::uint32_t x = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    p[i] = __float2bfloat16((static_cast<float>(x & 0xffff) / 65536.0f - 0.5f) * 2.0f);
  }
}

__global__ void to_fp8(const __nv_bfloat16* in, __nv_fp8_e4m3* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = __nv_fp8_e4m3(__bfloat162float(in[i]));
}

// A device arena: one allocation reused by every point (sized for the largest).
struct Arena {
  char* base = nullptr;
  std::size_t bytes = 0;
  void reserve(std::size_t n) {
    if (n <= bytes) return;
    if (base) CK(cudaFree(base));
    CK(cudaMalloc(&base, n));
    bytes = n;
  }
  ~Arena() {
    if (base) cudaFree(base);
  }
};

// ---------------------------------------------------------------------------------------------------------
// GEMMs through cuBLASLt. Row-major C[M x N] = A[M x K] * W[N x K]^T (activations times the weight as stored,
// out x in), which is column-major C^T = W^T' * A^T': cuBLASLt's "TN" form (op(A) = T on W, op(B) = N on A),
// the layout its FP8 kernels require on Hopper.
struct Gemm {
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 64ull << 20;
  float* scale = nullptr;  // device 1.0f, the per-tensor scales of the fp8 GEMMs

  Gemm() {
    LT(cublasLtCreate(&lt));
    CK(cudaMalloc(&workspace, workspace_bytes));
    CK(cudaMalloc(&scale, sizeof(float)));
    float one = 1.0f;
    CK(cudaMemcpy(scale, &one, sizeof one, cudaMemcpyHostToDevice));
  }
  ~Gemm() {
    cudaFree(workspace);
    cudaFree(scale);
    cublasLtDestroy(lt);
  }

  // Seconds per GEMM (batch > 1: `batch` equal GEMMs in one call, strided), or throws Fail. `before` runs
  // after the operands are ready and before the warm-up; `enqueued` as in time_it.
  double time(cudaStream_t st, const Options& o, Arena& arena, std::int64_t M, std::int64_t N, std::int64_t K,
              bool fp8, int batch = 1, const std::function<void()>& before = {},
              const std::function<void()>& enqueued = {}) {
    const std::size_t el = fp8 ? 1 : 2;
    const std::size_t a_bytes = std::size_t(M) * K * el * batch, w_bytes = std::size_t(N) * K * el * batch;
    const std::size_t c_bytes = std::size_t(M) * N * 2 * batch;
    const std::size_t stage = fp8 ? (std::size_t(M) * K + std::size_t(N) * K) * 2 * batch : 0;
    arena.reserve(a_bytes + w_bytes + c_bytes + stage + 1024);
    char* p = arena.base;
    void* A = p;
    void* W = p + a_bytes;
    void* C = p + a_bytes + w_bytes;
    if (fp8) {
      auto* s = reinterpret_cast<__nv_bfloat16*>(p + a_bytes + w_bytes + c_bytes);
      const std::size_t na = std::size_t(M) * K * batch, nw = std::size_t(N) * K * batch;
      fill_random<<<1024, 256, 0, st>>>(s, na + nw, 7u);
      to_fp8<<<1024, 256, 0, st>>>(s, static_cast<__nv_fp8_e4m3*>(A), na);
      to_fp8<<<1024, 256, 0, st>>>(s + na, static_cast<__nv_fp8_e4m3*>(W), nw);
    } else {
      fill_random<<<1024, 256, 0, st>>>(static_cast<__nv_bfloat16*>(A), std::size_t(M) * K * batch, 7u);
      fill_random<<<1024, 256, 0, st>>>(static_cast<__nv_bfloat16*>(W), std::size_t(N) * K * batch, 11u);
    }
    CK(cudaGetLastError());

    const cudaDataType_t in_t = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    double seconds = 0;
    std::string err;
    try {
      LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
      LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
      if (fp8) {
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale, sizeof scale));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale, sizeof scale));
      }
      // Column-major views: W^T' is K x N (ld K), A^T' is K x M (ld K), C^T' is N x M (ld N).
      LT(cublasLtMatrixLayoutCreate(&la, in_t, K, N, K));
      LT(cublasLtMatrixLayoutCreate(&lb, in_t, K, M, K));
      LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N));
      if (batch > 1) {
        std::int32_t bc = batch;
        std::int64_t sa = std::int64_t(N) * K, sb = std::int64_t(M) * K, sc = std::int64_t(M) * N;
        LT(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
        LT(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
        LT(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
        LT(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, sizeof sa));
        LT(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb, sizeof sb));
        LT(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sc, sizeof sc));
      }
      LT(cublasLtMatmulPreferenceCreate(&pref));
      LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                              sizeof workspace_bytes));
      cublasLtMatmulHeuristicResult_t h{};
      int found = 0;
      LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &h, &found));
      if (found < 1) throw Fail("no cuBLASLt algorithm");
      const float alpha = 1.0f, beta = 0.0f;
      if (before) before();
      seconds = time_it(st, o, [&] {
        LT(cublasLtMatmul(lt, op, &alpha, W, la, A, lb, &beta, C, lc, C, lc, &h.algo, workspace, workspace_bytes, st));
      }, enqueued);
    } catch (const Fail& f) {
      err = f.what();
    }
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (op) cublasLtMatmulDescDestroy(op);
    if (!err.empty()) throw Fail(err);
    return seconds;
  }
};

struct GemmShape {
  std::int64_t m, n, k;
  bool fp8;
  std::string label;
};

// Llama-3 linear layers (Meta's configs: hidden, ffn, heads, kv heads; head dim 128), one TP rank's slice.
std::vector<GemmShape> llama_shapes(bool quick) {
  struct M {
    const char* name;
    std::int64_t h, ffn, heads, kv;
  };
  const M models[] = {{"llama3-8b", 4096, 14336, 32, 8}, {"llama3-70b", 8192, 28672, 64, 8},
                      {"llama3.1-405b", 16384, 53248, 128, 8}};
  std::vector<GemmShape> v;
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, bool>, bool> seen;
  for (const auto& md : models)
    for (int tp : {1, 2, 4, 8}) {
      const std::int64_t d = md.h / md.heads;
      const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> layers[] = {
          {"qkv", {md.h, (md.heads + 2 * md.kv) * d / tp}},
          {"proj", {md.h / tp, md.h}},
          {"fc1_swiglu", {md.h, 2 * md.ffn / tp}},
          {"fc2", {md.ffn / tp, md.h}}};
      for (const auto& [lname, kn] : layers)
        for (std::int64_t tokens : {4096, 16384}) {
          const std::int64_t K = kn.first, N = kn.second;
          const std::tuple<const char*, std::int64_t, std::int64_t, std::int64_t> passes[] = {
              {"fwd", tokens, N, K}, {"dgrad", tokens, K, N}, {"wgrad", N, K, tokens}};
          for (const auto& [pname, m, n, k] : passes)
            for (bool fp8 : {false, true}) {
              auto key = std::make_tuple(m, n, k, fp8);
              if (seen[key]) continue;
              seen[key] = true;
              v.push_back({m, n, k, fp8, std::string(md.name) + " tp" + std::to_string(tp) + " " + lname + " " + pname});
            }
        }
      if (quick) break;
    }
  for (std::int64_t s : {1024, 2048, 4096, 8192, 16384})
    for (bool fp8 : {false, true}) v.push_back({s, s, s, fp8, "square"});
  if (quick) v.resize(std::min<std::size_t>(v.size(), 8));
  return v;
}

std::vector<GemmShape> read_shapes(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::invalid_argument(path + ": cannot open");
  std::vector<GemmShape> v;
  std::string line;
  int no = 0;
  while (std::getline(f, line)) {
    ++no;
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    std::istringstream is(line);
    GemmShape g{};
    std::string prec;
    if (!(is >> g.m)) continue;  // blank or comment line
    if (!(is >> g.n >> g.k >> prec) || g.m < 1 || g.n < 1 || g.k < 1 || (prec != "bf16" && prec != "fp8"))
      throw std::invalid_argument(path + ":" + std::to_string(no) + ": expected 'M N K bf16|fp8 [label]' with positive M, N, K");
    g.fp8 = prec == "fp8";
    std::getline(is, g.label);
    g.label.erase(0, g.label.find_first_not_of(" \t"));
    v.push_back(g);
  }
  if (v.empty()) throw std::invalid_argument(path + ": no shapes");
  return v;
}

void run_gemms(cudaStream_t st, const Options& o, Arena& arena, Gemm& g, const std::vector<GemmShape>& shapes) {
  for (const auto& s : shapes) {
    try {
      const double t = g.time(st, o, arena, s.m, s.n, s.k, s.fp8);
      g_points.push_back({"{\"kind\": \"gemm\", \"precision\": \"" + std::string(s.fp8 ? "fp8" : "bf16") +
                          "\", \"m\": " + std::to_string(s.m) + ", \"n\": " + std::to_string(s.n) +
                          ", \"k\": " + std::to_string(s.k) + ", \"time_us\": " + num(t * 1e6) +
                          ", \"label\": \"" + esc(s.label) + "\"}"});
      std::fprintf(stderr, "gemm %6lld x %6lld x %6lld %s %10.2f us %7.1f TFLOP/s  %s\n", (long long)s.m,
                   (long long)s.n, (long long)s.k, s.fp8 ? "fp8 " : "bf16", t * 1e6, 2.0 * s.m * s.n * s.k / t / 1e12,
                   s.label.c_str());
    } catch (const Fail& f) {
      std::fprintf(stderr, "gemm %lld x %lld x %lld %s skipped: %s\n", (long long)s.m, (long long)s.n,
                   (long long)s.k, s.fp8 ? "fp8" : "bf16", f.what());
    }
  }
}

void run_grouped(cudaStream_t st, const Options& o, Arena& arena, Gemm& g) {
  // MoE expert fc1 (SwiGLU: 2 x moe_ffn outputs): Qwen3-30B-A3B (hidden 2048, moe_ffn 768, 16 local experts),
  // DeepSeek-V3 (7168, 2048, 4 local), Qwen3-235B-A22B (4096, 1536, 8 local): the models' published configs.
  struct E {
    const char* name;
    int experts;
    std::int64_t hidden, out;
  };
  const E es[] = {{"qwen3-30b-a3b", 16, 2048, 1536}, {"deepseek-v3", 4, 7168, 4096}, {"qwen3-235b-a22b", 8, 4096, 3072}};
  for (const auto& e : es)
    for (std::int64_t t : {16, 64, 256, 1024, 4096, 16384}) {
      if (o.quick && t != 256) continue;
      try {
        const double s = g.time(st, o, arena, t, e.out, e.hidden, false, e.experts);
        g_points.push_back({"{\"kind\": \"grouped_gemm\", \"precision\": \"bf16\", \"groups\": " +
                            std::to_string(e.experts) + ", \"m\": " + std::to_string(t) + ", \"n\": " +
                            std::to_string(e.out) + ", \"k\": " + std::to_string(e.hidden) + ", \"time_us\": " +
                            num(s * 1e6) + ", \"label\": \"" + e.name + " fc1, cuBLASLt strided batch\"}"});
        std::fprintf(stderr, "grouped %2d x (%5lld x %lld x %lld) %10.2f us %7.1f TFLOP/s  %s\n", e.experts,
                     (long long)t, (long long)e.out, (long long)e.hidden, s * 1e6,
                     2.0 * e.experts * t * e.out * e.hidden / s / 1e12, e.name);
      } catch (const Fail& f) {
        std::fprintf(stderr, "grouped %s %lld skipped: %s\n", e.name, (long long)t, f.what());
      }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Memory-bound kernels: straightforward single-pass CUDA kernels (bf16 storage, fp32 math), one row per
// block where a row reduces. They show what an unfused framework kernel achieves; bytes count what each
// must read and write once.
__device__ float block_sum(float v, float* sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) sh[w] = v;
  __syncthreads();
  if (w == 0) {
    v = lane < (blockDim.x >> 5) ? sh[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) sh[0] = v;
  }
  __syncthreads();
  v = sh[0];
  __syncthreads();
  return v;
}

__device__ float block_max(float v, float* sh) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) sh[w] = v;
  __syncthreads();
  if (w == 0) {
    v = lane < (blockDim.x >> 5) ? sh[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) sh[0] = v;
  }
  __syncthreads();
  v = sh[0];
  __syncthreads();
  return v;
}

__global__ void rmsnorm(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int cols, bool center) {
  __shared__ float sh[32];
  const __nv_bfloat16* r = x + std::size_t(blockIdx.x) * cols;
  float s = 0, s2 = 0;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    float v = __bfloat162float(r[i]);
    s += v;
    s2 += v * v;
  }
  const float mean = center ? block_sum(s, sh) / cols : 0.0f;
  const float var = block_sum(s2, sh) / cols - mean * mean;
  const float inv = rsqrtf(var + 1e-5f);
  for (int i = threadIdx.x; i < cols; i += blockDim.x)
    y[std::size_t(blockIdx.x) * cols + i] = __float2bfloat16((__bfloat162float(r[i]) - mean) * inv * __bfloat162float(w[i]));
}

__global__ void add3(const __nv_bfloat162* a, const __nv_bfloat162* b, __nv_bfloat162* c, std::size_t n2) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n2; i += std::size_t(gridDim.x) * blockDim.x)
    c[i] = __hadd2(a[i], b[i]);
}

// A row's maximum m and sum s of exp(x - m) over the block (the passes of a numerically stable softmax).
__device__ void row_max_expsum(const __nv_bfloat16* r, int cols, float* sh, float& m, float& s) {
  m = -INFINITY;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, __bfloat162float(r[i]));
  m = block_max(m, sh);
  s = 0;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) s += __expf(__bfloat162float(r[i]) - m);
  s = block_sum(s, sh);
}

__global__ void softmax_rows(const __nv_bfloat16* x, __nv_bfloat16* y, int cols) {
  __shared__ float sh[32];
  const __nv_bfloat16* r = x + std::size_t(blockIdx.x) * cols;
  float m, s;
  row_max_expsum(r, cols, sh, m, s);
  for (int i = threadIdx.x; i < cols; i += blockDim.x)
    y[std::size_t(blockIdx.x) * cols + i] = __float2bfloat16(__expf(__bfloat162float(r[i]) - m) / s);
}

// SwiGLU on a fc1 output row of 2f: y = silu(u[:f]) * u[f:].
__global__ void swiglu(const __nv_bfloat16* u, __nv_bfloat16* y, std::size_t rows, std::size_t f) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < rows * f; i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t r = i / f, c = i % f;
    const float a = __bfloat162float(u[r * 2 * f + c]), b = __bfloat162float(u[r * 2 * f + f + c]);
    y[i] = __float2bfloat16(a / (1.0f + __expf(-a)) * b);
  }
}

__global__ void cast_fp8_amax(const __nv_bfloat16* x, __nv_fp8_e4m3* y, std::size_t n, unsigned int* amax_bits) {
  float m = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const float v = __bfloat162float(x[i]);
    m = fmaxf(m, fabsf(v));
    y[i] = __nv_fp8_e4m3(v);
  }
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) atomicMax(amax_bits, __float_as_uint(m));  // m >= 0: bit order is value order
}

// AdamW over fp32 parameters: reads p, g, m, v, writes p, m, v (28 bytes per parameter).
__global__ void adamw(float* p, const float* g, float* m, float* v, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const float gi = g[i];
    const float mi = 0.9f * m[i] + 0.1f * gi, vi = 0.95f * v[i] + 0.05f * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= 1e-4f * (mi / (sqrtf(vi) + 1e-8f) + 0.1f * p[i]);
  }
}

// Cross-entropy forward over a vocabulary row (bf16 logits, one target per row): a logsumexp per row.
__global__ void cross_entropy(const __nv_bfloat16* x, const int* target, float* loss, int cols) {
  __shared__ float sh[32];
  const __nv_bfloat16* r = x + std::size_t(blockIdx.x) * cols;
  float m, s;
  row_max_expsum(r, cols, sh, m, s);
  if (threadIdx.x == 0) loss[blockIdx.x] = logf(s) + m - __bfloat162float(r[target[blockIdx.x] % cols]);
}

__global__ void tiny(float* p) {
  if (threadIdx.x == 0) p[0] += 1.0f;
}

void record_mem(const std::string& op, const std::string& label, double bytes, double t) {
  g_points.push_back({"{\"kind\": \"memory_bound\", \"op\": \"" + op + "\", \"bytes\": " + num(bytes) +
                      ", \"time_us\": " + num(t * 1e6) + ", \"label\": \"" + esc(label) + "\"}"});
  std::fprintf(stderr, "memory %-14s %-28s %12.0f B %10.2f us %8.1f GB/s\n", op.c_str(), label.c_str(), bytes, t * 1e6,
               bytes / t / 1e9);
}

void run_memory(cudaStream_t st, const Options& o, Arena& arena, int sms) {
  const int grid = sms * 8;
  // Copy: 2 GiB device to device (bytes read + written).
  {
    const std::size_t n = o.quick ? (256ull << 20) : (2ull << 30);
    arena.reserve(2 * n);
    const double t = time_it(st, o, [&] { CK(cudaMemcpyAsync(arena.base + n, arena.base, n, cudaMemcpyDeviceToDevice, st)); });
    record_mem("copy", "cudaMemcpyAsync D2D " + std::to_string(n >> 20) + " MiB", 2.0 * n, t);
  }
  const std::pair<int, int> rows_cols[] = {{8192, 4096}, {16384, 8192}, {8192, 16384}};
  for (const auto& rc : rows_cols) {
    const int rows = rc.first, cols = rc.second;
    if (o.quick && rows != 8192) continue;
    const std::size_t n = std::size_t(rows) * cols;
    arena.reserve(3 * n * 2 + cols * 2);
    auto* x = reinterpret_cast<__nv_bfloat16*>(arena.base);
    auto* y = x + n;
    auto* z = y + n;
    auto* w = z + n;
    fill_random<<<grid, 256, 0, st>>>(x, 3 * n + cols, 3u);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    record_mem("norm", "rmsnorm_fwd " + shape, 2.0 * n * 2,
               time_it(st, o, [&] { rmsnorm<<<rows, 256, 0, st>>>(x, w, y, cols, false); }));
    record_mem("norm", "layernorm_fwd " + shape, 2.0 * n * 2,
               time_it(st, o, [&] { rmsnorm<<<rows, 256, 0, st>>>(x, w, y, cols, true); }));
    record_mem("elementwise", "residual_add " + shape, 3.0 * n * 2, time_it(st, o, [&] {
                 add3<<<grid, 256, 0, st>>>(reinterpret_cast<__nv_bfloat162*>(x), reinterpret_cast<__nv_bfloat162*>(y),
                                            reinterpret_cast<__nv_bfloat162*>(z), n / 2);
               }));
    record_mem("softmax", "softmax_rows " + shape, 2.0 * n * 2,
               time_it(st, o, [&] { softmax_rows<<<rows, 256, 0, st>>>(x, y, cols); }));
  }
  // SwiGLU activation at Llama-3 8B / 70B-TP4 widths (ffn 14336, 7168), 8192 tokens: reads 2f, writes f.
  for (std::size_t f : {14336ul, 7168ul}) {
    const std::size_t rows = 8192;
    arena.reserve(rows * 3 * f * 2);
    auto* u = reinterpret_cast<__nv_bfloat16*>(arena.base);
    fill_random<<<grid, 256, 0, st>>>(u, rows * 2 * f, 5u);
    record_mem("elementwise", "swiglu_fwd 8192x" + std::to_string(f), 3.0 * rows * f * 2,
               time_it(st, o, [&] { swiglu<<<grid, 256, 0, st>>>(u, u + rows * 2 * f, rows, f); }));
    if (o.quick) break;
  }
  // FP8 cast with amax (Transformer Engine's per-tensor scaling): reads bf16, writes fp8.
  for (const auto& rc : {std::pair<std::size_t, std::size_t>{8192, 4096}, {16384, 8192}}) {
    const std::size_t rows = rc.first, cols = rc.second, n = rows * cols;
    arena.reserve(n * 3 + 64);
    auto* x = reinterpret_cast<__nv_bfloat16*>(arena.base);
    auto* y = reinterpret_cast<__nv_fp8_e4m3*>(arena.base + n * 2);
    auto* amax = reinterpret_cast<unsigned int*>(arena.base + n * 3);
    fill_random<<<grid, 256, 0, st>>>(x, n, 9u);
    record_mem("cast", "fp8_cast_with_amax " + std::to_string(rows) + "x" + std::to_string(cols), 3.0 * n,
               time_it(st, o, [&] { cast_fp8_amax<<<grid, 256, 0, st>>>(x, y, n, amax); }));
    if (o.quick) break;
  }
  // AdamW over 250M fp32 parameters: 7 x 4 bytes per parameter.
  {
    const std::size_t n = o.quick ? 16000000 : 250000000;
    arena.reserve(n * 16);
    auto* p = reinterpret_cast<float*>(arena.base);
    CK(cudaMemsetAsync(p, 0, n * 16, st));
    record_mem("optimizer", "adamw fp32 " + std::to_string(n) + " params", 28.0 * n,
               time_it(st, o, [&] { adamw<<<grid, 256, 0, st>>>(p, p + n, p + 2 * n, p + 3 * n, n); }));
  }
  // Cross-entropy forward over Llama-3's 128256-token vocabulary, 8192 tokens (reads the bf16 logits once).
  {
    const int rows = o.quick ? 1024 : 8192, cols = 128256;
    const std::size_t n = std::size_t(rows) * cols;
    arena.reserve(n * 2 + rows * 8);
    auto* x = reinterpret_cast<__nv_bfloat16*>(arena.base);
    auto* tgt = reinterpret_cast<int*>(arena.base + n * 2);
    auto* loss = reinterpret_cast<float*>(arena.base + n * 2 + rows * 4);
    fill_random<<<grid, 256, 0, st>>>(x, n, 13u);
    CK(cudaMemsetAsync(tgt, 0, rows * 4, st));
    record_mem("cross_entropy", "cross_entropy_fwd " + std::to_string(rows) + "x" + std::to_string(cols), 2.0 * n,
               time_it(st, o, [&] { cross_entropy<<<rows, 512, 0, st>>>(x, tgt, loss, cols); }));
  }
}

void run_launch(cudaStream_t st, const Options& o, Arena& arena) {
  arena.reserve(64);
  auto* p = reinterpret_cast<float*>(arena.base);
  const int kernels = 200;
  Options lo = o;
  lo.iters = kernels;
  const double eager = time_it(st, lo, [&] { tiny<<<1, 32, 0, st>>>(p); });
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kernels; ++i) tiny<<<1, 32, 0, st>>>(p);
  CK(cudaStreamEndCapture(st, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  const double graphed = time_it(st, o, [&] { CK(cudaGraphLaunch(exec, st)); }) / kernels;
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  for (const auto& [mode, label, t] : {std::tuple<const char*, const char*, double>{"eager", "back-to-back tiny kernels, eager", eager},
                                       {"graph", "back-to-back tiny kernels in a CUDA graph", graphed}}) {
    g_points.push_back({"{\"kind\": \"launch\", \"mode\": \"" + std::string(mode) + "\", \"time_us\": " +
                        num(t * 1e6) + ", \"label\": \"" + label + "\"}"});
    std::fprintf(stderr, "launch %-44s %8.2f us per kernel\n", label, t * 1e6);
  }
}

// ---------------------------------------------------------------------------------------------------------
// GEMMs beside a communication kernel. NCCL runs a collective as one kernel of one CTA per channel on the
// GPU's SMs (src/device/common.h, ncclDevKernel: one block per channel, up to NCCL_MAX_NTHREADS = 640 threads,
// src/include/device.h @v2.26.2-1), so a collective overlapped with compute (the data-parallel gradient
// reduce-scatter, FSDP's parameter all-gather) holds SMs that the GEMMs beside it cannot use. The stand-in
// below is such a kernel: `ctas` blocks of 512 threads that wait (one thread polls a flag while the others
// sit at a barrier, as the Simple protocol waits on a peer's step counter, src/device/prims_simple.h), poll
// (every thread polls its own 16-byte line, as the LL protocol reads its flags, prims_ll.h), or copy at full
// speed (a collective moving data through HBM). Two tests:
//  * resident: the stand-in is launched first and runs until told to stop; GEMMs are timed beside it;
//  * queued: GEMMs are queued back to back, then a stand-in with a fixed amount of work (a copy of a set
//    size, or polling for a set time) is launched on another stream, of normal or high priority; both the
//    GEMM series and the stand-in are timed and compared with each alone (how the block scheduler shares the
//    SMs when both kernels are ready).
struct CommArgs {
  const float4* src = nullptr;
  float4* dst = nullptr;
  std::size_t per_cta = 0;               // float4 elements in each CTA's slice
  volatile int* stop = nullptr;          // host-mapped: nonzero ends an open-ended run
  volatile int* started = nullptr;       // host-mapped: one flag per CTA, set when it runs
  unsigned long long* rounds = nullptr;  // per CTA: slices copied or polling rounds done
  unsigned long long run_ns = 0;         // fixed-time run (poll) when nonzero
  unsigned long long copy_rounds = 0;    // fixed-work run (copy) when nonzero
  int mode = 0;                          // 0 wait, 1 poll, 2 copy
  int host_each_round = 0;               // read *stop every round (else every 50 us)
  int4* lines = nullptr;                 // per CTA 512 16-byte lines the waiting / polling threads read
};

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void __launch_bounds__(512, 1) comm_standin(CommArgs a) {
  __shared__ int done;
  const unsigned long long t0 = global_ns();
  const unsigned long long limit = t0 + 20000000000ull;  // never more than 20 s, whatever the host does
  unsigned long long last_host = t0;
  if (threadIdx.x == 0) a.started[blockIdx.x] = 1;
  const std::size_t base = std::size_t(blockIdx.x) * a.per_cta;
  unsigned long long r = 0;
  for (;;) {
    if (a.mode == 2) {
      for (std::size_t i = threadIdx.x; i < a.per_cta; i += blockDim.x) a.dst[base + i] = a.src[base + i];
    } else if (a.mode == 1 || threadIdx.x == 0) {
      volatile int* line = reinterpret_cast<volatile int*>(a.lines + std::size_t(blockIdx.x) * 512 + threadIdx.x);
      int acc = 0;
      for (int i = 0; i < 64; ++i) acc += line[i & 3];
      if (acc == -12345) line[0] = acc;  // never true: keeps the reads
    }
    ++r;
    __syncthreads();
    if (threadIdx.x == 0) {
      const unsigned long long t = global_ns();
      bool stop = false;
      if (!a.copy_rounds && !a.run_ns && (a.host_each_round || t - last_host >= 50000)) {
        last_host = t;
        stop = *a.stop != 0;  // host memory, over PCIe
      }
      done = t > limit || (a.copy_rounds ? r >= a.copy_rounds : a.run_ns ? t - t0 >= a.run_ns : stop);
    }
    __syncthreads();
    if (done) break;
  }
  if (threadIdx.x == 0) a.rounds[blockIdx.x] = r;
}

// The stand-in's modes: what its threads do, and whether thread 0 reads the host-memory stop flag every
// round (NCCL's network connections keep their step counters in host memory unless GDRCopy is on,
// src/transport/net.cc) or only every 50 us.
struct StandinMode {
  const char* name;
  int mode;
  bool host_each_round;
};
const StandinMode kModes[] = {{"wait", 0, false}, {"wait_host", 0, true}, {"poll", 1, false}, {"poll_host", 1, true}, {"copy", 2, true}};

struct CommStandin {
  static constexpr int kMaxCtas = 132;
  static constexpr std::size_t kSliceBytes = 8ull << 20;  // per CTA, twice the L2 of one H100 / H200 overall
  float4* src = nullptr;
  float4* dst = nullptr;
  int4* lines = nullptr;
  int* host = nullptr;  // [0] stop, [1..] started
  int* host_dev = nullptr;
  unsigned long long* rounds = nullptr;
  cudaStream_t normal = nullptr, high = nullptr;

  CommStandin() {
    CK(cudaMalloc(&src, kSliceBytes * kMaxCtas));
    CK(cudaMalloc(&dst, kSliceBytes * kMaxCtas));
    CK(cudaMemset(src, 0, kSliceBytes * kMaxCtas));
    CK(cudaMalloc(&lines, kMaxCtas * 512 * sizeof(int4)));
    CK(cudaMemset(lines, 0, kMaxCtas * 512 * sizeof(int4)));
    CK(cudaMalloc(&rounds, kMaxCtas * sizeof(unsigned long long)));
    CK(cudaHostAlloc(&host, (1 + kMaxCtas) * sizeof(int), cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&host_dev), host, 0));
    int lo = 0, hi = 0;
    CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    CK(cudaStreamCreateWithPriority(&normal, cudaStreamNonBlocking, lo));
    CK(cudaStreamCreateWithPriority(&high, cudaStreamNonBlocking, hi));
  }
  ~CommStandin() {
    cudaFree(src);
    cudaFree(dst);
    cudaFree(lines);
    cudaFree(rounds);
    cudaFreeHost(host);
    cudaStreamDestroy(normal);
    cudaStreamDestroy(high);
  }

  // Launches `ctas` blocks on `st`. Open-ended (copy_rounds = run_ns = 0): runs until stop(); else fixed work.
  void launch(cudaStream_t st, int ctas, const StandinMode& mode, unsigned long long copy_rounds,
              unsigned long long run_ns) {
    std::fill(host, host + 1 + kMaxCtas, 0);
    CommArgs a;
    a.src = src, a.dst = dst, a.per_cta = kSliceBytes / sizeof(float4);
    a.stop = host_dev, a.started = host_dev + 1, a.rounds = rounds;
    a.run_ns = run_ns, a.copy_rounds = copy_rounds, a.mode = mode.mode, a.lines = lines;
    a.host_each_round = mode.host_each_round ? 1 : 0;
    comm_standin<<<ctas, 512, 0, st>>>(a);
    CK(cudaGetLastError());
  }
  // Waits until all `ctas` blocks run (a GEMM timed before that would not be beside them).
  void wait_resident(int ctas) {
    for (long spin = 0;; ++spin) {
      int n = 0;
      for (int i = 0; i < ctas; ++i) n += reinterpret_cast<volatile int*>(host)[1 + i];
      if (n == ctas) return;
      if (spin > 200000000) throw Fail("communication stand-in: its blocks did not all start");
    }
  }
  void stop() { reinterpret_cast<volatile int*>(host)[0] = 1; }
  unsigned long long total_rounds(int ctas) {
    std::vector<unsigned long long> r(ctas);
    CK(cudaMemcpy(r.data(), rounds, ctas * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    unsigned long long s = 0;
    for (auto v : r) s += v;
    return s;
  }
};

// Seconds a fixed-work stand-in takes on `st` (events around it).
double time_standin(CommStandin& cs, cudaStream_t st, int ctas, const StandinMode& mode, unsigned long long copy_rounds,
                    unsigned long long run_ns) {
  EventPair ev;
  CK(cudaEventRecord(ev.a, st));
  cs.launch(st, ctas, mode, copy_rounds, run_ns);
  CK(cudaEventRecord(ev.b, st));
  return ev.seconds();
}

void run_overlap(cudaStream_t st, const Options& o, Arena& arena, Gemm& g, const std::string& csv_path) {
  // Llama-3 8B / 70B linear layers at 8192 tokens (TP 1: the FSDP / data-parallel case) and the square
  // reference, bf16 and fp8.
  const std::vector<GemmShape> shapes = {{8192, 8192, 8192, false, "square"},
                                         {8192, 28672, 4096, false, "llama3-8b tp1 fc1_swiglu fwd"},
                                         {8192, 4096, 14336, false, "llama3-8b tp1 fc2 fwd"},
                                         {8192, 6144, 4096, false, "llama3-8b tp1 qkv fwd"},
                                         {8192, 8192, 8192, true, "square"},
                                         {8192, 28672, 4096, true, "llama3-8b tp1 fc1_swiglu fwd"}};
  const std::vector<int> ctas_list = o.quick ? std::vector<int>{8} : std::vector<int>{1, 2, 4, 8, 16, 24, 32, 64};
  CommStandin cs;
  std::ostringstream csv;
  csv << "test,precision,m,n,k,comm_kind,comm_ctas,comm_threads,comm_priority,gemm_alone_us,gemm_beside_us,"
         "comm_alone_us,comm_beside_us,comm_copy_GBps,label\n";
  auto fmt = [](double v) { return v < 0 ? std::string() : num(v); };
  for (const auto& s : shapes) {
    double alone = 0;
    try {
      alone = g.time(st, o, arena, s.m, s.n, s.k, s.fp8);
    } catch (const Fail& f) {
      std::fprintf(stderr, "overlap %lld x %lld x %lld skipped: %s\n", (long long)s.m, (long long)s.n, (long long)s.k, f.what());
      continue;
    }
    const char* prec = s.fp8 ? "fp8" : "bf16";
    for (const StandinMode& mode : kModes)
      for (int ctas : ctas_list) {
        const bool copy = mode.mode == 2;
        // Resident: the stand-in holds its SMs for the whole timed series.
        EventPair ev;
        const double beside = g.time(st, o, arena, s.m, s.n, s.k, s.fp8, 1, [&] {
          CK(cudaEventRecord(ev.a, cs.normal));
          cs.launch(cs.normal, ctas, mode, 0, 0);
          CK(cudaEventRecord(ev.b, cs.normal));
          cs.wait_resident(ctas);
        });
        cs.stop();
        const double standin_s = ev.seconds();
        const double gbps = copy ? 2.0 * cs.total_rounds(ctas) * CommStandin::kSliceBytes / standin_s / 1e9 : -1;
        csv << "resident," << prec << "," << s.m << "," << s.n << "," << s.k << "," << mode.name << ","
            << ctas << ",512,normal," << num(alone * 1e6) << "," << num(beside * 1e6) << ",,," << fmt(gbps) << ","
            << esc(s.label) << "\n";
        std::fprintf(stderr, "resident %s %5lld x %5lld x %5lld %s %3d CTAs: gemm %9.2f -> %9.2f us (%+.1f %%) %s\n",
                     prec, (long long)s.m, (long long)s.n, (long long)s.k, mode.name, ctas, alone * 1e6,
                     beside * 1e6, 100.0 * (beside / alone - 1), copy ? (num(gbps) + " GB/s copied").c_str() : "");
      }
    // The GEMM alone again (how much the alone figure itself moves over the tests).
    const double again = g.time(st, o, arena, s.m, s.n, s.k, s.fp8);
    csv << "alone," << prec << "," << s.m << "," << s.n << "," << s.k << ",,0,0,," << num(alone * 1e6) << ","
        << num(again * 1e6) << ",,,," << esc(s.label) << "\n";
    std::fprintf(stderr, "alone    %s %5lld x %5lld x %5lld again: %9.2f -> %9.2f us (%+.1f %%)\n", prec, (long long)s.m,
                 (long long)s.n, (long long)s.k, alone * 1e6, again * 1e6, 100.0 * (again / alone - 1));
    // Queued: a fixed-work stand-in (a quarter of the GEMM series alone) launched while the GEMMs run.
    const double series = alone * o.iters;
    for (const StandinMode& mode : {kModes[0], kModes[4]})
      for (int ctas : {8, 16, 32})
        for (bool high : {false, true}) {
          const bool copy = mode.mode == 2;
          if (o.quick && (ctas != 8 || high)) continue;
          cudaStream_t cst = high ? cs.high : cs.normal;
          unsigned long long rounds = 0, run_ns = 0;
          if (copy) {
            const double one = time_standin(cs, cst, ctas, mode, 4, 0) / 4;  // seconds per round of all CTAs
            rounds = std::max(1ull, static_cast<unsigned long long>(0.25 * series / one));
          } else {
            run_ns = static_cast<unsigned long long>(0.25 * series * 1e9);
          }
          const double comm_alone = time_standin(cs, cst, ctas, mode, rounds, run_ns);
          EventPair ev;
          const double gemm_beside = g.time(st, o, arena, s.m, s.n, s.k, s.fp8, 1, {}, [&] {
            CK(cudaEventRecord(ev.a, cst));
            cs.launch(cst, ctas, mode, rounds, run_ns);
            CK(cudaEventRecord(ev.b, cst));
          });
          const double comm_beside = ev.seconds();
          csv << "queued," << prec << "," << s.m << "," << s.n << "," << s.k << "," << mode.name << ","
              << ctas << ",512," << (high ? "high" : "normal") << "," << num(alone * 1e6) << "," << num(gemm_beside * 1e6)
              << "," << num(comm_alone * 1e6) << "," << num(comm_beside * 1e6) << ",," << esc(s.label) << "\n";
          std::fprintf(stderr,
                       "queued %s %5lld x %5lld x %5lld %s %2d CTAs %s: gemm %9.2f -> %9.2f us, comm %9.1f -> %9.1f us\n",
                       prec, (long long)s.m, (long long)s.n, (long long)s.k, mode.name, ctas,
                       high ? "high  " : "normal", alone * 1e6, gemm_beside * 1e6, comm_alone * 1e6, comm_beside * 1e6);
        }
  }
  write_whole(csv_path, csv.str());
}

bool wanted(const Options& o, const std::string& kind) {
  return o.only.empty() || std::find(o.only.begin(), o.only.end(), kind) != o.only.end();
}

int run(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + ": missing value");
      return argv[++i];
    };
    auto count = [&](const std::string& flag) {
      const std::string v = value();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (!end || *end || n < 0 || n > 100000) throw std::invalid_argument(flag + ": expected an integer in [0, 100000], found '" + v + "'");
      return static_cast<int>(n);
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (a == "-o" || a == "--out") o.out = value();
    else if (a == "-w" || a == "--warmup") o.warmup = count(a);
    else if (a == "-n" || a == "--iters") o.iters = std::max(1, count(a));
    else if (a == "--shapes") o.shapes_file = value();
    else if (a == "--quick") o.quick = true;
    else if (a == "--overlap") o.overlap_csv = value();
    else if (a == "--only") {
      std::stringstream ss(value());
      std::string k;
      while (std::getline(ss, k, ',')) {
        if (k != "gemm" && k != "grouped_gemm" && k != "memory_bound" && k != "launch")
          throw std::invalid_argument("--only: unknown kind '" + k + "' (gemm, grouped_gemm, memory_bound, launch)");
        o.only.push_back(k);
      }
    } else throw std::invalid_argument(a + ": unknown option (see --help)");
  }
  if (o.out.empty() && o.overlap_csv.empty()) throw std::invalid_argument("-o/--out: required (the JSON to write)");
  std::vector<GemmShape> shapes = o.shapes_file.empty() ? llama_shapes(o.quick) : read_shapes(o.shapes_file);

  int devs = 0;
  if (cudaGetDeviceCount(&devs) != cudaSuccess || devs == 0) {
    std::cerr << "fabricsim-kernel-bench: no usable CUDA GPU on this machine; nothing measured.\n";
    return 1;
  }
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, 0));
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::fprintf(stderr, "fabricsim-kernel-bench on %s (%d SMs, %.1f GiB), driver %d, runtime %d, cuBLASLt %zu\n", p.name,
               p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, driver, runtime, cublasLtGetVersion());
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  Arena arena;
  {
    Gemm g;
    if (!o.overlap_csv.empty()) run_overlap(st, o, arena, g, o.overlap_csv);
    if (o.out.empty()) return 0;
    if (wanted(o, "gemm")) run_gemms(st, o, arena, g, shapes);
    if (wanted(o, "grouped_gemm")) run_grouped(st, o, arena, g);
  }
  if (wanted(o, "memory_bound")) run_memory(st, o, arena, p.multiProcessorCount);
  if (wanted(o, "launch")) run_launch(st, o, arena);
  CK(cudaStreamSynchronize(st));

  std::ostringstream js;
  js << "{\n \"schema\": \"fabricsim.kernel_measurements/1\",\n \"gpu\": {\"name\": \"" << esc(p.name)
     << "\", \"sm_count\": " << p.multiProcessorCount << ", \"memory_bytes\": " << p.totalGlobalMem << "},\n"
     << " \"source\": \"fabricsim-kernel-bench (CUDA events, " << o.warmup << " warm-up + " << o.iters
     << " timed launches per point; cuBLASLt " << cublasLtGetVersion() << ", CUDA runtime " << runtime << ", driver "
     << driver << ")\",\n \"kernels\": [\n";
  for (std::size_t i = 0; i < g_points.size(); ++i) js << "  " << g_points[i].json << (i + 1 < g_points.size() ? ",\n" : "\n");
  js << " ]\n}\n";
  write_whole(o.out, js.str());
  std::fprintf(stderr, "wrote %zu kernel measurements to %s\n", g_points.size(), o.out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::cerr << "fabricsim-kernel-bench: error: " << e.what() << "\n";
    return 2;
  } catch (const Fail& e) {
    std::cerr << "fabricsim-kernel-bench: CUDA failure: " << e.what() << "\n";
    return 3;
  }
}
