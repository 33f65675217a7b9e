#pragma once
// Per-kernel compute model: the time of one GPU kernel from its shape (issue "Training step model for
// 2024-2026 clusters"). Generators describe the work of a step as KernelDescs (a GEMM's M/N/K and
// precision, a fused attention call's batch/heads/sequence/head dim, a memory-bound kernel's bytes) and
// ComputeModel::kernel_time_s prices each one. How efficiencies depend on shape, and where the fitted
// numbers come from (measured kernel rates, `fabricsim calibrate --compute`), is documented in
// models/kernel.cpp and docs/workloads.md.
#include <cstdint>
#include <string>

#include "models/gpu.hpp"

namespace fabricsim::models {

enum class KernelKind {
  Gemm,         // C[m x n] = A[m x k] * B[k x n] (one GEMM; forward, dgrad or wgrad; `groups` > 1: a batched
                //   launch of that many same-shape products, as the Mamba-2 SSD scan's per-chunk kernels)
  GroupedGemm,  // `groups` GEMMs of m x n x k each (MoE experts; m = tokens per expert)
  Attention,    // fused (flash / cuDNN) scaled-dot-product attention, forward or backward
  MemoryBound,  // norms, activations, residual adds, softmax, casts, optimizer, embedding gathers
};
const char* to_string(KernelKind k);

// What a memory-bound kernel does (efficiencies differ: a copy streams, a row softmax reduces).
// Activation: an unfused gated activation (SwiGLU / GeGLU: several elementwise passes, measured far below a
// residual add); ScatterAdd: index_add / scatter of rows (MoE unpermute), atomics-bound.
// TopK: an unfused MoE router's score function and torch.topk over the tokens x experts fp32 scores.
enum class MemoryKernel { Copy, Norm, Elementwise, Softmax, CrossEntropy, Cast, Optimizer, Embedding, Activation, ScatterAdd, TopK };
constexpr int kNumMemoryKernels = 11;
const char* to_string(MemoryKernel k);
bool parse_memory_kernel(const std::string& s, MemoryKernel& out);  // the to_string names

// Fused-attention implementation (unfused attention is not one kernel: generators emit its GEMMs and
// softmax as separate Gemm / MemoryBound kernels).
enum class AttentionImpl { Flash, Cudnn };
const char* to_string(AttentionImpl a);
bool parse_attention_impl(const std::string& s, AttentionImpl& out);  // "flash", "cudnn"
bool parse_kernel_kind(const std::string& s, KernelKind& out);        // the to_string names

struct KernelDesc {
  KernelKind kind = KernelKind::Gemm;
  Precision precision = Precision::BF16;
  // Gemm / GroupedGemm.
  std::int64_t m = 0, n = 0, k = 0, groups = 1;
  // Attention: `heads` query heads sharing `kv_heads` key/value heads (GQA; == heads for MHA).
  std::int64_t batch = 0, heads = 0, kv_heads = 0, seq_q = 0, seq_kv = 0, head_dim = 0;
  bool causal = true;
  bool backward = false;
  AttentionImpl attention_impl = AttentionImpl::Cudnn;
  // MemoryBound: bytes read + written (and optional CUDA-core FLOPs, never binding on GPUs we model).
  MemoryKernel memory_kind = MemoryKernel::Elementwise;
  double bytes = 0;

  // Model FLOPs of the kernel: 2 m n k x groups; attention forward 4 b h s_q s_kv d, halved when causal,
  // backward 2.5x the forward (the dQ, dK, dV GEMMs and the recomputed scores).
  double flops() const;

  static KernelDesc gemm(std::int64_t m, std::int64_t n, std::int64_t k, Precision p);
  // `batch` products of m x n x k in one launch, priced by the dense GEMM fit (tiles over all of them).
  static KernelDesc batched_gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, Precision p);
  static KernelDesc grouped_gemm(std::int64_t groups, std::int64_t m, std::int64_t n, std::int64_t k, Precision p);
  static KernelDesc attention(std::int64_t batch, std::int64_t heads, std::int64_t kv_heads, std::int64_t seq_q,
                              std::int64_t seq_kv, std::int64_t head_dim, bool causal, bool backward,
                              Precision p, AttentionImpl impl = AttentionImpl::Cudnn);
  static KernelDesc memory(MemoryKernel kind, double bytes, Precision p = Precision::BF16);
};

}  // namespace fabricsim::models
