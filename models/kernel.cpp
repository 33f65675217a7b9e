#include "models/kernel.hpp"

namespace fabricsim::models {

const char* to_string(KernelKind k) {
  switch (k) {
    case KernelKind::Gemm: return "gemm";
    case KernelKind::GroupedGemm: return "grouped_gemm";
    case KernelKind::Attention: return "attention";
    case KernelKind::MemoryBound: return "memory_bound";
  }
  return "?";
}

const char* to_string(MemoryKernel k) {
  switch (k) {
    case MemoryKernel::Copy: return "copy";
    case MemoryKernel::Norm: return "norm";
    case MemoryKernel::Elementwise: return "elementwise";
    case MemoryKernel::Softmax: return "softmax";
    case MemoryKernel::CrossEntropy: return "cross_entropy";
    case MemoryKernel::Cast: return "cast";
    case MemoryKernel::Optimizer: return "optimizer";
    case MemoryKernel::Embedding: return "embedding";
    case MemoryKernel::Activation: return "activation";
    case MemoryKernel::ScatterAdd: return "scatter_add";
    case MemoryKernel::TopK: return "topk";
  }
  return "?";
}

bool parse_memory_kernel(const std::string& s, MemoryKernel& out) {
  for (int i = 0; i < kNumMemoryKernels; ++i)
    if (s == to_string(static_cast<MemoryKernel>(i))) {
      out = static_cast<MemoryKernel>(i);
      return true;
    }
  return false;
}

bool parse_attention_impl(const std::string& s, AttentionImpl& out) {
  if (s == "flash") out = AttentionImpl::Flash;
  else if (s == "cudnn") out = AttentionImpl::Cudnn;
  else return false;
  return true;
}

bool parse_kernel_kind(const std::string& s, KernelKind& out) {
  for (KernelKind k : {KernelKind::Gemm, KernelKind::GroupedGemm, KernelKind::Attention, KernelKind::MemoryBound})
    if (s == to_string(k)) {
      out = k;
      return true;
    }
  return false;
}

const char* to_string(AttentionImpl a) { return a == AttentionImpl::Flash ? "flash" : "cudnn"; }

double KernelDesc::flops() const {
  switch (kind) {
    case KernelKind::Gemm:
    case KernelKind::GroupedGemm: return 2.0 * double(groups) * double(m) * double(n) * double(k);
    case KernelKind::Attention: {
      double f = 4.0 * double(batch) * double(heads) * double(seq_q) * double(seq_kv) * double(head_dim);
      if (causal) f *= 0.5;
      return backward ? 2.5 * f : f;
    }
    case KernelKind::MemoryBound: return 0;
  }
  return 0;
}

KernelDesc KernelDesc::gemm(std::int64_t m, std::int64_t n, std::int64_t k, Precision p) {
  KernelDesc d;
  d.kind = KernelKind::Gemm;
  d.m = m, d.n = n, d.k = k, d.precision = p;
  return d;
}

KernelDesc KernelDesc::batched_gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, Precision p) {
  KernelDesc d = gemm(m, n, k, p);
  d.groups = batch;
  return d;
}

KernelDesc KernelDesc::grouped_gemm(std::int64_t groups, std::int64_t m, std::int64_t n, std::int64_t k, Precision p) {
  KernelDesc d = gemm(m, n, k, p);
  d.kind = KernelKind::GroupedGemm;
  d.groups = groups;
  return d;
}

KernelDesc KernelDesc::attention(std::int64_t batch, std::int64_t heads, std::int64_t kv_heads, std::int64_t seq_q,
                                 std::int64_t seq_kv, std::int64_t head_dim, bool causal, bool backward, Precision p,
                                 AttentionImpl impl) {
  KernelDesc d;
  d.kind = KernelKind::Attention;
  d.batch = batch, d.heads = heads, d.kv_heads = kv_heads, d.seq_q = seq_q, d.seq_kv = seq_kv;
  d.head_dim = head_dim, d.causal = causal, d.backward = backward, d.precision = p, d.attention_impl = impl;
  return d;
}

KernelDesc KernelDesc::memory(MemoryKernel kind, double bytes, Precision p) {
  KernelDesc d;
  d.kind = KernelKind::MemoryBound;
  d.memory_kind = kind, d.bytes = bytes, d.precision = p;
  return d;
}

}  // namespace fabricsim::models
