#include "workloads/gpt.hpp"

// Layer 5, trace: turns the schedule of each simulated rank (one per pipeline stage) into trace ops with
// their dependencies -- compute ops priced by the kernels layer, collectives on the parallel layout's
// communicators, pipeline sends / receives -- then the gradient synchronisation and the optimizer step.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>

#include "models/compute_contention.hpp"
#include "models/gpu.hpp"
#include "sim/base/error.hpp"
#include "workloads/gpt_detail.hpp"

namespace fabricsim::workloads {

using models::KernelDesc;
using models::Precision;
using namespace gpt_detail;

namespace {

std::int64_t to_ns(double s) { return static_cast<std::int64_t>(std::llround(s * 1e9)); }

class RankBuilder {
 public:
  RankBuilder(RankTrace& rt) : rt_(rt) {
    rt_.streams = {"compute", "comm.tp", "pp.recv.fwd", "pp.recv.bwd", "pp.send.fwd", "pp.send.bwd", "comm.dp"};
  }
  enum Stream : std::uint16_t { kCompute = 0, kTp = 1, kRecvF = 2, kRecvB = 3, kSendF = 4, kSendB = 5, kDp = 6, kCp = 7, kFsdp = 8 };
  void add_stream(const char* name) { rt_.streams.push_back(name); }
  // The chain head, saved and restored to build two interleaved chains (MoE A2A overlap).
  std::pair<std::uint32_t, bool> head() const { return {last_, has_last_}; }
  void set_head(std::pair<std::uint32_t, bool> h) { last_ = h.first, has_last_ = h.second; }

  // Adds an op depending on the chain (and extra deps); returns its index and makes it the chain head.
  std::uint32_t chain(Op op, std::vector<std::uint32_t> extra = {}) {
    if (has_last_) op.deps.push_back(last_);
    for (auto d : extra) op.deps.push_back(d);
    std::uint32_t i = push(std::move(op));
    last_ = i;
    has_last_ = true;
    return i;
  }
  // Adds an op that starts with the chain head (depends on it) without becoming the head.
  std::uint32_t fork(Op op) {
    if (has_last_) op.deps.push_back(last_);
    return push(std::move(op));
  }
  std::uint32_t push(Op op) {
    rt_.ops.push_back(std::move(op));
    return static_cast<std::uint32_t>(rt_.ops.size() - 1);
  }
  std::uint32_t last() const { return last_; }
  bool has_last() const { return has_last_; }

  // An op that runs right after op `after` in program order (its stream runs it there) and depends on it, for
  // work a hook issues once that op is done (Megatron's DDP: a bucket's gradient scaling when its last gradient is
  // ready), decided after later ops were already added. Returns a handle that ops may list in their deps; the ops
  // are put in place, and every index renumbered, by place_inserted() once the rank is complete.
  std::uint32_t insert_after(std::uint32_t after, Op op) {
    op.deps.push_back(after);
    inserted_.push_back({after, std::move(op)});
    return kInserted | static_cast<std::uint32_t>(inserted_.size() - 1);
  }
  void place_inserted() {
    if (inserted_.empty()) return;
    const std::size_t n = rt_.ops.size();
    std::vector<std::vector<std::size_t>> after(n);
    for (std::size_t k = 0; k < inserted_.size(); ++k) after[inserted_[k].first].push_back(k);
    std::vector<std::uint32_t> at(n), at_inserted(inserted_.size());
    std::uint32_t pos = 0;
    for (std::size_t i = 0; i < n; ++i) {
      at[i] = pos++;
      for (std::size_t k : after[i]) at_inserted[k] = pos++;
    }
    auto renumber = [&](Op& op) {
      for (auto& d : op.deps) d = (d & kInserted) ? at_inserted[d & ~kInserted] : at[d];
    };
    std::vector<Op> ops;
    ops.reserve(n + inserted_.size());
    for (std::size_t i = 0; i < n; ++i) {
      ops.push_back(std::move(rt_.ops[i]));
      renumber(ops.back());
      for (std::size_t k : after[i]) {
        ops.push_back(std::move(inserted_[k].second));
        renumber(ops.back());
      }
    }
    rt_.ops = std::move(ops);
    inserted_.clear();
  }

 private:
  static constexpr std::uint32_t kInserted = 0x80000000u;
  RankTrace& rt_;
  std::uint32_t last_ = 0;
  bool has_last_ = false;
  std::vector<std::pair<std::uint32_t, Op>> inserted_;
};

Op compute_op(std::string name, const Costs& c) {
  Op op;
  op.kind = OpKind::Compute;
  op.stream = RankBuilder::kCompute;
  op.name = std::move(name);
  op.category = "compute";
  op.duration_s = static_cast<double>(to_ns(c.seconds)) * 1e-9;
  op.flops = c.flops;
  if (c.kernels > 0) op.kernel_wait_s = static_cast<double>(to_ns(models::kernel_residual_s(c.seconds, c.sq_seconds))) * 1e-9;
  return op;
}

// `a` without the kernels of `b` (a backward without its weight-gradient GEMMs).
Costs minus(Costs a, const Costs& b) {
  a.seconds -= b.seconds, a.flops -= b.flops, a.tp_gemm_seconds -= b.tp_gemm_seconds, a.kernels -= b.kernels;
  a.sq_seconds = std::max(0.0, a.sq_seconds - b.sq_seconds);
  return a;
}

Op wait_op(std::string name) {
  Op w = compute_op(std::move(name), Costs{});
  w.duration_s = 0;
  return w;
}

Op coll_op(std::string name, CollOp kind, std::int32_t comm, double bytes, std::uint16_t stream, const char* cat) {
  Op op;
  op.kind = OpKind::Collective;
  op.stream = stream;
  op.name = std::move(name);
  op.category = cat;
  op.coll = kind;
  op.comm = comm;
  op.bytes = bytes;
  return op;
}

// A permute over a group of n ranks: every rank receives `bytes` from one peer and sends as much to another
// (torch's permute_tensor: all_to_all_single whose only non-zero split is one peer; a symmetric-memory pull
// of one peer's shard by every rank at once). Priced as an all-to-all over the group moving the same bytes out
// of the rank (an all-to-all keeps 1/n of its buffer at home), the GPU's own NVLink / NIC bandwidth being the
// bound either way.
Op permute_op(std::string name, std::int32_t comm, std::int64_t n, double bytes, std::uint16_t stream, const char* cat) {
  return coll_op(std::move(name), CollOp::AllToAll, comm, double(n) / double(n - 1) * bytes, stream, cat);
}

// tp_comm_overlap: Transformer Engine's userbuffers overlap runs the TP all-gather / reduce-scatter chunks
// while the GEMMs run; the GEMMs lose the SMs the communication kernels take (GptConfig::ub_sm_factor: 132 / 116
// = 1.138x longer with TE's default 16 communication SMs of H100's 132, for the GEMMs Costs::tp_gemm_seconds
// counts, gpt_kernels.cpp layer_costs_fused); the block's other kernels (attention, norms, casts, elementwise)
// keep all SMs.

// A tp_comm_overlap collective: its SM cost is in the compute ops it overlaps (GptConfig::ub_sm_factor), so
// the replay must not charge its CTAs to the compute again (Op::sm_ctas 0).
Op userbuffers(Op op) {
  op.sm_ctas = 0;
  return op;
}

// `c` with its TP-overlapped GEMMs stretched by `factor`.
Costs tp_overlap_stretched(Costs c, double factor) {
  c.seconds += (factor - 1.0) * c.tp_gemm_seconds;
  c.tp_gemm_seconds *= factor;
  return c;
}


// Step-wide quantities the stages share.
struct StepContext {
  const GptConfig& c;
  const models::ComputeModel& cm;
  const GptStepKernels& K;
  const GptParallelLayout& Y;
  const std::vector<std::vector<std::int64_t>>& layout;
  std::vector<std::int64_t> offset;  // first global layer of each model chunk (chunk_offsets)
  std::int64_t m = 0;                // micro-batches per step
  double h = 0, V = 0;
  double tp_bytes = 0, tp_ag_bytes = 0, tp_ag_bytes_bf16 = 0, pp_bytes = 0, kv_bytes = 0, qkv_local = 0, o_local = 0, a2a_bytes = 0;
  double torch_cp_kv = 0, torch_cp_dkv = 0;  // PyTorch CP: gathered K/V (all ranks), one rank's fp32 dK/dV
  std::array<double, kMambaCpExchanges> mamba_a2a{};  // a Mamba block's CP all-to-alls (mamba_cp_a2a_bytes)
  std::array<double, 2> gdn_a2a{};  // a Gated DeltaNet block's CP all-to-alls: in_proj's output, the norm's output
  double Pl = 0, emb_el = 0, out_el = 0, grad_elem_bytes = 2.0;
  bool fp8_dispatch = false;
};

StepContext step_context(const GptConfig& c, const models::ComputeModel& cm, const GptStepKernels& K,
                         const GptParallelLayout& Y, const std::vector<std::vector<std::int64_t>>& layout) {
  StepContext x{c, cm, K, Y, layout, {}};
  const auto t = Y.t, cp = Y.cp;
  x.offset = chunk_offsets(c, layout);
  x.m = c.global_batch_size / (c.micro_batch_size * Y.dp);
  x.h = double(c.hidden_size), x.V = double(c.padded_vocab_size);
  const double s = double(c.seq_length) / double(cp), b = double(c.micro_batch_size);
  const double act_bytes = b * s * x.h * 2.0;  // one micro-batch's hidden states on this rank, 2-byte elements
  x.tp_bytes = act_bytes;
  // The TP blocks' all-gathers move FP8 where the framework gathers the quantised shards
  // (GptConfig::tp_gathers_fp8); the reduce-scatters / all-reduces stay bf16.
  // The bf16 layers of first_last_layers_bf16 gather bf16.
  x.tp_ag_bytes = c.tp_gathers_fp8() ? b * s * x.h * fp8_gather_bytes_per_element(c.quant_recipe()) : act_bytes;
  x.tp_ag_bytes_bf16 = act_bytes;
  // Pipeline sends use the scatter/gather optimisation (each TP rank sends 1/t of the activation; Narayanan
  // et al. SC'21 Sec. 4.1), on by default in Megatron-LM.
  // fp32_residual_connection: the residual stream is sent in fp32 (TransformerConfig.__post_init__ sets
  // pipeline_dtype torch.float, megatron/core/transformer/transformer_config.py:1419-1429 @d98e8a64), activations
  // forward and their gradients backward.
  x.pp_bytes = act_bytes / double(t) * (c.residual_bytes() / 2.0);
  // Context parallelism: K and V of this TP rank's key/value heads for the whole sequence (all-gather
  // output bytes; the ring of p2p exchanges moves the same (cp-1)/cp share); backward also returns dK, dV.
  const double g_t = std::max<double>(1.0, double(c.query_groups()) / double(t));
  x.kv_bytes = 2.0 * b * double(c.seq_length) * g_t * double(c.head_dim()) * 2.0;
  const double a_t = double(c.num_attention_heads / t);
  // PyTorch's context parallelism exchanges the K/V SDPA receives: torchtitan's repeat_kv (torch_compile set)
  // has copied them to every query head; its dK/dV travel as fp32 accumulators.
  const double kvh = c.torch_compile.empty() ? g_t : a_t;
  x.torch_cp_kv = 2.0 * b * double(c.seq_length) * kvh * double(c.head_dim()) * 2.0;
  x.torch_cp_dkv = 2.0 * b * s * kvh * double(c.head_dim()) * 4.0;
  x.qkv_local = b * s * (a_t + 2.0 * g_t) * double(c.head_dim()) * 2.0;
  x.o_local = b * s * a_t * double(c.head_dim()) * 2.0;
  // bf16 slots sent per rank, moe_latent_size wide under latent MoE (GptConfig::moe_width).
  x.a2a_bytes = K.T_local * double(c.moe.moe_router_topk) * double(c.moe_width()) * 2.0;
  if (c.hybrid() && cp > 1) x.mamba_a2a = mamba_cp_a2a_bytes(c);
  if (cp > 1 && !K.gdn_layers.empty()) {
    // Each rank's local tokens x the TP rank's widths in bf16 (a2a_cp_to_hp / a2a_hp_to_cp, gated_delta_net/common.py
    // @d98e8a64; gpt_kernels.cpp layer_costs_fused prices the copies around them).
    const auto w = gdn_cp_widths(c);
    x.gdn_a2a = {b * s * double(w[0]) * 2.0, b * s * double(w[1]) * 2.0};
  }
  x.fp8_dispatch = c.moe.moe_token_dispatcher_type == "flex" && c.fp8();
  x.Pl = layer_params_per_rank(c);
  x.emb_el = embedding_params_per_rank(c), x.out_el = x.V * x.h / double(t);
  x.grad_elem_bytes = c.grad_reduce_in_fp32 ? 4.0 : 2.0;
  return x;
}

// Emits the ops of one simulated rank (pipeline stage `st`).
class StageEmitter {
 public:
  StageEmitter(const StepContext& x, std::int64_t st, RankTrace& rt)
      : x_(x), c(x.c), K(x.K), Y(x.Y), st(st), p(Y.p), v(Y.v), t(Y.t), cp(Y.cp), rb(rt) {
    rt.rank = Y.rank_of(st, 0, 0, 0);
    if (cp > 1 || c.fsdp()) rb.add_stream("comm.cp");
    if (c.fsdp()) rb.add_stream("comm.fsdp");
    if (c.fsdp2_copies()) {
      kFsdpCopyIn = static_cast<std::uint16_t>(rt.streams.size());
      rb.add_stream("fsdp.copy_in");
    }
    if (symm) {
      kP2p = static_cast<std::uint16_t>(rt.streams.size());
      rb.add_stream("comm.tp.p2p");
    }
    if (hsdp_per_unit() || mfsdp_outer_ar()) {
      kFsdpAr = static_cast<std::uint16_t>(rt.streams.size());
      rb.add_stream("fsdp.all_reduce");
    }
    if (c.cpu_offloading_num_layers > 0) {
      kOffload = static_cast<std::uint16_t>(rt.streams.size());
      rb.add_stream("offload");
      const double secs = offload_copy_seconds(c);
      offload_copy_s_ = static_cast<double>(to_ns(secs)) * 1e-9;
    }
    if (c.fine_grained_activation_offloading) {
      kFgD2h = static_cast<std::uint16_t>(rt.streams.size());
      rb.add_stream("offload.d2h");
      rb.add_stream("offload.h2d");
    }
    kEp = static_cast<std::uint16_t>(rt.streams.size());
    if (moe_on) rb.add_stream("comm.ep");
    if (moe_on && Y.flex_forwarding) {
      kEpNvl = static_cast<std::uint16_t>(rt.streams.size());
      rb.add_stream("comm.ep.nvlink");
    }
    if (c.dualpipe()) {
      // DualPipe: the reverse direction's pipeline messages on their own streams (other peers; per-peer
      // order is FIFO, the two directions are not ordered against each other).
      kRev = static_cast<std::uint16_t>(rt.streams.size());
      for (const char* n : {"pp.recv.fwd.rev", "pp.recv.bwd.rev", "pp.send.fwd.rev", "pp.send.bwd.rev"}) rb.add_stream(n);
    }
    if (c.optimizer_host_fraction() > 0) {
      // optimizer_cpu_offload: the CPU AdamW's own "stream" (the host's work, in order), and with
      // overlap_cpu_optimizer_d2h_h2d HybridDeviceOptimizer's two copy streams (hybrid_optimizer.py:219-221).
      kOptCpu = static_cast<std::uint16_t>(rt.streams.size());
      rb.add_stream("optimizer.cpu");
      if (c.overlap_cpu_optimizer_d2h_h2d) rb.add_stream("optimizer.d2h"), rb.add_stream("optimizer.h2d");
    }
    if (c.state_offload()) {
      // The chunked optimizer-state offload: its copies over the GPU's host link. With fine-grained activation
      // offloading they queue on its two copy streams, so that one direction of the link carries one copy at a time
      // (a host copy is priced at the link's whole rate); else on two streams of their own (the offloaders of a
      // ChainedOptimizer share one D2H / H2D stream pair, optimizer.py:1510-1528 @d48bd6be).
      if (c.fine_grained_activation_offloading) {
        kOptStateD2h = kFgD2h;
      } else {
        kOptStateD2h = static_cast<std::uint16_t>(rt.streams.size());
        rb.add_stream("optimizer.state.d2h");
        rb.add_stream("optimizer.state.h2d");
      }
      state_plan_ = gpt_memory_of_stage(c, st).state_offload;
    }
    first_stage = st == 0, last_stage = st == p - 1;
    for (const GptChunkPlace& pl : Y.places[st]) has_first = has_first || pl.first, has_last = has_last || pl.last;
    fsdp_pp_nosync = c.use_torch_fsdp2 && p > 1;
    fsdp_gathered_.assign(static_cast<std::size_t>(nchunks()), 0);
    dist_opt_sharded = c.use_distributed_optimizer && !c.fsdp() && Y.dp * cp > 1;
    plan_buckets();
  }

  void run(const GptSchedule& sched) {
    plan_grad_launch(sched);
    // Chunked optimizer-state offload: what the previous step's optimizer step left in HBM goes to the host at this
    // step's start (train_step calls offload_optimizer_state_for_forward before zeroing the gradients, megatron/
    // training/training.py:2820-2825 at NVIDIA/Megatron-LM dev @d48bd6be; offload_for_forward, chunked_optimizer_
    // state_offload.py:808-830): the masters, and the moments of the step's last chunk, whose copy out (issued right
    // after its step, line 997) runs on into this step. On the D2H stream beside the forward, which does not wait.
    if (c.state_offload()) {
      double bytes = state_plan_.masters_bytes();
      for (auto it = state_plan_.children.rbegin(); it != state_plan_.children.rend(); ++it)
        if (!it->chunks.empty()) {
          bytes += it->chunks.back() * state_plan_.moment_bytes;
          break;
        }
      opt_state_d2h_ = rb.push(host_copy("optimizer.state.d2h", bytes / host_copy_Bps(c.gpu), kOptStateD2h));
    }
    for (const GptSlotGroup& g : sched.groups) {
      if (g.slots.size() == 1) {
        std::vector<Step> steps;
        slot_steps(g.slots[0], steps);
        for (auto& f : steps) f();
      } else {
        overlapped_pair(g.slots[0], g.slots[1]);
      }
    }
    finish_step();
    rb.place_inserted();
  }

  // The optimizer step with the chunked optimizer-state offload (ChunkedOptimizerStateOffloader.step, megatron/core/
  // optimizer/cpu_offloading/chunked_optimizer_state_offload.py:956-1006 at NVIDIA/Megatron-LM dev @d48bd6be), each
  // optimizer of the chain in turn (dense, then experts): wait for its masters (line 965), step its resident
  // parameters beside the first chunk's copy in (972-980), then per chunk k: wait for its copy in, issue chunk k+1's
  // copy in -- after everything on the D2H stream and the compute stream, so after chunk k-1's step and copy out,
  // the other staging slot's (_order_h2d_after_source_streams, 700-710) --, step chunk k, issue its copy out after
  // the step (997). The last chunk's copy out is the next step's (run). FusedAdam over each part's elements.
  void chunked_optimizer_step(std::vector<std::uint32_t> deps, const std::vector<std::uint32_t>& masters_in,
                              const std::vector<std::uint32_t>& first_in) {
    const double link = host_copy_Bps(c.gpu);
    const auto h2d_stream = static_cast<std::uint16_t>(kOptStateD2h + 1);
    std::uint32_t last_d2h = opt_state_d2h_;
    std::size_t last_child = 0;
    for (std::size_t i = 0; i < state_plan_.children.size(); ++i)
      if (!state_plan_.children[i].chunks.empty()) last_child = i;
    for (std::size_t i = 0; i < state_plan_.children.size(); ++i) {
      const auto& ch = state_plan_.children[i];
      const std::string who = i == 0 ? "optimizer" : "optimizer.experts";
      if (!ch.chunks.empty()) deps.push_back(masters_in[i]);
      const double resident = ch.elements - ch.selected;
      if (resident > 0 || ch.chunks.empty()) {
        rb.chain(compute_op(who + ".step", K.optimizer(x_.cm, resident)), deps);
        deps.clear();
      }
      std::uint32_t cur = first_in[i];
      for (std::size_t k = 0; k < ch.chunks.size(); ++k) {
        const std::string kn = ".c" + std::to_string(k);
        std::uint32_t next = 0;
        if (k + 1 < ch.chunks.size()) {
          Op h = host_copy(who + ".state.c" + std::to_string(k + 1) + ".h2d", ch.chunks[k + 1] * state_plan_.moment_bytes / link, h2d_stream);
          if (rb.has_last()) h.deps.push_back(rb.last());
          h.deps.push_back(last_d2h);
          next = rb.push(std::move(h));
        }
        deps.push_back(cur);
        rb.chain(compute_op(who + ".step" + kn, K.optimizer(x_.cm, ch.chunks[k])), deps);
        deps.clear();
        if (!(i == last_child && k + 1 == ch.chunks.size())) {
          Op o = host_copy(who + ".state" + kn + ".d2h", ch.chunks[k] * state_plan_.moment_bytes / link, kOptStateD2h);
          o.deps.push_back(rb.last());
          last_d2h = rb.push(std::move(o));
        }
        cur = next;
      }
    }
  }

 private:
  using Step = std::function<void()>;
  // Where a backward's weight-gradient GEMMs run: inside it (Whole); after the input gradient's hand-off
  // within the same slot (Delay: Megatron's delay_wgrad_compute); in a later weight slot (Deferred:
  // DualPipe's zero-bubble split, GptSlot::input_only).
  enum class WMode { Whole, Delay, Deferred };
  const StepContext& x_;
  const GptConfig& c;
  const GptStepKernels& K;
  const GptParallelLayout& Y;
  const std::int64_t st, p, v, t, cp;
  RankBuilder rb;
  std::uint16_t kEp = 0;
  std::uint16_t kFsdpCopyIn = 0;  // torch FSDP2's all-gather copy-in stream
  std::uint16_t kOffload = 0;     // activation offloading's copy stream (cpu_offloading_num_layers)
  double offload_copy_s_ = 0;     // one layer's saved activations over the host link, one direction
  std::vector<std::uint32_t> offload_d2h_, offload_h2d_;  // per offloaded layer, the current micro-batch's copies
  // Activation offloading (Transformer Engine's DefaultOffloadSynchronizer, transformer_engine/pytorch/
  // cpu_offload.py at NVIDIA/TransformerEngine@d0067d0da, with N = cpu_offloading_num_layers of L layers, no
  // pipeline parallelism): layers 0..N-1 are offloaded; layer i's copy to the host starts when layer i + 1's
  // forward starts (fwd_step: start_offload of the previous layer) on the offload stream and must be done before
  // layer L - N + i's forward (finish_offload_map: its GPU memory is released there); its copy back starts before
  // layer L - 1 - N + i's backward (start_reload_map) and layer i's backward waits for it.
  // Host work of `seconds` (rounded to the ns) on its own stream: a copy between HBM and host memory, or the host
  // CPU's optimizer step.
  static Op host_copy(const std::string& name, double seconds, std::uint16_t stream) {
    Op op = compute_op(name, Costs{});
    op.duration_s = static_cast<double>(to_ns(seconds)) * 1e-9;
    op.stream = stream;
    op.category = "offload";
    return op;
  }
  Op offload_copy(const std::string& name) const { return host_copy(name, offload_copy_s_, kOffload); }
  void offload_fwd(std::int64_t gl, const std::string& mbs, std::vector<std::uint32_t>& extra) {
    const std::int64_t N = c.cpu_offloading_num_layers, L = c.num_layers;
    if (N <= 0) return;
    if (gl == 0) offload_d2h_.assign(static_cast<std::size_t>(N), 0), offload_h2d_.assign(static_cast<std::size_t>(N), 0);
    if (gl >= 1 && gl - 1 < N)
      offload_d2h_[static_cast<std::size_t>(gl - 1)] = rb.fork(offload_copy(mbs + ".l" + std::to_string(gl - 1) + ".offload.d2h"));
    const std::int64_t i = gl - (L - N);
    if (i >= 0 && i < N && i < gl) extra.push_back(offload_d2h_[static_cast<std::size_t>(i)]);
  }
  void offload_bwd(std::int64_t gl, const std::string& mbs, std::vector<std::uint32_t>& extra) {
    const std::int64_t N = c.cpu_offloading_num_layers, L = c.num_layers;
    if (N <= 0) return;
    const std::int64_t i = gl - (L - 1 - N);
    if (i >= 0 && i < N)
      offload_h2d_[static_cast<std::size_t>(i)] = rb.fork(offload_copy(mbs + ".l" + std::to_string(i) + ".offload.h2d"));
    if (gl < N) extra.push_back(offload_h2d_[static_cast<std::size_t>(gl)]);
  }
  std::uint16_t kOptCpu = 0;  // optimizer_cpu_offload: the CPU AdamW (+1, +2: the D2H and H2D copy streams)
  std::uint16_t kOptStateD2h = 0;  // the chunked optimizer-state offload: the D2H stream (+1: H2D)
  OptimizerStateOffload state_plan_;  // the chunked optimizer-state offload of this rank (gpt_memory_of_stage)
  std::uint32_t opt_state_d2h_ = 0;
  // The optimizer step with optimizer_cpu_offload (HybridDeviceOptimizer.step, hybrid_optimizer.py:150-179 at
  // NVIDIA/Megatron-LM@d98e8a64): `gpu` is the FusedAdam over the shard's other elements, `el` the offloaded ones
  // (optimizer_offload_times prices their host work). Without overlap_cpu_optimizer_d2h_h2d both copy "streams" are
  // the current stream: the gradients' D2H, then the GPU step, while the CPU waits for the D2H and runs its AdamW;
  // its post-step hook queues the H2D behind the GPU step (lines 117-125). With it, every offloaded parameter has its
  // own CPU optimizer and D2H event: D2H copies on their stream, each parameter's CPU step after its copy, each H2D
  // on its stream after that step and after the GPU step (h2d_stream.wait_stream(current_stream)), and the current
  // stream waits for the last.
  void offloaded_optimizer_step(const Costs& gpu, double el, const std::vector<std::uint32_t>& grad_done) {
    const OptimizerOffloadTimes o = optimizer_offload_times(c, el);
    if (!c.overlap_cpu_optimizer_d2h_h2d) {
      Op d2h = host_copy("optimizer.offload.d2h", o.d2h_s, RankBuilder::kCompute);
      rb.chain(std::move(d2h), grad_done);
      const std::uint32_t cpu = rb.fork(host_copy("optimizer.offload.cpu_adamw", o.cpu_s, kOptCpu));
      rb.chain(compute_op("optimizer.step", gpu));
      rb.chain(host_copy("optimizer.offload.h2d", o.h2d_s, RankBuilder::kCompute), {cpu});
      return;
    }
    std::vector<std::uint32_t> start = grad_done;
    if (rb.has_last()) start.push_back(rb.last());
    const std::uint32_t gpu_step = rb.chain(compute_op("optimizer.step", gpu), grad_done);
    const double n = double(o.pieces);
    std::uint32_t h2d = 0;
    for (std::int64_t i = 0; i < o.pieces; ++i) {
      const std::string k = ".p" + std::to_string(i);
      Op d = host_copy("optimizer.offload.d2h" + k, o.d2h_s / n, static_cast<std::uint16_t>(kOptCpu + 1));
      if (i == 0) d.deps = start;
      const std::uint32_t di = rb.push(std::move(d));
      Op cp = host_copy("optimizer.offload.cpu_adamw" + k, o.cpu_s / n, kOptCpu);
      cp.deps = {di};
      const std::uint32_t ci = rb.push(std::move(cp));
      Op h = host_copy("optimizer.offload.h2d" + k, o.h2d_s / n, static_cast<std::uint16_t>(kOptCpu + 2));
      h.deps = {ci, gpu_step};
      h2d = rb.push(std::move(h));
    }
    rb.chain(wait_op("optimizer.offload.h2d.done"), {h2d});
  }
  // Fine-grained activation offloading (offload_modules; megatron/core/pipeline_parallel/
  // fine_grained_activation_offload.py at NVIDIA/Megatron-LM@d98e8a64): per layer, its offload groups' bytes go
  // to the host on a D2H stream once the layer's forward is done (on_group_commit_forward, :1265-1270; the
  // compute stream does not wait unless fine_grained_offloading_max_inflight_offloads caps the copies in
  // flight, :1250-1260) and come back on an H2D stream: each reload waits for its copy out (bulk_reload_group,
  // :1176-1196); a layer's reload starts when the layer after it (in forward order) starts its backward (one
  // group prefetched, :1332-1342), the chunk's last layer's when the chunk's backward starts (before the
  // gradient from the next stage: pre_reload_last_layer runs during the previous backward, :1199-1204); the
  // layer's backward waits for it (on_group_commit_backward, :1288-1308). activation_offload_fraction keeps a
  // chunk's later layers (:652-668; Megatron counts groups, here layers). Times at the mean routed load.
  std::uint16_t kFgD2h = 0;  // D2H stream; kFgD2h + 1 the H2D stream
  std::map<std::pair<std::int64_t, std::int64_t>, std::uint32_t> fg_d2h_, fg_h2d_;  // (micro-batch, layer) -> copy
  std::deque<std::uint32_t> fg_inflight_;  // copies out the compute stream has not waited for
  // Whether layer gl, the l-th of its chunk's nl, is offloaded.
  bool fg_offloaded(std::int64_t l, std::int64_t nl, std::int64_t gl) const {
    if (!c.fine_grained_activation_offloading) return false;
    const double kept = std::floor(double(nl) * (1.0 - c.activation_offload_fraction) + 1e-9);
    return double(l) < double(nl) - kept && fg_seconds(gl) > 0;
  }
  double fg_seconds(std::int64_t gl) const {
    const bool m = moe_on && K.moe_pattern[static_cast<std::size_t>(gl)];
    return static_cast<double>(to_ns(layer_offload_bytes(c, m, 1.0) / host_copy_Bps(c.gpu))) * 1e-9;
  }
  Op fg_copy(const std::string& name, std::int64_t gl, bool d2h) const {
    return host_copy(name, fg_seconds(gl), static_cast<std::uint16_t>(kFgD2h + (d2h ? 0 : 1)));
  }
  // After layer gl's forward (the chain head): its copy out; with a cap, the compute stream then waits for the
  // oldest copies beyond it (`extra`: the next forward's dependencies; null at the chunk's end).
  void fg_offload_fwd(std::int64_t mb, std::int64_t l, std::int64_t nl, std::int64_t gl, const std::string& mbs,
                      std::vector<std::uint32_t>* extra) {
    if (!fg_offloaded(l, nl, gl)) return;
    const std::uint32_t id = rb.fork(fg_copy(mbs + ".l" + std::to_string(gl) + ".offload.d2h", gl, true));
    fg_d2h_[{mb, gl}] = id;
    fg_inflight_.push_back(id);
    const std::int64_t cap = c.fine_grained_offloading_max_inflight_offloads;
    while (cap >= 0 && static_cast<std::int64_t>(fg_inflight_.size()) > cap) {
      if (extra) extra->push_back(fg_inflight_.front());
      else rb.chain(wait_op(mbs + ".l" + std::to_string(gl) + ".offload.wait"), {fg_inflight_.front()});
      fg_inflight_.pop_front();
    }
  }
  // Layer gl's reload (after its copy out), started at the chain head.
  void fg_reload(std::int64_t mb, std::int64_t l, std::int64_t nl, std::int64_t gl, const std::string& mbs) {
    if (!fg_offloaded(l, nl, gl)) return;
    Op op = fg_copy(mbs + ".l" + std::to_string(gl) + ".offload.h2d", gl, false);
    const auto d = fg_d2h_.find({mb, gl});
    if (d != fg_d2h_.end()) op.deps.push_back(d->second), fg_d2h_.erase(d);
    fg_h2d_[{mb, gl}] = rb.fork(std::move(op));
  }
  // Before layer gl's backward: prefetch the next layer (in backward order), wait for this one.
  void fg_offload_bwd(std::int64_t mb, std::int64_t l, std::int64_t nl, std::int64_t gl, const std::string& mbs,
                      std::vector<std::uint32_t>& extra) {
    if (l > 0) fg_reload(mb, l - 1, nl, gl - 1, mbs);
    const auto h = fg_h2d_.find({mb, gl});
    if (h != fg_h2d_.end()) extra.push_back(h->second), fg_h2d_.erase(h);
  }
  std::uint16_t kP2p = 0;  // PyTorch's async TP: the copy-engine pulls from peer memory and their barriers
  std::uint16_t kFsdpAr = 0;      // the HSDP all-reduce stream of torch FSDP2 (hsdp_per_unit) and Megatron-FSDP (mfsdp_outer_ar)
  std::uint16_t kEpNvl = 0;  // flex dispatcher: the NVLink forwarding inside the destination node
  std::uint16_t kRev = 0;  // DualPipe: first of the reverse direction's four pipeline streams
  const bool moe_on = c.moe.enabled();
  const bool symm = c.symm_mem_tp() && t > 1;  // PyTorch's async TP (symmetric memory)
  // A dropless MoE layer's forward dispatch waits on the host for the received-token counts: DeepEP's
  // non-cached dispatch spins the CPU on moe_recv_counter, which its notify kernel writes to host-mapped
  // memory, before it allocates the receive buffers and launches the dispatch kernel
  // (deepseek-ai/DeepEP@031a5c49 csrc/deep_ep.cpp Buffer::intranode_dispatch / internode_dispatch, the
  // `while (true)` loop when not cached_mode; Megatron-LM 1e057005 megatron/core/transformer/moe/fused_a2a.py
  // FusedDispatch.forward calls it without a handle; the backward's dispatch, FusedCombine.backward, passes
  // the handle: cached, no wait); Megatron's alltoall dispatcher synchronises its D2H copy of the splits
  // (token_dispatcher.py MoEAlltoAllTokenDispatcher._maybe_dtoh_and_synchronize, sync point
  // before_ep_alltoall, or before_finish without EP/TP), the allgather one calls tokens_per_expert.cpu();
  // torchtitan copies the output splits to the CPU with non_blocking=False (pytorch/torchtitan@b5bcd76c
  // torchtitan/models/common/token_dispatcher.py). With drop-and-pad the sizes are static and none of them
  // waits. The GPU has run out of queued work when the host sees the counts and idles until the host
  // has issued the next kernel: priced as one eager PyTorch op launch, 10.56 us
  // (tests/data/hardware/h200-kernels/kernels2.csv tiny_add_launch: the host-side time per eager op).
  // Not with the 1F1B A2A overlap or DualPipe, where the other micro-batch's queued kernels keep the GPU
  // busy across the wait.
  static constexpr double kMoeHostSyncS = 10.56e-6;
  const bool moe_host_sync = moe_on && !c.moe.moe_pad_expert_input_to_capacity &&
                             !c.moe.overlap_moe_expert_parallel_comm && !c.dualpipe();
  bool first_stage = false, last_stage = false, fsdp_pp_nosync = false, dist_opt_sharded = false;
  // FSDP: whether each chunk's layers are gathered when its next forward or backward starts. torch FSDP2
  // reshards a unit after its forward unless reshard_after_forward is off (fsdp_reshard_after_forward never;
  // torchtitan's default under PP), and after its backward unless the pipeline schedule turned that off: torch's
  // pipelining stage sets set_reshard_after_backward(False) and set_requires_gradient_sync(False) on every
  // backward but the step's last (torch/distributed/pipelining/stage.py `backward_maybe_with_nosync`, torch
  // v2.10), so under PP a stage's layers stay gathered from each backward to the next forward. Megatron FSDP
  // gathers before every forward and backward. Decided in schedule order as the slots are built.
  std::vector<char> fsdp_gathered_;
  bool fsdp_gather_before(std::int64_t ch, bool forward) {
    const bool need = !fsdp_gathered_[static_cast<std::size_t>(ch)];
    const bool reshard_after_forward = c.use_torch_fsdp2 ? c.fsdp_reshard_after_forward == "always" ||
                                                               (c.fsdp_reshard_after_forward == "default" && p == 1)
                                                         : true;
    fsdp_gathered_[static_cast<std::size_t>(ch)] = forward ? !reshard_after_forward : fsdp_pp_nosync;
    return need;
  }
  bool has_first = false, has_last = false;  // holds the embedding / the output layer (a first / last chunk)
  std::int64_t nchunks() const { return Y.chunks; }
  const GptChunkPlace& place(std::int64_t ch) const { return Y.places[st][ch]; }
  // Gradient buckets (backward order: last layer first) and, with overlap_param_gather, the parameter
  // all-gathers issued at the start of the step: bucket_of[chunk][layer].
  std::vector<std::vector<std::int64_t>> bucket_of;
  std::vector<double> bucket_elements;
  std::vector<double> bucket_dense;  // of which embedding / output-layer elements
  std::vector<std::int64_t> bucket_chunk;  // the chunk of each bucket (its first-gathered layers' chunk across chunks)
  static constexpr std::uint32_t kNoOp = UINT32_MAX;
  std::vector<std::uint32_t> early_ag;  // each bucket's overlapped parameter all-gather (kNoOp: none this step)
  std::vector<char> chunk_ag_dispatched;
  std::vector<std::pair<std::int64_t, std::int64_t>> fwd_table_;  // aligned_param_gather: (mb, chunk) of forward k
  std::int64_t fwd_count_ = 0;                                  // forward slots built so far
  // Megatron's align_param_gather: the interleaved schedule dispatches the chunks' parameter all-gathers.
  bool aligned_param_gather() const { return c.megatron_ddp() && c.align_param_gather && v > 1 && !c.dualpipe(); }
  // Megatron's align_grad_reduce (default true; --no-align-grad-reduce) under the interleaved schedule with
  // overlap_grad_reduce: the DDP hooks stay off and the schedule launches a chunk's whole reduction after the
  // backward pipeline rank r runs r virtual micro-batches after the chunk's last (backward_step_helper_postprocess,
  // megatron/core/pipeline_parallel/schedules.py:1439-1456 @d98e8a64), the chunks not reached so after the
  // cool-down (2063-2069); megatron/training/training.py:4345-4359 sets it. launch_slot_[ch]: that backward's
  // index among the stage's backward slots, -1 after the cool-down; bwd_end_: each backward slot's last op.
  std::vector<std::int64_t> launch_slot_;
  std::vector<std::uint32_t> bwd_end_;
  bool aligned_grad_reduce() const {
    return c.megatron_ddp() && c.overlap_grad_reduce && c.align_grad_reduce && v > 1 && !c.dualpipe();
  }
  void plan_grad_launch(const GptSchedule& sched) {
    if (!aligned_grad_reduce()) return;
    std::vector<GptSlot> bw;
    for (const GptSlotGroup& g : sched.groups)
      for (const GptSlot& sl : g.slots)
        if (!sl.fwd && !sl.weight) bw.push_back(sl);
    launch_slot_.assign(static_cast<std::size_t>(nchunks()), -1);
    for (std::size_t k = 0; k < bw.size(); ++k) {
      if (k < static_cast<std::size_t>(st)) continue;
      const GptSlot& j = bw[k - static_cast<std::size_t>(st)];
      if (j.mb == x_.m - 1 && launch_slot_[static_cast<std::size_t>(j.chunk)] < 0)
        launch_slot_[static_cast<std::size_t>(j.chunk)] = static_cast<std::int64_t>(k);
    }
  }
  // Issues chunk ch's parameter all-gathers (its buckets, first layers first) where the chain stands.
  void dispatch_param_ag(std::int64_t ch) {
    if (chunk_ag_dispatched[static_cast<std::size_t>(ch)]) return;
    chunk_ag_dispatched[static_cast<std::size_t>(ch)] = 1;
    for (std::size_t k = bucket_elements.size(); k-- > 0;) {
      if (bucket_chunk[k] != ch) continue;
      Op op = coll_op("dp.bucket" + std::to_string(k) + ".ag", CollOp::AllGather, Y.dp_comm[st],
                      param_ag_bytes(padded(bucket_elements[k], Y.shard_n), bucket_dense[k]), RankBuilder::kDp, "dp");
      early_ag[k] = rb.has_last() ? rb.fork(std::move(op)) : rb.push(std::move(op));
    }
  }
  // Last backward op index per (chunk, layer) for the final micro-batch (DP bucket readiness).
  std::vector<std::vector<std::uint32_t>> final_bwd;
  std::uint32_t final_embed_bwd = 0;
  std::int64_t final_mtp_bwd = -1;  // the last micro-batch's MTP layers' backward (their gradients are ready)

  std::int64_t tag(std::int64_t mb, std::int64_t chunk, int dir) const { return (mb * nchunks() + chunk) * 2 + dir; }
  bool recomputed(std::int64_t l, std::int64_t n_chunk) const {
    if (c.recompute_granularity != "full") return false;
    if (c.recompute_method == "block" && c.recompute_num_layers) return l < std::min(c.recompute_num_layers, n_chunk);
    return true;
  }
  // distribute_saved_activations (GptConfig): whether chunk layer l of nl ends a checkpoint in forward order, whose
  // saved input is split over TP -- uniform: groups of recompute_num_layers (1 when 0) from the chunk's first layer;
  // block: each of the recomputed layers (megatron/core/transformer/transformer_block.py _checkpointed_forward).
  bool ends_split_checkpoint(std::int64_t l, std::int64_t n_chunk) const {
    if (!c.distribute_saved_activations || !recomputed(l, n_chunk)) return false;
    if (c.recompute_method == "block") return true;
    const std::int64_t g = std::max<std::int64_t>(1, c.recompute_num_layers);
    return l == std::min((l / g + 1) * g, n_chunk) - 1;
  }
  // The checkpoint's input (the residual stream: all the rank's tokens, no sequence parallelism) in bytes.
  double checkpoint_input_bytes() const { return x_.tp_bytes * c.residual_bytes() / 2.0; }
  double layer_el(std::int64_t gl) const {
    double el = x_.Pl;
    if (gl == 0) el += x_.emb_el;
    if (gl == c.num_layers - 1 && last_stage_has_output(c)) el += x_.out_el;
    return el;
  }

  // Bytes of the distributed optimizer's parameter all-gather of `el` elements, `dense` of them the embedding /
  // output layer: 2 per bf16 element; with fp8_param_gather the decoder layers' weights are FP8 tensors and
  // gathered as their 1-byte data (+ the block scales of mxfp8 / blockwise, fp8_gather_bytes_per_element;
  // Megatron's param buffer holds FP8 parameters as uint8: megatron/core/distributed/param_and_grad_buffer.py
  // @d98e8a64), the embedding and output layer stay bf16 (Transformer Engine quantises only its linears; the
  // layer norms' 2h weights per layer are counted as FP8: < 0.01 % of the layer). fp4_param_gather gathers the
  // NVFP4 weights' 4-bit data alone, 0.5 bytes: every rank sets the whole tensors' 16 x 16 block scales itself from
  // the all-reduced block amaxes (_cast_master_weights_to_nvfp4_2d, transformer_engine/pytorch/tensor/utils.py at
  // NVIDIA/TransformerEngine@d0067d0da). `dense` also counts the bf16 layers of first_last_layers_bf16, whose
  // weights stay bf16 (get_fp8_context / get_fp4_context with is_init, no quantised init for them).
  double param_ag_bytes(double el, double dense) const {
    if (!c.fp8_param_gather && !c.fp4_param_gather) return 2.0 * el;
    const double q = c.fp4_param_gather ? 0.5 : fp8_gather_bytes_per_element(c.fp8_recipe);
    return 2.0 * dense + q * (el - dense);
  }
  // A bucket of `el` elements as the distributed optimizer lays it out for a group of `group` ranks with
  // ddp_pad_buckets_for_high_nccl_busbw: its end padded to a multiple of lcm(group, 128, 2^16) elements
  // (pad_bucket_end / bucket_end_divisor, megatron/core/optimizer/param_layout.py:29-42, called from
  // distrib_optimizer.py:544-548 at NVIDIA/Megatron-LM@d98e8a64); the padding is reduced and gathered with the
  // bucket. Without the flag Megatron pads to lcm(group, 128) only, not modelled (under 128 x group elements).
  double padded(double el, std::int64_t group) const {
    if (!c.ddp_pad_buckets_for_high_nccl_busbw || !c.use_distributed_optimizer || !c.megatron_ddp()) return el;
    const double div = double(std::lcm(std::lcm(group, std::int64_t(128)), std::int64_t(65536)));
    return std::ceil(el / div) * div;
  }
  // Elements of global layer gl the parameter all-gather moves in bf16 with fp8 / fp4_param_gather.
  double bf16_layer_el(std::int64_t gl) const { return c.bf16_layer(gl) ? x_.Pl : 0.0; }

  // Megatron-Core's DDP gradient buckets (GptConfig::megatron_ddp): one DistributedDataParallel per model chunk
  // (megatron/training/training.py get_model, 2497-2540 at NVIDIA/Megatron-LM@d98e8a64), whose gradients form
  // buckets of ddp_bucket_size elements only on pipeline stage 0's first chunk with overlap_grad_reduce and
  // without overlap_param_gather_with_optimizer_step; every other chunk, every chunk of a later stage and every
  // chunk without overlap_grad_reduce is one bucket (distributed_data_parallel.py:133-171: bucket_size None).
  // Other data-parallel paths (Megatron FSDP's optim / optim_grads strategies) cut bucket_size (40M by default)
  // across the stage's chunks.
  bool chunk_bucketed(std::int64_t ch) const {
    if (!c.megatron_ddp()) return true;
    return st == 0 && ch == 0 && c.overlap_grad_reduce && !c.overlap_param_gather_with_optimizer_step;
  }
  // The bucket size in elements (resolve_ddp_bucket_size, training.py:2179-2194 @d98e8a64): ddp_num_buckets
  // splits the rank's parameters (all its chunks, experts included) into that many; else ddp_bucket_size; else
  // max(40M, 1M x the data-parallel x context-parallel size).
  double bucket_limit() const {
    if (!c.megatron_ddp()) return c.bucket_size > 0 ? double(c.bucket_size) : 40e6;
    if (c.ddp_num_buckets > 0) return std::floor(rank_parameters() / double(c.ddp_num_buckets));
    if (c.bucket_size > 0) return double(c.bucket_size);
    return std::max(40e6, 1e6 * double(Y.dp * cp));
  }
  double rank_parameters() const {
    double n = 0;
    for (std::int64_t ch = 0; ch < nchunks(); ++ch)
      for (std::int64_t l = 0; l < place(ch).nl; ++l) {
        const std::int64_t gl = place(ch).base + l;
        n += x_.Pl;
        if (moe_on && K.moe_pattern[static_cast<std::size_t>(gl)]) n += expert_params_per_gpu(c);
      }
    if (has_first) n += x_.emb_el;
    if (has_last && last_stage_has_output(c)) n += x_.out_el;
    return n;
  }

  void plan_buckets() {
    bucket_of.resize(nchunks());
    for (std::int64_t ch = 0; ch < nchunks(); ++ch) bucket_of[ch].assign(place(ch).nl, 0);
    // (chunk, layer) in backward order, as the gradient buckets below; each chunk's own buckets
    // (chunk_bucketed), the embedding in its chunk's last, the output layer in its chunk's first.
    const double limit = bucket_limit();
    const bool per_chunk = c.megatron_ddp();
    double acc = 0, acc_bf16 = 0;
    std::int64_t cur = 0;  // the chunk of the filling bucket's first-gathered layers (the lowest, with !per_chunk)
    auto flush = [&] {
      bucket_elements.push_back(acc), bucket_dense.push_back(acc_bf16), bucket_chunk.push_back(cur);
      acc = 0, acc_bf16 = 0;
    };
    for (std::int64_t ch = nchunks() - 1; ch >= 0; --ch) {
      const bool cut = chunk_bucketed(ch);
      cur = ch;
      const std::size_t first_bucket = bucket_elements.size();
      for (std::int64_t l = place(ch).nl - 1; l >= 0; --l) {
        acc += x_.Pl, acc_bf16 += bf16_layer_el(place(ch).base + l);
        bucket_of[ch][l] = static_cast<std::int64_t>(bucket_elements.size());
        if (cut && acc >= limit) flush();
      }
      if (!per_chunk) continue;
      const bool emb = place(ch).first, out = place(ch).last && last_stage_has_output(c);
      if (acc > 0 || (bucket_elements.size() == first_bucket && (emb || out))) flush();
      if (emb) bucket_elements.back() += x_.emb_el, bucket_dense.back() += x_.emb_el;
      if (out) bucket_elements[first_bucket] += x_.out_el, bucket_dense[first_bucket] += x_.out_el;
    }
    if (!per_chunk) {
      if (acc > 0 || bucket_elements.empty()) flush();
      if (has_first) bucket_elements.back() += x_.emb_el, bucket_dense.back() += x_.emb_el;
      if (has_last && last_stage_has_output(c)) bucket_elements.front() += x_.out_el, bucket_dense.front() += x_.out_el;
    }
    if (bucket_elements.empty()) flush();
    // Megatron's overlap_param_gather: each bucket's parameter all-gather (the previous step's optimizer
    // update) runs under the forward, first layers first, and the bucket's layers wait for it in the first
    // micro-batch. Each chunk's are dispatched by dispatch_param_ag: here, at the schedule's forwards (slot_steps)
    // or at the optimizer step (finish_step).
    early_ag.assign(bucket_elements.size(), kNoOp);
    chunk_ag_dispatched.assign(static_cast<std::size_t>(nchunks()), 0);
    if (c.overlap_param_gather && dist_opt_sharded) {
      if (!per_chunk) {
        for (std::int64_t ch = 0; ch < nchunks(); ++ch) dispatch_param_ag(ch);
      } else if (aligned_param_gather()) {
        // Chunks 0 and 1 at the schedule's start (chunk 0's, with overlap_param_gather_with_optimizer_step,
        // after its optimizer step instead: finish_step).
        for (std::int64_t ch = c.overlap_param_gather_with_optimizer_step ? 1 : 0; ch < std::min<std::int64_t>(2, nchunks()); ++ch)
          dispatch_param_ag(ch);
        fwd_table_ = interleaved_table(x_.m, v, c.microbatch_group());
      }
    }
    final_bwd.resize(nchunks());
    for (std::int64_t ch = 0; ch < nchunks(); ++ch) final_bwd[ch].assign(place(ch).nl, 0);
  }

  // The attention block's compute under PyTorch's context parallelism (workloads/gpt_kernels.cpp prices the
  // ring steps; torch/distributed/tensor/experimental/_attention.py): the rest of the block, then the ring.
  // Eager (torch_compile false): allgather: K/V all-gathered once (per forward, per backward), waited for
  // after the local step 0; alltoall: K/V passed to the next rank each step, beside that step's compute (the
  // ring of cp - 1 sends moves what an all-gather moves). The backward passes the fp32 dK/dV accumulators
  // around the ring by all-to-all permutes whatever the method (dkv_rotater): cp sends, each beside the next
  // step, the last one waited for after the final step.
  // A permute (_functional_collectives.py permute_tensor) sends the whole tensor to the next rank (permute_op).
  // Compiled (torch_compile true): torchtitan compiles each TransformerBlock with fullgraph=True
  // (parallelisms/parallelize_llama.py apply_compile, pytorch/torchtitan@9dec370), so the ring is traced into
  // the block's graph, and a functional collective traced by torch.compile is waited for where it is issued
  // (torch/distributed/_functional_collectives.py, _maybe_wrap_tensor waits at once while tracing instead of
  // returning an async tensor; _attention.py's _maybe_wait notes the same); Inductor moves a wait only under
  // reorder_for_compute_comm_overlap, off by default. So every exchange runs exposed, in program order: the K/V all-gather (or each K/V permute)
  // before the step that issues it, each dK/dV permute after the step that produced it.
  // A selective recompute's attention forward inside the backward block (recompute_attn_extra) is priced with
  // its ring steps but without its own K/V exchange.
  void torch_cp_attention(const std::string& nm, const std::string& cname, const Costs& cost, bool bwd,
                          const std::vector<std::uint32_t>& extra) {
    const Costs first = bwd ? K.layer.cp_bwd_first : K.layer.cp_fwd_first, rest = bwd ? K.layer.cp_bwd_rest : K.layer.cp_fwd_rest;
    Costs ring = first;
    ring += rest;
    rb.chain(compute_op(cname, minus(cost, ring)), extra);
    const std::int32_t cc = Y.cp_comm[st];
    const std::string pre = nm + (bwd ? ".bwd" : "");
    const bool gather = c.context_parallel_rotate_method == "allgather";
    if (c.torch_compile == "compiled") {
      const double steps = double(cp - 1);
      Costs step = rest;
      step.seconds /= steps, step.flops /= steps, step.sq_seconds /= steps;
      auto kv_permute = [&](std::int64_t i) {
        rb.chain(permute_op(pre + ".cp.kv" + std::to_string(i), cc, cp, x_.torch_cp_kv / double(cp), RankBuilder::kCp, "cp"));
      };
      auto dkv_permute = [&](std::int64_t i) {
        if (bwd)
          rb.chain(permute_op(pre + ".cp.dkv" + std::to_string(i), cc, cp, x_.torch_cp_dkv, RankBuilder::kCp, "cp"));
      };
      if (gather) rb.chain(coll_op(pre + ".cp.kv", CollOp::AllGather, cc, x_.torch_cp_kv, RankBuilder::kCp, "cp"));
      else kv_permute(0);
      rb.chain(compute_op(cname + ".cp0", first));
      dkv_permute(0);
      for (std::int64_t i = 1; i < cp; ++i) {
        if (!gather && i < cp - 1) kv_permute(i);
        rb.chain(compute_op(cname + ".cp" + std::to_string(i), step));
        dkv_permute(i);
      }
      return;
    }
    std::vector<std::uint32_t> kv{rb.fork(coll_op(pre + ".cp.kv", CollOp::AllGather, cc, x_.torch_cp_kv, RankBuilder::kCp, "cp"))};
    rb.chain(compute_op(cname + ".cp0", first));
    if (gather) rb.chain(wait_op(pre + ".cp.kv.wait"), kv);
    std::vector<std::uint32_t> dkv;
    if (bwd)
      dkv.push_back(rb.fork(coll_op(pre + ".cp.dkv", CollOp::AllGather, cc, double(cp) * x_.torch_cp_dkv,
                                    RankBuilder::kCp, "cp")));
    rb.chain(compute_op(cname + ".cp", rest));
    if (!gather) rb.chain(wait_op(pre + ".cp.kv.wait"), kv);
    if (bwd) {
      rb.chain(wait_op(pre + ".cp.dkv.wait"), dkv);
      rb.chain(permute_op(pre + ".cp.dkv.last", cc, cp, x_.torch_cp_dkv, RankBuilder::kCp, "cp"));
    }
  }

  // PyTorch's async TP (tp_comm_overlap_impl symmetric_memory) as torch/distributed/_symmetric_memory/
  // __init__.py runs it (pytorch/pytorch@006b161f; the kernels and which GEMMs: gpt_kernels.cpp
  // layer_costs_fused). The fused ops alternate two CUDA streams; the GEMMs of both run on the compute stream
  // here (they share the SMs), the pulls from peer memory (copy_ from a peer's p2p buffer: the copy engines,
  // no SMs, sm_ctas 0; "cp from different streams cannot overlap") one after another on comm.tp.p2p, each a
  // permute of one shard over the TP group (permute_op).
  // fused_all_gather_matmul (_pipelined_multi_all_gather_and_consume): barrier, the local shard copied into
  // the p2p buffer, barrier -- exposed: the source gives up overlapping them with the first GEMM -- the GEMMs
  // on the local shard, then for each peer the pull of its shard and the GEMMs on it; a pull is issued on the
  // stream of the GEMMs two steps back and waits for them; the local shard copied into the gathered output
  // (return_A) beside the last GEMMs; barrier.
  void symm_all_gather_matmul(const std::string& nm, const std::string& cname, const TpFusedGemms& z,
                              const std::vector<std::uint32_t>& extra) {
    const double shard = x_.tp_ag_bytes / double(t);
    rb.chain(compute_op(nm + ".ag.barrier", z.barrier), extra);
    rb.chain(compute_op(nm + ".ag.shard_copy", z.shard_copy));
    const std::uint32_t ready = rb.chain(compute_op(nm + ".ag.barrier", z.barrier));
    std::vector<std::uint32_t> mm{rb.chain(compute_op(cname + ".ag_mm0", z.ag_shard))};
    for (std::int64_t i = 1; i < t; ++i) {
      Op pull = permute_op(nm + ".ag.pull" + std::to_string(i), Y.tp_comm[st], t, shard, kP2p, "tp");
      pull.sm_ctas = 0;
      pull.deps.push_back(i == 1 ? ready : mm[i - 2]);
      const std::uint32_t got = rb.push(std::move(pull));
      mm.push_back(rb.chain(compute_op(cname + ".ag_mm" + std::to_string(i), z.ag_shard), {got}));
    }
    Op out = compute_op(nm + ".ag.out_copy", z.shard_copy);
    out.stream = kP2p;
    out.deps.push_back(ready);
    const std::uint32_t copied = rb.push(std::move(out));
    rb.chain(compute_op(nm + ".ag.barrier", z.barrier), {copied});
  }

  // fused_matmul_reduce_scatter (_pipelined_produce_and_all2all): barrier; for each peer the GEMM of the
  // chunk that peer reduces, written into a p2p buffer, then a barrier, the pull of this rank's chunk from
  // another peer and a barrier (comm.tp.p2p); a GEMM waits for the barrier two steps back before it
  // overwrites that buffer (two buffers, alternating streams); the GEMM of the local chunk; barrier; the sum
  // of the t partial chunks (reduce_partials).
  void symm_matmul_reduce_scatter(const std::string& nm, const std::string& cname, const TpFusedGemms& z) {
    const double chunk = x_.tp_bytes / double(t);
    rb.chain(compute_op(nm + ".rs.barrier", z.barrier));
    std::vector<std::uint32_t> freed;  // per step (from 1), the barrier after its pull
    for (std::int64_t i = 1; i < t; ++i) {
      std::vector<std::uint32_t> buf;
      if (i > 2) buf.push_back(freed[i - 3]);
      const std::uint32_t mm = rb.chain(compute_op(cname + ".rs_mm" + std::to_string(i), z.rs_shard), buf);
      Op written = compute_op(nm + ".rs.barrier", z.barrier);
      written.stream = kP2p;
      written.deps.push_back(mm);
      rb.push(std::move(written));
      Op pull = permute_op(nm + ".rs.pull" + std::to_string(i), Y.tp_comm[st], t, chunk, kP2p, "tp");
      pull.sm_ctas = 0;
      rb.push(std::move(pull));
      Op read = compute_op(nm + ".rs.barrier", z.barrier);
      read.stream = kP2p;
      freed.push_back(rb.push(std::move(read)));
    }
    rb.chain(compute_op(cname + ".rs_mm0", z.rs_shard));
    rb.chain(compute_op(nm + ".rs.barrier", z.barrier), {freed.back()});
    rb.chain(compute_op(nm + ".rs.reduce", z.reduce));
  }

  // One TP block: [SP all-gather] compute [SP reduce-scatter | all-reduce], with the CP exchange of an
  // attention block. tp_comm_overlap runs the SP collectives beside the compute (which pays the SM
  // cost); p2p context parallelism runs the ring exchange beside the attention compute.
  // Backward of a Megatron / Transformer Engine block (bwd with `din` and `win`, the input projections' dgrad
  // and wgrad GEMMs inside `cost`): the column-parallel input linear's backward
  // (megatron/core/tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward at
  // NVIDIA/Megatron-LM@d98e8a64dd; transformer_engine/pytorch/module/layernorm_linear.py _LayerNormLinear
  // .backward at NVIDIA/TransformerEngine@0004dbd0, "Overlap input AG with dgrad", "Overlap dgrad-RS/AR with
  // wgrad") re-gathers its sequence-parallel input beside the dgrad GEMM and reduces the input gradient
  // (reduce-scatter with SP, else all-reduce when async_tensor_model_parallel_allreduce) beside the wgrad
  // GEMM, on the TP stream. PyTorch's DTensor TP (torchtitan: torch_compile set) reduces after the matmul's
  // backward node (both gradients) and waits at the next use: not split.
  // `gl`: the block's global decoder layer. `tp_skip` (kNoGather, kNoReduce) drops the block's leading TP
  // all-gather or its trailing reduce: the parallel block (GptConfig::parallel_block) gathers the shared norm
  // output once for attention and MLP and reduces their summed output once (MegaScale arXiv:2402.15627 Sec. 3.1),
  // so per layer and direction one all-gather and one reduce-scatter (all-reduce without SP) instead of two each.
  static constexpr int kNoGather = 1, kNoReduce = 2;
  void block(std::int64_t gl, const std::string& nm, const std::string& cname, const Costs& cost, bool attn, bool bwd,
             const std::vector<std::uint32_t>& extra = {}, const Costs* din = nullptr, const Costs* win = nullptr,
             int tp_skip = 0) {
    // A hybrid model's sublayer runs one of the two blocks (GptStepKernels::has_block): the other has no ops.
    if (!K.has_block(gl, attn)) {
      if (!extra.empty()) rb.chain(wait_op(nm + (bwd ? ".bwd" : "") + ".deps"), extra);
      return;
    }
    const auto& tp_comm = Y.tp_comm;
    const double tp_bytes = x_.tp_bytes, kv_bytes = x_.kv_bytes;
    const double ag_bytes = c.bf16_layer(gl) ? x_.tp_ag_bytes_bf16 : x_.tp_ag_bytes;
    std::vector<std::uint32_t> par;
    const bool ovl = c.tp_comm_overlap && t > 1 && !symm;  // userbuffers
    // PyTorch's async TP: what Inductor fused with this block's collectives (the rest stays NCCL's).
    const TpFusedGemms& fz = K.layer.tp_fused[attn ? 1 : 0][bwd ? 1 : 0];
    const bool ag_fused = symm && fz.ag(), rs_fused = symm && fz.rs();
    const bool has_pre = rb.has_last();
    const std::uint32_t pre = rb.last();
    // Context parallelism of an attention block: PyTorch's (context_parallel_rotate_method) or Megatron's
    // (cp_comm_type).
    const bool torch_cp = attn && cp > 1 && !c.context_parallel_rotate_method.empty();
    // A Mamba-2 block's own all-to-alls (MambaContextParallel) replace the attention's CP exchange, as a Gated
    // DeltaNet block's (a2a_cp_to_hp / a2a_hp_to_cp) do.
    const bool gdn_cp = attn && cp > 1 && !K.gdn_layers.empty() && K.gdn_layers[static_cast<std::size_t>(gl)];
    const bool mamba_cp = gdn_cp || (attn && cp > 1 && !K.hybrid_layers.empty() && K.hybrid_layers[static_cast<std::size_t>(gl)] == 'M');
    const bool mcore_cp = attn && cp > 1 && !torch_cp && !mamba_cp;
    // Megatron's tp_comm_overlap_ag / tp_comm_overlap_rs (TE's ub_overlap_ag / ub_overlap_rs): off, the
    // ring-exchange all-gather (qkv / fc1 fprop; the output gradient's before proj / fc2 dgrad) or the pipelined
    // reduce-scatter (proj / fc2 fprop) is NCCL's, before / after the GEMM (layernorm_linear.py, linear.py at
    // NVIDIA/TransformerEngine@d0067d0da: gather_along_first_dim / reduce_scatter_along_first_dim, not async).
    const bool ag_ovl = ovl && c.tp_comm_overlap_ag, rs_ovl = ovl && c.tp_comm_overlap_rs;
    if (t > 1 && c.sequence_parallel && !ag_fused && !(tp_skip & kNoGather)) {
      Op ag = coll_op(nm + (bwd ? ".bwd.ag" : ".ag"), CollOp::AllGather, tp_comm[st], ag_bytes, RankBuilder::kTp, "tp");
      if (ag_ovl) par.push_back(rb.fork(userbuffers(std::move(ag))));
      else rb.chain(std::move(ag));
    }
    // a2a+p2p (GptConfig::cp_impl): the a2a form's all-to-alls over the inner group around the p2p form's ring
    // over the outer group, whose K/V are the whole sequence's for heads / inner-size heads.
    const std::string cpt = K.cp_types.empty() ? c.cp_impl() : K.cp_types[static_cast<std::size_t>(gl)];
    const bool hier = cpt == "a2a+p2p";
    if (mcore_cp) {
      const std::int32_t cc = Y.cp_comm[st];
      if (hier)
        rb.chain(coll_op(nm + (bwd ? ".bwd" : "") + ".cp.a2a", CollOp::AllToAll, Y.cp_a2a_comm[st], bwd ? x_.o_local : x_.qkv_local, RankBuilder::kCp, "cp"));
      if (cpt == "p2p" || hier) {
        const std::int32_t rc = hier ? Y.cp_ring_comm[st] : cc;
        const double rkv = kv_bytes / double(c.cp_a2a_size());
        par.push_back(rb.fork(coll_op(nm + (bwd ? ".bwd" : "") + ".cp.kv", CollOp::AllGather, rc, rkv, RankBuilder::kCp, "cp")));
        if (bwd)
          par.push_back(rb.fork(coll_op(nm + ".bwd.cp.dkv", CollOp::ReduceScatter, rc, rkv, RankBuilder::kCp, "cp")));
      } else if (cpt == "all_gather") {
        rb.chain(coll_op(nm + (bwd ? ".bwd" : "") + ".cp.kv", CollOp::AllGather, cc, kv_bytes, RankBuilder::kCp, "cp"));
      } else {
        rb.chain(coll_op(nm + (bwd ? ".bwd" : "") + ".cp.a2a", CollOp::AllToAll, cc, bwd ? x_.o_local : x_.qkv_local, RankBuilder::kCp, "cp"));
      }
    }
    const bool split = bwd && t > 1 && din && win && !torch_cp && c.torch_compile.empty() &&
                       (c.sequence_parallel || c.async_tensor_model_parallel_allreduce);
    // The SM share the userbuffers kernels take from the GEMMs beside them (GptConfig::ub_sm_factor): forward, the row-parallel GEMM beside its reduce-scatter; backward,
    // the input projection's dgrad and wgrad (a backward not split prices both at the dgrad's).
    const std::string in_gemm = attn ? "qkv" : "fc1";
    auto sm_of = [&](const std::string& gemm, bool on) { return on ? c.ub_sm_factor(gemm) : 1.0; };
    const double sm = bwd ? sm_of(in_gemm + "_dgrad", ovl) : sm_of(attn ? "proj_fprop" : "fc2_fprop", rs_ovl);
    // A TP collective of the split backward is a userbuffers one under tp_comm_overlap, else NCCL's.
    auto ub = [ovl](Op o) { return ovl ? userbuffers(std::move(o)) : o; };
    Costs cc = cost;
    if (split) cc = minus(minus(cc, *din), *win);
    cc = tp_overlap_stretched(cc, sm);
    std::vector<std::uint32_t> first_deps = extra;  // of the block's first compute op
    if (ag_fused) {
      cc = minus(cc, fz.ag_full);
      symm_all_gather_matmul(nm + (bwd ? ".bwd" : ""), cname, fz, first_deps);
      first_deps.clear();
    }
    if (rs_fused) cc = minus(cc, fz.rs_full);
    if (torch_cp) torch_cp_attention(nm, cname, cc, bwd, first_deps);
    else if (mamba_cp) mamba_cp_block(gl, nm, cname, cc, bwd, din != nullptr, sm, first_deps, gdn_cp);
    else rb.chain(compute_op(cname, cc), first_deps);
    if (mcore_cp && cpt == "all_gather" && bwd)
      rb.chain(coll_op(nm + ".bwd.cp.dkv", CollOp::ReduceScatter, Y.cp_comm[st], kv_bytes, RankBuilder::kCp, "cp"));
    if (mcore_cp && (cpt == "a2a" || hier)) {
      // The ring's last exchange ends before the output's all-to-all leaves (TE waits for it).
      if (hier && !par.empty()) {
        rb.chain(wait_op(nm + (bwd ? ".bwd" : "") + ".cp.ring.join"), par);
        par.clear();
      }
      rb.chain(coll_op(nm + (bwd ? ".bwd" : "") + ".cp.a2a2", CollOp::AllToAll, hier ? Y.cp_a2a_comm[st] : Y.cp_comm[st],
                       bwd ? x_.qkv_local : x_.o_local, RankBuilder::kCp, "cp"));
    }
    if (split) {
      const Costs d = tp_overlap_stretched(*din, sm_of(in_gemm + "_dgrad", ovl)),
                  w = tp_overlap_stretched(*win, sm_of(in_gemm + "_wgrad", ovl));
      // tp_comm_bulk_dgrad false (or tp_comm_overlap_rs_dgrad): the input re-gather beside the dgrad is NCCL's
      // (gather_along_first_dim, async_op=True), its CTAs on the SMs.
      auto regather_ub = [&](Op o) { return ovl && c.tp_comm_bulk_dgrad ? userbuffers(std::move(o)) : o; };
      Op red = c.sequence_parallel
                   ? coll_op(nm + ".bwd.rs", CollOp::ReduceScatter, tp_comm[st], tp_bytes, RankBuilder::kTp, "tp")
                   : coll_op(nm + ".bwd.ar", CollOp::AllReduce, tp_comm[st], tp_bytes, RankBuilder::kTp, "tp");
      // tp_comm_overlap_rs_dgrad: the input gradient's reduce-scatter pipelined with the dgrad GEMM's chunks
      // (ub_type_dgrad RS, layernorm_linear.py backward), starting with it; the wgrad GEMM then runs alone.
      const bool rs_dgrad = ovl && c.tp_comm_overlap_rs_dgrad && c.sequence_parallel;
      std::uint32_t regather = 0;
      if (c.sequence_parallel)
        regather = rb.fork(regather_ub(coll_op(nm + ".bwd.ag.input", CollOp::AllGather, tp_comm[st], ag_bytes, RankBuilder::kTp, "tp")));
      if (rs_dgrad) {
        if (rb.has_last()) red.deps.push_back(rb.last());
        par.push_back(rb.push(userbuffers(std::move(red))));
      }
      rb.chain(compute_op(cname + ".dgrad_in", d));
      if (c.sequence_parallel) rb.chain(wait_op(nm + ".bwd.ag.input.wait"), {regather});
      if (!rs_dgrad) par.push_back(rb.fork(ub(std::move(red))));
      rb.chain(compute_op(cname + ".wgrad_in", w));
    } else if (rs_fused) {
      symm_matmul_reduce_scatter(nm + (bwd ? ".bwd" : ""), cname, fz);
    } else if (t > 1 && !(tp_skip & kNoReduce)) {
      Op red = c.sequence_parallel
                   ? coll_op(nm + (bwd ? ".bwd.rs" : ".rs"), CollOp::ReduceScatter, tp_comm[st], tp_bytes, RankBuilder::kTp, "tp")
                   : coll_op(nm + (bwd ? ".bwd.ar" : ".ar"), CollOp::AllReduce, tp_comm[st], tp_bytes, RankBuilder::kTp, "tp");
      // tp_comm_bulk_wgrad false: the backward reduce-scatter of the input gradient waits for the GEMMs
      // (torchtitan's async TP: torch/_inductor/fx_passes/micro_pipeline_tp.py fuses a reduce-scatter only
      // with the one matmul producing its input, and a Llama block's input gradient is the sum of the
      // wq/wk/wv (w1/w3) dgrads).
      if (bwd ? ovl && c.tp_comm_bulk_wgrad : rs_ovl) {
        // Starts with the compute (the reduce-scatter of each GEMM chunk follows it).
        if (has_pre) red.deps.push_back(pre);
        par.push_back(rb.push(userbuffers(std::move(red))));
      } else {
        rb.chain(std::move(red));
      }
    }
    if (!par.empty()) rb.chain(wait_op(nm + (bwd ? ".bwd" : "") + ".join"), par);
  }

  // A Mamba-2 block under context parallelism (MambaMixer.forward, megatron/core/ssm/mamba_mixer.py:510-528, and
  // MambaContextParallel, mamba_context_parallel.py:140-211 @d98e8a64): in_proj on this rank's s / cp tokens, five
  // all-to-alls on the CP group (z, x, B, C, dt: sequence-sharded to head-sharded, one NCCL call each), the conv1d
  // and SSD scan over the whole sequence with heads / cp heads, y's all-to-all back, the norm and out_proj. The
  // backward runs the gradients' exchanges in reverse: dy's before the scan's backward, then dt, C, B, x, z (the
  // autograd order of the forward's cat). `cost` is the whole block (stretched); `whole_w`: it holds out_proj's
  // weight-gradient GEMM.
  // `gdn`: a Gated DeltaNet block instead, two exchanges (in_proj's output "qkvzba" in, the gated norm's "o" back).
  void mamba_cp_block(std::int64_t gl, const std::string& nm, const std::string& cname, const Costs& cost, bool bwd,
                      bool whole_w, double sm, const std::vector<std::uint32_t>& deps, bool gdn = false) {
    const LayerCosts& L = K.layer_at(gl);
    Costs pre = bwd ? L.mamba_bwd_pre : L.mamba_fwd_pre;
    if (bwd && !whole_w) pre = minus(pre, L.mamba_bwd_pre_w);
    pre = tp_overlap_stretched(pre, sm);
    const Costs scan = tp_overlap_stretched(bwd ? L.mamba_bwd_scan : L.mamba_fwd_scan, sm);
    const std::string ph = bwd ? ".bwd" : "";
    auto exchange = [&](int i) {
      rb.chain(coll_op(nm + ph + ".cp.a2a." + (bwd ? "d" : "") + kMambaCpTensors[i], CollOp::AllToAll, Y.cp_comm[st],
                       x_.mamba_a2a[static_cast<std::size_t>(i)], RankBuilder::kCp, "cp"));
    };
    rb.chain(compute_op(cname + (bwd ? ".out" : ".in"), pre), deps);
    if (gdn) {
      auto gdn_exchange = [&](int i) {
        rb.chain(coll_op(nm + ph + ".cp.a2a." + (bwd ? "d" : "") + (i == 0 ? "qkvzba" : "o"), CollOp::AllToAll,
                         Y.cp_comm[st], x_.gdn_a2a[static_cast<std::size_t>(i)], RankBuilder::kCp, "cp"));
      };
      gdn_exchange(bwd ? 1 : 0);
      rb.chain(compute_op(cname + ".scan", scan));
      gdn_exchange(bwd ? 0 : 1);
      rb.chain(compute_op(cname, minus(minus(cost, pre), scan)));
      return;
    }
    if (bwd) exchange(5);
    else
      for (int i = 0; i < 5; ++i) exchange(i);
    rb.chain(compute_op(cname + ".scan", scan));
    if (bwd)
      for (int i = 4; i >= 0; --i) exchange(i);
    else exchange(5);
    rb.chain(compute_op(cname, minus(minus(cost, pre), scan)));
  }

  // FSDP: per-layer parameter all-gathers (prefetched one layer ahead) and gradient reduce-scatters on
  // the FSDP stream, over the shard group. Megatron FSDP (ZeRO-3) shards an MoE layer's expert weights over
  // the expert data-parallel group (EDP), so the layer's local experts are gathered over EDP after its
  // dense part (the returned op is the last gather) and their gradients reduce-scattered over EDP.
  // torch FSDP2 does the same where the experts are a unit of their own (fsdp_expert_units, torchtitan with EP):
  // their gather follows the block's on the all-gather stream (both prefetched by the previous block), with
  // FSDP2's copies of the expert unit (expert_fsdp_copies).
  bool fsdp_experts(std::int64_t gl) const {
    return c.fsdp() && (!c.use_torch_fsdp2 || c.fsdp_expert_units) && moe_on && K.moe_pattern[gl] && Y.edp > 1 &&
           Y.edp_comm[st] >= 0;
  }
  // torch FSDP2's copies of an MoE layer's expert unit: its local experts' parameters sharded over EDP.
  const FsdpCopyCosts& expert_fsdp_copies() {
    if (!expert_fsdp_copies_)
      expert_fsdp_copies_ = fsdp_copy_costs(c, x_.cm, expert_params_per_gpu(c), double(Y.edp), x_.grad_elem_bytes);
    return *expert_fsdp_copies_;
  }
  std::optional<FsdpCopyCosts> expert_fsdp_copies_;
  // torch FSDP2's copies of a layer's unit (fsdp_copy_costs), cached for the three unit sizes (layer_el).
  const FsdpCopyCosts& fsdp_copies(std::int64_t gl) {
    const int k = gl == 0 ? 1 : gl == c.num_layers - 1 ? 2 : 0;
    if (!fsdp_copies_[k]) fsdp_copies_[k] = fsdp_copy_costs(c, x_.cm, layer_el(gl), double(Y.shard_n), x_.grad_elem_bytes);
    return *fsdp_copies_[k];
  }
  std::optional<FsdpCopyCosts> fsdp_copies_[3];
  // torch FSDP2 with replicas (HSDP: num_distributed_optimizer_instances > 1) all-reduces each unit's reduced
  // gradient shard across the replicas in its post-backward, after the unit's reduce-scatter, on its own stream
  // (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py foreach_reduce, torch 2.6 = the Dec 2024 main the
  // rows ran: all_reduce_stream.wait_stream(reduce_scatter_stream), dist.all_reduce in all_reduce_stream, the
  // post-reduce cast there too). OLMo-core (allenai/OLMo-core@7e58d1289b src/olmo_core/train/train_module/
  // transformer.py _train_microbatch_context) and torchtitan's gradient accumulation call
  // set_requires_all_reduce(is_last_mb): the micro-batches before the last only reduce-scatter and add the
  // result to the unit's partial output on the reduce-scatter stream (`partial_reduce_output += reduce_output`;
  // the last adds it to its own output before the all-reduce). FSDP1 (fsdp_flat_params) keeps one replica
  // all-reduce at the step's end.
  bool hsdp_per_unit() const { return c.fsdp2_copies() && Y.R > 1; }
  // Megatron-FSDP with replicas (HSDP: num_distributed_optimizer_instances > 1, outer_dp_sharding_strategy no_shard,
  // its default) reduces each bucket group over the shard group on the reduce-scatter stream and then, on the last
  // micro-batch, all-reduces it over the replica group on a stream of its own that waits for the reduce-scatter
  // stream (_bucket_group_gradient_reduce, megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py
  // :4130-4235 at NVIDIA/Megatron-LM@d98e8a64; outer_fsdp_group_grad_reduce only with is_last_microbatch,
  // megatron_fsdp.py:782-785). That all-reduce has no scale: "Skip gradient scaling for DP-Outer, because the
  // (DP-Shard, DP-Outer) scaling is already applied" (:4141-4147) -- the 1 / DP before the shard reduction is over
  // the whole DP x CP group. It moves the bucket as the shard reduction left it: the gradient shard with
  // optim_grads / optim_grads_params, the whole bucket with optim and no_shard (fsdp_grad_buffer.data, the gradient
  // buffer not being distributed there; :4153-4159, "For `optim`, we don't need to reduce the local un-sharded
  // gradient").
  bool mfsdp_outer_ar() const { return c.megatron_fsdp() && Y.R > 1; }
  double mfsdp_outer_el(double bucket_el) const {
    const std::string& s = c.data_parallel_sharding_strategy;
    return s == "optim_grads" || s == "optim_grads_params" ? bucket_el / double(Y.shard_n) : bucket_el;
  }
  // torchao float8 weight costs of a dense layer (torchao_float8_weight_costs; none for MoE / MLA layers).
  const Float8WeightCosts& float8_weights() {
    if (!float8_) {
      double linear_el = 0, layers = 0;
      if (float8_layer(0)) {
        const double h = x_.h, f = double(c.ffn()), d = double(c.head_dim()), a = double(c.num_attention_heads),
                     g = double(c.query_groups());
        linear_el = (h * (a + 2.0 * g) * d + a * d * h + h * (c.swiglu ? 2.0 * f : f) + f * h) / double(t);
        for (std::int64_t ch = 0; ch < nchunks(); ++ch) layers += double(place(ch).nl);
      }
      // torchtitan's and OLMo-core's blocks: wq, wk, wv, wo, w1, w2 (and w3 with SwiGLU) as separate linears.
      const double linears = c.swiglu ? 7.0 : 6.0;
      float8_ = linear_el > 0 ? torchao_float8_weight_costs(c, x_.cm, linear_el, double(Y.shard_n), linear_el * layers,
                                                            linears * layers)
                              : Float8WeightCosts{};
    }
    return *float8_;
  }
  std::optional<Float8WeightCosts> float8_;
  bool float8_layer(std::int64_t) const { return c.torchao_float8_weights() && !moe_on && !c.moe.multi_latent_attention; }
  std::uint32_t fsdp_ag(const std::string& nm, std::int64_t gl) {
    // torchao's float8 all-gather (torch FSDP2): the layer's weights travel as fp8, 1 byte each.
    Op ag = coll_op(nm, CollOp::AllGather, Y.dp_comm[st], layer_el(gl) * c.fsdp_layer_gather_bytes(), RankBuilder::kFsdp, "dp");
    if (c.fsdp2_copies()) {
      // torch FSDP2: the shard is copied into the flat all-gather input on the copy-in stream first.
      Op in = compute_op(nm.substr(0, nm.size() - 3) + ".copy_in", fsdp_copies(gl).copy_in);  // "...fsdp.copy_in"
      in.stream = kFsdpCopyIn;
      ag.deps.push_back(rb.fork(std::move(in)));
    }
    std::uint32_t id = rb.fork(std::move(ag));
    if (fsdp_experts(gl)) {
      Op e = coll_op(nm + ".experts", CollOp::AllGather, Y.edp_comm[st], expert_params_per_gpu(c) * 2.0,
                     RankBuilder::kFsdp, "dp");
      e.deps.push_back(id);
      if (c.fsdp2_copies()) {
        Op in = compute_op(nm.substr(0, nm.size() - 3) + ".experts.copy_in", expert_fsdp_copies().copy_in);
        in.stream = kFsdpCopyIn;
        e.deps.push_back(rb.fork(std::move(in)));
      }
      id = rb.fork(std::move(e));
    }
    return id;
  }

  // A layer's compute waits for its parameters: the all-gather `ag`, then with torch FSDP2 the copy-out of the
  // gathered buffer into the parameters on the compute stream (fsdp_copy_costs).
  void fsdp_wait(const std::string& nm, std::int64_t gl, std::uint32_t ag, std::vector<std::uint32_t>& extra) {
    if (!c.fsdp2_copies()) {
      extra.push_back(ag);
      return;
    }
    rb.chain(compute_op(nm + ".copy_out", fsdp_copies(gl).copy_out), {ag});
    // the expert unit's copy-out (its gather is `ag`, the last; modelled at the block's start)
    if (fsdp_experts(gl)) rb.chain(compute_op(nm + ".experts.copy_out", expert_fsdp_copies().copy_out));
  }

  // The shared expert (TP-split, with its SP all-gather / reduce-scatter).
  void shared_expert(const std::string& nm, const Costs& cost, const std::string& phase) {
    if (cost.kernels == 0) return;
    if (t > 1) rb.chain(coll_op(nm + phase + ".moe.shared.ag", CollOp::AllGather, Y.tp_comm[st], x_.tp_bytes, RankBuilder::kTp, "tp"));
    rb.chain(compute_op(nm + phase + ".moe.shared", cost));
    if (t > 1) rb.chain(coll_op(nm + phase + ".moe.shared.rs", CollOp::ReduceScatter, Y.tp_comm[st], x_.tp_bytes, RankBuilder::kTp, "tp"));
  }

  // Dispatch (first) or combine of an MoE layer on the EP stream, started with the chain head: an
  // all_to_allv over EP, an all-gather / reduce-scatter over EP x ETP (allgather dispatcher), or nothing.
  // With the flex dispatcher across NVLink domains, the NVLink forwarding inside the destination domain
  // runs beside it on its own stream (gpt_layout.cpp). Returns the ops the layer waits for.
  std::vector<std::uint32_t> exchange(const std::string& what, std::int64_t gl, bool first, bool bwd) {
    const std::int64_t ep = Y.ep, etp = Y.etp;
    if (Y.a2a && ep > 1) {
      // flex + FP8: the forward dispatch moves FP8 activations with 1x128 block scales (DeepSeek-V3
      // arXiv:2412.19437 Sec. 3.3.2: FP8 dispatch, BF16 combine): (1 + 4/128) / 2 of the BF16 bytes.
      // (The bf16 layers of first_last_layers_bf16 dispatch bf16: their experts take bf16 inputs.)
      const double scale = (x_.fp8_dispatch && first && !bwd && !c.bf16_layer(gl)) ? (1.0 + 4.0 / 128.0) / 2.0 : 1.0;
      std::vector<std::uint32_t> ops{
          rb.fork(coll_op(what, CollOp::AllToAllv, first ? Y.disp_comm[st][gl] : Y.comb_comm[st][gl], x_.a2a_bytes * scale, kEp, "ep"))};
      if (Y.flex_forwarding)
        ops.push_back(rb.fork(coll_op(what + ".nvlink", CollOp::AllToAllv, first ? Y.fwd_disp_comm[st][gl] : Y.fwd_comb_comm[st][gl],
                                      x_.a2a_bytes * scale, kEpNvl, "ep")));
      return ops;
    }
    if (!Y.a2a && ep * etp > 1)
      return {rb.fork(coll_op(what, first ? CollOp::AllGather : CollOp::ReduceScatter, Y.epag_comm[st],
                              K.T_local * double(c.moe_width()) * 2.0 * double(ep * etp), kEp, "ep"))};
    return {rb.fork(wait_op(what))};
  }

  // MoE layer as three steps split at its two exchanges. Forward: router + permute, dispatch, [ETP
  // all-gather], experts, [ETP reduce-scatter], combine, unpermute; the shared expert after, or beside the
  // dispatch (forward) / combine (backward) with moe_shared_expert_overlap. Backward: the same in reverse.
  // `before` runs first in the first step (the attention block of a forward); `extra` are dependencies of
  // the first MoE op.
  void moe_steps(const std::string& nm, const std::string& phase, std::int64_t gl, bool bwd, std::vector<Step>& out,
                 Step before, std::shared_ptr<std::vector<std::uint32_t>> extra, WMode wm = WMode::Whole) {
    auto xo = std::make_shared<std::vector<std::uint32_t>>();
    const bool shared_ovl = c.moe.moe_shared_expert_overlap;
    // Split backward: the experts' and the router's weight-gradient GEMMs leave the step (Delay: the experts'
    // run right after the input gradient, while the combine's all-to-all is in flight (Megatron-Core
    // model_chunk_schedule_plan.py TransformerLayerSchedulePlan.run: mlp backward, mlp backward_dw, then
    // moe_dispatch backward on the communication stream); the router's with the attention's at the end of the
    // layer); Deferred: the shared expert's too (all in the weight slot).
    const MoeCosts& M0 = K.moe[K.moe_index[gl]];
    Costs experts_b = M0.experts_b, pre_b = M0.pre_b, shared_b = M0.shared_b;
    if (bwd && wm != WMode::Whole) experts_b = minus(experts_b, M0.experts_w), pre_b = minus(pre_b, M0.pre_w);
    if (bwd && wm == WMode::Deferred) shared_b = minus(shared_b, M0.shared_w);
    out.push_back([this, nm, phase, gl, bwd, xo, before, extra, shared_ovl]() {
      if (before) before();
      const MoeCosts& M = K.moe[K.moe_index[gl]];
      rb.chain(compute_op(nm + phase + (bwd ? ".moe.unpermute" : ".moe.router"), bwd ? M.post_b : M.pre_f),
               extra ? *extra : std::vector<std::uint32_t>{});
      // The load-balancing loss's tokens per expert (int64) summed over the TP x CP group, on the compute stream's
      // order (reduce_from_tensor_model_parallel_region in get_tokens_per_expert_and_token_count, moe_utils.py @d98e8a64).
      if (!bwd && Y.tpcp_comm[st] >= 0)
        rb.chain(coll_op(nm + phase + ".moe.aux.ar", CollOp::AllReduce, Y.tpcp_comm[st], 8.0 * double(c.moe.num_experts),
                         RankBuilder::kTp, "tp"));
      if (!bwd && moe_host_sync) {
        Op w = wait_op(nm + phase + ".moe.host_sync");
        w.duration_s = static_cast<double>(to_ns(kMoeHostSyncS)) * 1e-9;
        rb.chain(std::move(w));
      }
      *xo = exchange(nm + phase + ".moe.dispatch", gl, true, bwd);
      if (shared_ovl && !bwd) shared_expert(nm, M.shared_f, phase);
    });
    out.push_back([this, nm, phase, gl, bwd, xo, shared_ovl, experts_b, shared_b, wm]() {
      const MoeCosts& M = K.moe[K.moe_index[gl]];
      const double rows = K.loads[K.moe_index[gl]].max_rank_tokens / double(Y.etp);  // rows before the ETP gather
      const double etp_bytes = rows * double(c.moe_width()) * 2.0 * double(Y.etp);
      rb.chain(wait_op(nm + phase + ".moe.dispatched"), *xo);
      if (Y.a2a && Y.etp > 1)
        rb.chain(coll_op(nm + phase + ".moe.etp.ag", CollOp::AllGather, Y.etp_comm[st], etp_bytes, kEp, "ep"));
      rb.chain(compute_op(nm + phase + ".moe.experts", bwd ? experts_b : M.experts_f));
      if (Y.a2a && Y.etp > 1)
        rb.chain(coll_op(nm + phase + ".moe.etp.rs", CollOp::ReduceScatter, Y.etp_comm[st], etp_bytes, kEp, "ep"));
      *xo = exchange(nm + phase + ".moe.combine", gl, false, bwd);
      if (bwd && wm == WMode::Delay) rb.chain(compute_op(nm + phase + ".moe.experts.wgrad", M.experts_w));
      if (shared_ovl && bwd) shared_expert(nm, shared_b, phase);
    });
    out.push_back([this, nm, phase, gl, bwd, xo, shared_ovl, pre_b, shared_b]() {
      const MoeCosts& M = K.moe[K.moe_index[gl]];
      rb.chain(wait_op(nm + phase + ".moe.combined"), *xo);
      rb.chain(compute_op(nm + phase + (bwd ? ".moe.router" : ".moe.unpermute"), bwd ? pre_b : M.post_f));
      // recompute_modules shared_experts (MoELayer.shared_experts_compute, moe/moe_layer.py:507-532 @d98e8a64): the
      // shared expert under tensor_parallel.checkpoint / te_checkpoint -- its forward, with its TP all-gather and
      // reduce-scatter, again before its backward (gpt.cpp refuses it with moe_shared_expert_overlap, as
      // Megatron-Core does).
      if (!shared_ovl && bwd && c.recomputes("shared_experts")) shared_expert(nm, M.shared_f, ".recompute");
      if (!shared_ovl) shared_expert(nm, bwd ? shared_b : M.shared_f, phase);
    });
  }

  // Forward (or recompute) of one decoder layer: attention block, then the dense MLP block or the MoE
  // steps. `pre` runs first (FSDP prefetch); `extra` are dependencies of the attention compute.
  void fwd_layer_steps(const std::string& nm, bool recompute, std::int64_t gl, std::vector<Step>& out, Step pre,
                       std::shared_ptr<std::vector<std::uint32_t>> extra) {
    Step attn = [this, nm, recompute, pre, extra, gl]() {
      if (pre) pre();
      block(gl, nm + ".attn", nm + (recompute ? ".recompute.attn" : ".fwd.attn"), K.layer_at(gl).fwd_attn, true, false,
            extra ? *extra : std::vector<std::uint32_t>{}, nullptr, nullptr, c.parallel_block() ? kNoReduce : 0);
    };
    if (moe_on && K.moe_pattern[gl]) {
      moe_steps(nm, recompute ? ".recompute" : ".fwd", gl, false, out, attn, nullptr);
    } else {
      out.push_back([this, nm, recompute, attn, gl]() {
        attn();
        block(gl, nm + ".mlp", nm + (recompute ? ".recompute.mlp" : ".fwd.mlp"), K.layer_at(gl).fwd_mlp, false, false, {},
              nullptr, nullptr, c.parallel_block() ? kNoGather : 0);
      });
    }
  }

  void fwd_moe_recompute(const std::string& nm, std::int64_t gl, std::vector<Step>& out, Step pre,
                         std::shared_ptr<std::vector<std::uint32_t>> extra) {
    Step before = [pre]() {
      if (pre) pre();
    };
    moe_steps(nm, ".recompute", gl, false, out, before, extra);
  }

  // The MTP layers built as MoE layers (GptStepKernels::mtp_moe) on the chunk that runs them, after its decoder
  // layers. Forward: the logits on the loss stage, then per depth the embedding, projection and attention
  // (mtp_layer_f) and the MoE steps of layer num_layers -- dispatch and combine over the EP group, as the decoder's
  // MoE layers (MultiTokenPredictionLayer runs its transformer layer's MLP, the MoELayer, in
  // megatron/core/transformer/multi_token_prediction.py @d98e8a64) -- then the heads on the loss stage or the send
  // to the next stage. Backward: the heads (or the received gradient), per depth in reverse the MoE steps and the
  // rest of the depth (mtp_layer_b), then the logits.
  void mtp_moe_fwd(std::int64_t mb, std::int64_t ch, std::int64_t base, std::int64_t nl, const std::string& mbs,
                   bool last_chunk, std::vector<Step>& out) {
    out.push_back([this, mb, base, nl, mbs, last_chunk]() {
      if (nl > 0) fg_offload_fwd(mb, nl - 1, nl, base + nl - 1, mbs, nullptr);
      if (last_chunk) rb.chain(compute_op(mbs + ".logits.fwd", K.logits_fwd));
    });
    for (std::int64_t k = 0; k < c.moe.mtp_num_layers; ++k) {
      const std::string nm = mbs + ".mtp" + std::to_string(k);
      Step before = [this, nm]() { rb.chain(compute_op(nm + ".fwd", K.mtp_layer_f)); };
      moe_steps(nm, ".fwd", c.num_layers, false, out, before, nullptr);
    }
    out.push_back([this, mb, ch, mbs, last_chunk]() {
      if (last_chunk) {
        rb.chain(compute_op(mbs + ".mtp.heads.fwd", K.mtp_heads));
        return;
      }
      send_fwd(mb, ch, mbs);
    });
  }

  void mtp_moe_bwd(std::int64_t mb, std::int64_t ch, std::int64_t base, std::int64_t nl, const std::string& mbs,
                   bool last_chunk, bool gather, std::shared_ptr<std::uint32_t> fsdp_next, std::vector<Step>& out) {
    out.push_back([this, mb, ch, base, nl, mbs, last_chunk]() {
      if (nl > 0) fg_reload(mb, nl - 1, nl, base + nl - 1, mbs);
      if (last_chunk) {
        rb.chain(compute_op(mbs + ".mtp.heads.bwd", K.mtp_heads_b));
        return;
      }
      recv_bwd(mb, ch, mbs);
    });
    for (std::int64_t k = c.moe.mtp_num_layers - 1; k >= 0; --k) {
      const std::string nm = mbs + ".mtp" + std::to_string(k);
      moe_steps(nm, ".bwd", c.num_layers, true, out, nullptr, nullptr);
      out.push_back([this, nm]() {
        rb.chain(compute_op(nm + ".bwd", K.mtp_layer_b));
        final_mtp_bwd = rb.last();
      });
    }
    out.push_back([this, mb, base, nl, mbs, last_chunk, gather, fsdp_next]() {
      if (last_chunk)
        logits_bwd(mb, mbs);
      if (gather && nl > 0)
        *fsdp_next = fsdp_ag(mbs + ".l" + std::to_string(base + nl - 1) + ".bwd.fsdp.ag", base + nl - 1);
    });
  }

  // A slot's pipeline hand-offs and its output layer's backward, as every slot shape emits them: the forward
  // activations to the next stage, the backward gradient from it (received, then waited for) and the logits'
  // backward (without the output-layer wgrad that defer_embedding_wgrad_compute leaves to the flush).
  void send_fwd(std::int64_t mb, std::int64_t ch, const std::string& mbs) {
    send(OpKind::Send, RankBuilder::kSendF, mbs + ".send.fwd", place(ch).to, tag(mb, place(ch).to_chunk, 0), ch,
         place(ch).out_hidden);
  }
  void recv_bwd(std::int64_t mb, std::int64_t ch, const std::string& mbs) {
    send(OpKind::Recv, RankBuilder::kRecvB, mbs + ".recv.bwd", place(ch).to, tag(mb, ch, 1), ch, place(ch).out_hidden);
    rb.chain(wait_op(mbs + ".bwd.wait"), {pending_recv_});
  }
  void logits_bwd(std::int64_t mb, const std::string& mbs) {
    rb.chain(compute_op(mbs + ".logits.bwd", deferred_out_wgrad(mb) ? minus(K.logits_bwd, K.logits_wgrad) : K.logits_bwd));
  }

  // `hidden`: hidden states in the message (GptChunkPlace::in_hidden / out_hidden).
  void send(OpKind kind, std::uint16_t stream, std::string name, std::int32_t peer, std::int64_t msg_tag,
            std::int64_t chunk, double hidden) {
    if (c.dualpipe() && chunk == 1) stream = static_cast<std::uint16_t>(kRev + (stream - RankBuilder::kRecvF));
    Op o;
    o.kind = kind;
    o.stream = stream;
    o.name = std::move(name);
    o.category = "pp";
    o.peer = peer;
    o.tag = msg_tag;
    o.bytes = x_.pp_bytes * hidden;
    if (kind == OpKind::Recv) {
      // The receive is posted with no dependency, so it matches its send as soon as that is sent, possibly
      // while this rank still computes. Without overlap_p2p_comm Megatron posts it when the compute stream
      // is about to wait for it (megatron/core/pipeline_parallel/schedules.py at NVIDIA/Megatron-LM@d98e8a64dd:
      // forward_backward_pipelining_without_interleaving calls p2p_communicator.recv_forward right before
      // forward_step, and the blocking send_*_recv_* of both schedules), so no compute runs beside the real
      // NCCL receive kernel: it holds no SMs in the replay (Op::sm_ctas 0). With overlap_p2p_comm it does.
      if (!c.overlap_p2p_comm) o.sm_ctas = 0;
      std::uint32_t ri = rb.push(std::move(o));
      pending_recv_ = ri;
      return;
    }
    if (c.overlap_p2p_comm) {
      o.deps.push_back(rb.last());
      rb.push(std::move(o));
    } else {
      rb.chain(std::move(o));  // Megatron waits for its p2p requests before computing on
    }
  }
  std::uint32_t pending_recv_ = 0;

  // The steps of one slot: a prologue (receive or embedding / loss), one step per layer (three per MoE
  // layer), an epilogue (send or embedding backward). Run in order they emit the slot's ops; two slots'
  // steps alternated build two interleaved dependency chains (overlapped_pair).
  void slot_steps(const GptSlot& sl, std::vector<Step>& out) {
    slot_steps_of(sl, out);
    if (sl.fwd || sl.weight) return;
    // The backward slot's last op (align_grad_reduce launches a chunk's reduction after one).
    const std::size_t kb = bwd_end_.size();
    bwd_end_.push_back(0);
    out.push_back([this, kb]() { bwd_end_[kb] = rb.last(); });
  }
  void slot_steps_of(const GptSlot& sl, std::vector<Step>& out) {
    const GptChunkPlace& pl = place(sl.chunk);
    const std::int64_t mb = sl.mb, ch = sl.chunk, nl = pl.nl, base = pl.base;
    const bool first_chunk = pl.first, last_chunk = pl.last;
    const std::string mbs = "mb" + std::to_string(mb) + (nchunks() > 1 ? ".c" + std::to_string(ch) : "");
    auto fsdp_next = std::make_shared<std::uint32_t>(0);
    if (sl.weight) {
      // DualPipe's W step: the weight-gradient GEMMs the input-only backward of this micro-batch and chunk
      // left, one op per layer in backward order; the layer's gradient is complete after it.
      for (std::int64_t l = nl - 1; l >= 0; --l)
        out.push_back([this, mbs, ch, l, gl = base + l]() {
          Costs w = K.layer_at(gl).wgrad_attn;
          if (moe_on && K.moe_pattern[gl]) {
            const MoeCosts& M = K.moe[K.moe_index[gl]];
            w += M.pre_w, w += M.experts_w, w += M.shared_w;
          } else {
            w += K.layer_at(gl).wgrad_mlp;
          }
          rb.chain(compute_op(mbs + ".l" + std::to_string(gl) + ".wgrad", w));
          final_bwd[ch][l] = rb.last();
        });
      return;
    }
    if (sl.fwd) {
      // (a chunk without decoder layers -- pipeline_model_parallel_layout's `E` or `L` alone -- gathers none)
      const bool gather = c.fsdp() && fsdp_gather_before(ch, true) && nl > 0;
      const std::int64_t k = fwd_count_++;
      out.push_back([this, mb, ch, base, mbs, first_chunk, gather, fsdp_next, k]() {
        const bool param_ag = c.overlap_param_gather && dist_opt_sharded && c.megatron_ddp();
        if (param_ag && !fwd_table_.empty()) {
          // align_param_gather: the forward pipeline rank st runs st virtual micro-batches before chunk cc - 1's
          // first dispatches chunk cc's all-gathers (cc >= 2), so that every stage issues them at once.
          const auto j = static_cast<std::size_t>(k + st);
          if (j < fwd_table_.size() && fwd_table_[j].first == 0) {
            const std::int64_t cc = fwd_table_[j].second + 1;
            if (cc > 1 && cc < nchunks()) dispatch_param_ag(cc);
          }
        }
        if (!first_chunk) {
          send(OpKind::Recv, RankBuilder::kRecvF, mbs + ".recv.fwd", place(ch).from, tag(mb, ch, 0), ch, place(ch).in_hidden);
          rb.chain(wait_op(mbs + ".l" + std::to_string(base) + ".wait"), {pending_recv_});
        }
        // A chunk's all-gathers not dispatched yet are at its first forward (its first layer's forward pre-hook,
        // finish_param_sync in megatron/core/distributed/param_and_grad_buffer.py @d98e8a64); with
        // overlap_param_gather_with_optimizer_step the first chunk's ran after its optimizer step.
        if (param_ag && mb == 0 && !(c.overlap_param_gather_with_optimizer_step && ch == 0)) dispatch_param_ag(ch);
        if (gather) *fsdp_next = fsdp_ag(mbs + ".l" + std::to_string(base) + ".fsdp.ag", base);
        if (first_chunk) {
          // The embedding waits for the first layer's unit (layer_el counts the embedding in it).
          std::vector<std::uint32_t> deps;
          if (gather) fsdp_wait(mbs + ".l" + std::to_string(base) + ".fsdp", base, *fsdp_next, deps);
          rb.chain(compute_op(mbs + ".embed.fwd", K.embed_fwd), deps);
        }
      });
      for (std::int64_t l = 0; l < nl; ++l) {
        const std::int64_t gl = base + l;
        auto extra = std::make_shared<std::vector<std::uint32_t>>();
        Step pre = [this, extra, gather, fsdp_next, l, nl, gl, mb, ch, mbs, first_chunk]() {
          if (gather) {
            const std::uint32_t ag = *fsdp_next;
            if (l + 1 < nl) *fsdp_next = fsdp_ag(mbs + ".l" + std::to_string(gl + 1) + ".fsdp.ag", gl + 1);
            // (the first chunk's first layer was copied out before the embedding)
            if (!(l == 0 && first_chunk && c.fsdp2_copies())) fsdp_wait(mbs + ".l" + std::to_string(gl) + ".fsdp", gl, ag, *extra);
          }
          if (float8_layer(gl) && float8_weights().fwd.kernels)
            rb.chain(compute_op(mbs + ".l" + std::to_string(gl) + ".float8.weight_cast", float8_weights().fwd), *extra);
          if (c.overlap_param_gather && dist_opt_sharded && mb == 0) {
            const std::uint32_t ag = early_ag[static_cast<std::size_t>(bucket_of[ch][l])];
            if (ag != kNoOp) extra->push_back(ag);
          }
          offload_fwd(gl, mbs, *extra);
          if (l > 0) fg_offload_fwd(mb, l - 1, nl, gl - 1, mbs, extra.get());
        };
        fwd_layer_steps(mbs + ".l" + std::to_string(gl), false, gl, out, pre, extra);
        // distribute_saved_activations: the checkpoint keeps a copy of its rank's 1 / TP of the input
        // (split_tensor_into_1d_equal_chunks(new_buffer=True), random.py:621-625 @d98e8a64): read and write it.
        if (ends_split_checkpoint(l, nl))
          out.push_back([this, mbs, gl]() {
            const Costs copy = K.memory_pass(x_.cm, models::MemoryKernel::Copy, 2.0 * checkpoint_input_bytes() / double(t),
                                             Precision::BF16);
            rb.chain(compute_op(mbs + ".l" + std::to_string(gl) + ".checkpoint.split", copy));
          });
      }
      if (K.mtp_moe && place(ch).mtp) {
        mtp_moe_fwd(mb, ch, base, nl, mbs, last_chunk, out);
        return;
      }
      out.push_back([this, mb, ch, base, nl, mbs, last_chunk]() {
        if (nl > 0) fg_offload_fwd(mb, nl - 1, nl, base + nl - 1, mbs, nullptr);
        // A standalone MTP stage runs the MTP layers after its decoder layers; the loss stage the MTP heads.
        if (place(ch).mtp && !last_chunk) rb.chain(compute_op(mbs + ".mtp.fwd", K.mtp_layers));
        if (last_chunk) {
          rb.chain(compute_op(mbs + ".logits.fwd", K.logits_fwd));
          if (c.mtp_standalone()) rb.chain(compute_op(mbs + ".mtp.heads.fwd", K.mtp_heads));
          else if (K.mtp.kernels) rb.chain(compute_op(mbs + ".mtp.fwd", K.mtp));
          return;
        }
        send_fwd(mb, ch, mbs);
      });
      return;
    }
    // (fsdp_reshard_after_forward never: the layers are still gathered from their forward.)
    const bool gather = c.fsdp() && fsdp_gather_before(ch, false);
    const WMode wm = sl.input_only ? WMode::Deferred : c.moe.delay_wgrad_compute ? WMode::Delay : WMode::Whole;
    Step first_layer_w;  // Delay: the first layer's attention weight gradient, after the slot's pipeline send
    if (K.mtp_moe && place(ch).mtp) {
      mtp_moe_bwd(mb, ch, base, nl, mbs, last_chunk, gather, fsdp_next, out);
    } else {
    out.push_back([this, mb, ch, base, nl, mbs, last_chunk, gather, fsdp_next]() {
      if (nl > 0) fg_reload(mb, nl - 1, nl, base + nl - 1, mbs);
      if (!last_chunk) {
        recv_bwd(mb, ch, mbs);
        if (place(ch).mtp) rb.chain(compute_op(mbs + ".mtp.bwd", K.mtp_layers_b)), final_mtp_bwd = rb.last();
      } else {
        if (c.mtp_standalone()) rb.chain(compute_op(mbs + ".mtp.heads.bwd", K.mtp_heads_b));
        else if (K.mtp_b.kernels) rb.chain(compute_op(mbs + ".mtp.bwd", K.mtp_b)), final_mtp_bwd = rb.last();
        // defer_embedding_wgrad_compute: this micro-batch's output-layer wgrad waits for the flush (finish_step).
        logits_bwd(mb, mbs);
      }
      if (gather && nl > 0)
        *fsdp_next = fsdp_ag(mbs + ".l" + std::to_string(base + nl - 1) + ".bwd.fsdp.ag", base + nl - 1);
    });
    }
    for (std::int64_t l = nl - 1; l >= 0; --l) {
      const std::int64_t gl = base + l;
      const std::string nm = mbs + ".l" + std::to_string(gl);
      // FSDP: this layer waits for its gather and prefetches the next one (in backward order).
      auto extra = std::make_shared<std::vector<std::uint32_t>>();
      const bool re = recomputed(l, nl);
      Step pre = [this, extra, gather, fsdp_next, l, nl, gl, mb, mbs, re]() {
        if (gather) {
          const std::uint32_t ag = *fsdp_next;
          if (l > 0) *fsdp_next = fsdp_ag(mbs + ".l" + std::to_string(gl - 1) + ".bwd.fsdp.ag", gl - 1);
          fsdp_wait(mbs + ".l" + std::to_string(gl) + ".bwd.fsdp", gl, ag, *extra);
        }
        if (float8_layer(gl) && float8_weights().bwd.kernels) {
          // (a recomputed forward casts the weight again)
          Costs w = float8_weights().bwd;
          if (re) w += float8_weights().fwd;
          rb.chain(compute_op(mbs + ".l" + std::to_string(gl) + ".bwd.float8.weight", w), *extra);
        }
        offload_bwd(gl, mbs, *extra);
        fg_offload_bwd(mb, l, nl, gl, mbs, *extra);
      };
      if (re) {
        // distribute_saved_activations: the checkpoint's input is all-gathered over TP before the group's recompute
        // (gather_split_1d_tensor, random.py:647-651 @d98e8a64: synchronous, on the compute stream's order).
        if (ends_split_checkpoint(l, nl))
          out.push_back([this, nm]() {
            rb.chain(coll_op(nm + ".checkpoint.ag", CollOp::AllGather, Y.tp_comm[st], checkpoint_input_bytes(),
                             RankBuilder::kTp, "tp"));
          });
        // The recomputed forward takes the dependencies; the backward then has none.
        auto none = std::make_shared<std::vector<std::uint32_t>>();
        fwd_layer_steps(nm, true, gl, out, pre, extra);
        extra = none;
        pre = nullptr;
      } else if (moe_on && K.moe_pattern[gl] && c.recomputes("moe")) {
        // recompute_modules moe (Megatron-Core MoELayer checkpointed): router, dispatch, experts and combine
        // run forward again, with their all-to-alls, before the MoE layer's backward.
        fwd_moe_recompute(nm, gl, out, pre, extra);
        extra = std::make_shared<std::vector<std::uint32_t>>();
        pre = nullptr;
      }
      const LayerCosts& Lg = K.layer_at(gl);
      Costs ba = Lg.bwd_attn;
      if (c.recompute_granularity == "selective" && (!c.selective_ac_option.empty() || c.recomputes("core_attn")))
        ba += Lg.recompute_attn_extra;
      // recompute_modules layernorm: both norms of the layer forward again in its backward.
      if (c.recomputes("layernorm")) ba += Lg.recompute_norm, ba += c.parallel_block() ? Costs{} : Lg.recompute_norm;
      // recompute_modules mla_up_proj: MLA's up-projections and RoPE again before the core attention's backward
      // (CheckpointWithoutOutput's hook on the core attention output's gradient; LayerCosts::recompute_mla_up).
      if (c.recomputes("mla_up_proj")) ba += Lg.recompute_mla_up;
      if (wm != WMode::Whole) ba = minus(ba, Lg.wgrad_attn);
      auto tail = [this, nm, ba, ch, l, gl, mb, wm]() {
        const LayerCosts& Lt = K.layer_at(gl);
        const int skip = c.parallel_block() ? kNoGather : 0;  // the MLP's backward gathered the output gradient
        if (wm == WMode::Whole)
          block(gl, nm + ".attn", nm + ".bwd.attn", ba, true, true, {}, &Lt.dgrad_attn_in, &Lt.wgrad_attn_in, skip);
        else
          block(gl, nm + ".attn", nm + ".bwd.attn", ba, true, true, {}, nullptr, nullptr, skip);
        if (wm == WMode::Whole) final_bwd[ch][l] = rb.last();
        const bool reduce = !fsdp_pp_nosync || mb == x_.m - 1;
        if (c.fsdp2_copies()) {
          // torch FSDP2 after the layer's backward, on the compute stream: without a reduce-scatter the gradient
          // is kept unsharded in the reduce dtype; the reduce-scatter reads it chunk-cat into its flat input.
          const FsdpCopyCosts& fc = fsdp_copies(gl);
          const bool accumulated = fsdp_pp_nosync && x_.m > 1;
          if (accumulated && fc.upcast.kernels)
            rb.chain(compute_op(nm + ".fsdp.grad_accumulate", mb == 0 ? fc.upcast : fc.accumulate));
          if (reduce) rb.chain(compute_op(nm + ".fsdp.chunk_cat", accumulated ? fc.chunk_cat_accumulated : fc.chunk_cat));
        }
        if (c.fsdp() && reduce) {
          // Gradient reduce-scatter of this layer (every micro-batch, as FSDP2 without no_sync; with
          // pipeline parallelism torch FSDP2 reduces once, after the last micro-batch).
          Op rs_op = coll_op(nm + ".fsdp.rs", CollOp::ReduceScatter, Y.dp_comm[st], layer_el(gl) * x_.grad_elem_bytes,
                             RankBuilder::kFsdp, "dp");
          // Megatron-FSDP's 1 / DP multiply before it, where it is a kernel (megatron_fsdp_scale).
          if (c.megatron_fsdp_grad_scale())
            rs_op.deps.push_back(megatron_fsdp_scale(nm + ".fsdp.rs.scale", layer_el(gl), RankBuilder::kFsdp, rb.last()));
          const std::uint32_t rs = c.megatron_fsdp_grad_scale() ? rb.push(std::move(rs_op)) : rb.fork(std::move(rs_op));
          std::uint16_t post_stream = RankBuilder::kFsdp;
          std::uint32_t post_dep = rs;
          bool post_reduce = true;
          if (hsdp_per_unit()) {
            const double shard_bytes = layer_el(gl) / double(Y.shard_n) * x_.grad_elem_bytes;
            if (!fsdp_pp_nosync && mb > 0) {
              // the partial output added in (read two shards, write one), on the reduce-scatter stream
              Costs add;
              add.add(x_.cm, KernelDesc::memory(models::MemoryKernel::Elementwise, 3.0 * shard_bytes));
              Op a = compute_op(nm + ".fsdp.partial_add", add);
              a.stream = RankBuilder::kFsdp;
              a.deps.push_back(rs);
              post_dep = rb.push(std::move(a));
            }
            if (mb == x_.m - 1) {
              Op ar = coll_op(nm + ".fsdp.ar", CollOp::AllReduce, Y.rep_comm[st], shard_bytes, kFsdpAr, "dp");
              ar.deps.push_back(post_dep);
              post_dep = rb.push(std::move(ar));
              post_stream = kFsdpAr;
            } else {
              post_reduce = false;  // foreach_reduce returns before the post-reduce cast
            }
          } else if (mfsdp_outer_ar() && mb == x_.m - 1) {
            // Megatron-FSDP's all-reduce of the layer's gradient shard over the replicas (mfsdp_outer_ar).
            Op ar = coll_op(nm + ".fsdp.ar", CollOp::AllReduce, Y.rep_comm[st], mfsdp_outer_el(layer_el(gl)) * x_.grad_elem_bytes,
                            kFsdpAr, "dp");
            ar.deps.push_back(rs);
            rb.push(std::move(ar));
          }
          if (post_reduce && c.fsdp2_copies() && fsdp_copies(gl).post_reduce.kernels) {
            Op cast = compute_op(nm + ".fsdp.reduce_cast", fsdp_copies(gl).post_reduce);
            cast.stream = post_stream;
            cast.deps.push_back(post_dep);
            rb.push(std::move(cast));
          }
          if (fsdp_experts(gl)) {
            // torch FSDP2: the expert unit's gradients chunk-cat into the reduce-scatter input on the compute
            // stream first, the reduced shard cast after a bf16 reduce.
            if (c.fsdp2_copies()) rb.chain(compute_op(nm + ".fsdp.experts.chunk_cat", expert_fsdp_copies().chunk_cat));
            Op ers_op = coll_op(nm + ".fsdp.rs.experts", CollOp::ReduceScatter, Y.edp_comm[st],
                                expert_params_per_gpu(c) * x_.grad_elem_bytes, RankBuilder::kFsdp, "dp");
            if (c.megatron_fsdp_grad_scale())
              ers_op.deps.push_back(megatron_fsdp_scale(nm + ".fsdp.rs.experts.scale", expert_params_per_gpu(c),
                                                        RankBuilder::kFsdp, rb.last()));
            const std::uint32_t ers = c.megatron_fsdp_grad_scale() ? rb.push(std::move(ers_op)) : rb.fork(std::move(ers_op));
            if (c.fsdp2_copies() && expert_fsdp_copies().post_reduce.kernels) {
              Op cast = compute_op(nm + ".fsdp.experts.reduce_cast", expert_fsdp_copies().post_reduce);
              cast.stream = RankBuilder::kFsdp;
              cast.deps.push_back(ers);
              rb.push(std::move(cast));
            }
          }
        }
      };
      if (moe_on && K.moe_pattern[gl]) {
        moe_steps(nm, ".bwd", gl, true, out, pre, extra, wm);
        out.push_back(tail);
      } else {
        out.push_back([this, nm, pre, extra, tail, wm, gl]() {
          if (pre) pre();
          const LayerCosts& Lm = K.layer_at(gl);
          std::vector<std::uint32_t> deps = *extra;
          if (c.recomputes("mlp") && K.has_block(gl, false)) {
            // recompute_modules mlp (LayerCosts::recompute_mlp): the dense MLP's forward again, with its TP
            // all-gather and reduce-scatter, before its backward (gpt.cpp refuses it with the parallel block).
            block(gl, nm + ".mlp", nm + ".recompute.mlp", Lm.recompute_mlp, false, false, deps);
            deps.clear();
          }
          if (c.parallel_block())  // the attention's backward reduces the summed input gradient (and regathers)
            block(gl, nm + ".mlp", nm + ".bwd.mlp", wm == WMode::Whole ? Lm.bwd_mlp : minus(Lm.bwd_mlp, Lm.wgrad_mlp), false,
                  true, deps, nullptr, nullptr, kNoReduce);
          else if (wm == WMode::Whole)
            block(gl, nm + ".mlp", nm + ".bwd.mlp", Lm.bwd_mlp, false, true, deps, &Lm.dgrad_mlp_in, &Lm.wgrad_mlp_in);
          else
            block(gl, nm + ".mlp", nm + ".bwd.mlp", minus(Lm.bwd_mlp, Lm.wgrad_mlp), false, true, deps);
          if (wm == WMode::Delay) rb.chain(compute_op(nm + ".bwd.mlp.wgrad", Lm.wgrad_mlp));
          tail();
        });
      }
      if (wm == WMode::Delay) {
        // Megatron-Core: the attention block's (pre_dispatch_computation's) weight gradient runs at the end of
        // the layer's step (TransformerLayerSchedulePlan.run, backward_dw after the paired forward's combine),
        // the first layer's after the chunk's pipeline send (TransformerModelChunkSchedulePlan.run: "Delay the
        // last pre_dispatch_computation wgrad ... for overlapping with the p2p comm").
        Step w = [this, nm, ch, l, gl]() {
          Costs cw = K.layer_at(gl).wgrad_attn;
          if (moe_on && K.moe_pattern[gl]) cw += K.moe[K.moe_index[gl]].pre_w;
          rb.chain(compute_op(nm + ".bwd.attn.wgrad", cw));
          final_bwd[ch][l] = rb.last();
        };
        if (l > 0) out.push_back(w);
        else first_layer_w = w;
      }
    }
    out.push_back([this, mb, ch, mbs, first_chunk, first_layer_w]() {
      if (first_chunk) {
        rb.chain(compute_op(mbs + ".embed.bwd", K.embed_bwd));
        final_embed_bwd = rb.last();
        if (first_layer_w) first_layer_w();
        return;
      }
      const auto before_send = rb.head();
      send(OpKind::Send, RankBuilder::kSendB, mbs + ".send.bwd", place(ch).from, tag(mb, place(ch).from_chunk, 1), ch,
           place(ch).in_hidden);
      if (first_layer_w) {
        // The weight gradient runs while the gradient is on its way upstream; what follows waits for both.
        const std::uint32_t sent = rb.last();
        rb.set_head(before_send);
        first_layer_w();
        rb.chain(wait_op(mbs + ".bwd.wgrad.join"), {sent});
      }
    });
  }

  // Two slots overlapped (GptSchedule): their steps on two chain heads, one step of each in turn, so each
  // one's dispatch / combine runs while the other computes. The first slot's prologue and first layer step
  // go first (so a backward's wait for its gradient does not hold the forward's first layer).
  void overlapped_pair(const GptSlot& a, const GptSlot& b) {
    std::vector<Step> sa, sb;
    slot_steps(a, sa);
    slot_steps(b, sb);
    auto ha = rb.head(), hb = rb.head();
    std::size_t i = 0, j = 0;
    for (; i < std::min<std::size_t>(2, sa.size()); ++i) rb.set_head(ha), sa[i](), ha = rb.head();
    while (i < sa.size() || j < sb.size()) {
      if (j < sb.size()) rb.set_head(hb), sb[j++](), hb = rb.head();
      if (i < sa.size()) rb.set_head(ha), sa[i++](), ha = rb.head();
    }
    rb.set_head(ha);
    rb.chain(wait_op("mb" + std::to_string(a.mb) + "+mb" + std::to_string(b.mb) + ".a2a_overlap.join"), {hb.first});
  }

  // Megatron's defer_embedding_wgrad_compute: the output layer's weight-gradient GEMMs of the first
  // wgrad_deferral_limit micro-batches (0: all) are buffered in the backward (LinearWithGradAccumulationAnd-
  // AsyncCommunication.backward, megatron/core/tensor_parallel/layers.py at NVIDIA/Megatron-LM@d98e8a64) and
  // run after the stage's last backward, before finalize_model_grads (finish_embedding_wgrad_compute ->
  // drain_embedding_wgrad_compute, megatron/core/pipeline_parallel/schedules.py and megatron/core/utils.py).
  bool deferred_out_wgrad(std::int64_t mb) const {
    return c.defer_embedding_wgrad_compute && (c.wgrad_deferral_limit == 0 || mb < c.wgrad_deferral_limit);
  }

  // Megatron-FSDP's 1 / DP scale of a gradient bucket of `el` elements where it is a kernel of its own
  // (GptConfig::megatron_fsdp_grad_scale): `grad_data.mul_(scaling_factor)` in gradient_reduce_preprocessing, run
  // on the reduce-scatter stream right before the bucket's collective (megatron_fsdp/param_and_grad_buffer.py
  // :4075-4080 and :4740-4760 at NVIDIA/Megatron-LM@d98e8a64), one in-place pass reading and writing the bucket in
  // its reduction dtype. Pushed on `stream` after `dep`.
  std::uint32_t megatron_fsdp_scale(const std::string& name, double el, std::uint16_t stream, std::uint32_t dep) {
    Op s = compute_op(name, K.memory_pass(x_.cm, models::MemoryKernel::Elementwise, 2.0 * el * x_.grad_elem_bytes,
                                          x_.grad_elem_bytes == 4.0 ? Precision::FP32 : Precision::BF16));
    s.stream = stream;
    s.deps.push_back(dep);
    return rb.push(std::move(s));
  }

  // After the last backward: expert-gradient and DP gradient reductions, the optimizer step, the
  // parameter all-gathers of the distributed optimizer.
  void finish_step() {
    const std::int64_t dp = Y.dp, edp = Y.edp;
    const double grad_elem_bytes = x_.grad_elem_bytes;
    // The deferred output-layer wgrad GEMMs (the output layer's gradient is ready after them). The drain's
    // all-gathers of the sequence-parallel input are not in the trace (nor is the output layer's gather inline).
    std::int64_t out_wgrad_done = -1;
    if (has_last && last_stage_has_output(c) && c.defer_embedding_wgrad_compute) {
      for (std::int64_t mb = 0; mb < x_.m && deferred_out_wgrad(mb); ++mb)
        rb.chain(compute_op("mb" + std::to_string(mb) + ".logits.wgrad.deferred", K.logits_wgrad));
      out_wgrad_done = rb.last();
    }
    const std::uint32_t backward_done = rb.last();
    // Expert gradients: reduced over the expert data-parallel group (reduce-scatter with a sharded
    // optimizer, else all-reduce) after the backward; the optimizer step waits for it.
    std::vector<std::uint32_t> expert_grad_done;
    double stage_expert_params = 0, stage_expert_bf16 = 0;  // the latter: the experts of first_last_layers_bf16's layers
    if (moe_on) {
      for (std::int64_t ch = 0; ch < nchunks(); ++ch)
        for (std::int64_t l = 0; l < place(ch).nl; ++l)
          if (K.moe_pattern[place(ch).base + l]) {
            stage_expert_params += expert_params_per_gpu(c);
            if (c.bf16_layer(place(ch).base + l)) stage_expert_bf16 += expert_params_per_gpu(c);
          }
      // The MTP layers' experts (built like the decoder's last layer).
      if (final_mtp_bwd >= 0) stage_expert_params += double(mtp_moe_layers(c)) * expert_params_per_gpu(c);
    }
    // Gradient synchronisation: buckets in backward order (last layer first), cut per chunk as Megatron-Core's
    // DDP does (chunk_bucketed, bucket_limit), or across the stage's chunks on the other data-parallel paths.
    std::vector<std::pair<std::uint32_t, double>> grad_buckets;  // (ready op, elements)
    std::vector<double> grad_bucket_dense;  // of which embedding / output-layer elements (param_ag_bytes)
    {
      struct Item {
        std::uint32_t first;  // the op after which the gradient is ready
        double second;        // its elements
        bool dense;           // the embedding or the output layer
        double bf16_el = 0;   // of a decoder layer: its elements gathered in bf16 (param_ag_bytes)
        std::int64_t late = -1;  // the deferred output-layer wgrad: the op after which the gradient is ready,
                                 // its place in the buckets kept (Megatron's buckets are by parameter order)
        std::int64_t chunk = 0;  // the model chunk whose DDP holds it
      };
      std::vector<Item> items;  // in the order gradients become ready
      if (last_stage_has_output(c))
        for (std::int64_t ch = nchunks() - 1; ch >= 0; --ch) {
          if (!place(ch).last) continue;
          // Output layer: its gradient is ready with the last layer's backward (SC'21 ordering kept).
          const std::int64_t nl = place(ch).nl;
          std::uint32_t at = nl ? final_bwd[ch][nl - 1] : backward_done;
          items.push_back({at, x_.out_el, true, 0, out_wgrad_done, ch});
        }
      for (std::int64_t ch = nchunks() - 1; ch >= 0; --ch)
        for (std::int64_t l = place(ch).nl - 1; l >= 0; --l)
          items.push_back({final_bwd[ch][l], x_.Pl, false, bf16_layer_el(place(ch).base + l), -1, ch});
      std::int64_t first_ch = 0, last_ch = nchunks() - 1;
      for (std::int64_t ch = 0; ch < nchunks(); ++ch) {
        if (place(ch).first) first_ch = ch;
        if (place(ch).last) last_ch = ch;
      }
      if (has_first) items.push_back({final_embed_bwd, x_.emb_el, true, 0, -1, first_ch});
      // The MTP layers, and the MTP's copy of the word embeddings where the stage holds no other
      // (gpt_memory_of_stage counts the same parameters).
      if (final_mtp_bwd >= 0) {
        const auto at = static_cast<std::uint32_t>(final_mtp_bwd);
        items.push_back({at, mtp_params_per_rank(c), false, 0, -1, last_ch});
        if (!has_first && !(has_last && !c.untie_embeddings_and_output_weights))
          items.push_back({at, x_.emb_el, true, 0, -1, last_ch});
      }
      std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      const double limit = bucket_limit();
      // One pass per chunk's DDP (Megatron-Core), or one over the stage.
      const bool per_chunk = c.megatron_ddp();
      struct Bucket {
        std::uint32_t ready;
        double el, dense;
        std::int64_t chunk;
      };
      std::vector<Bucket> buckets;
      for (std::int64_t ch = per_chunk ? nchunks() - 1 : 0; ch >= 0; --ch) {
        const bool cut = chunk_bucketed(ch);
        // align_grad_reduce: the chunk's buckets all wait for its launch.
        std::uint32_t launch = 0;
        if (aligned_grad_reduce()) {
          const std::int64_t ks = launch_slot_[static_cast<std::size_t>(ch)];
          launch = ks >= 0 ? bwd_end_[static_cast<std::size_t>(ks)] : backward_done;
        }
        double acc = 0, acc_dense = 0;
        std::uint32_t ready = 0;
        std::int64_t late = -1;
        auto ready_op = [&] { return late >= 0 ? std::max(ready, static_cast<std::uint32_t>(late)) : ready; };
        for (const Item& it : items) {
          if (per_chunk && it.chunk != ch) continue;
          acc += it.second;
          if (it.dense) acc_dense += it.second;
          acc_dense += it.bf16_el;
          ready = it.first;
          late = std::max(late, it.late);
          if (cut && acc >= limit) {
            buckets.push_back({std::max(ready_op(), launch), acc, acc_dense, ch});
            acc = 0, acc_dense = 0, late = -1;
          }
        }
        if (acc > 0) buckets.push_back({std::max(ready_op(), launch), acc, acc_dense, ch});
      }
      // The reductions in the order they are issued: as each bucket's gradients are ready with
      // overlap_grad_reduce; else after the backward, chunk by chunk (finalize_model_grads ->
      // finish_grad_sync per chunk, megatron/core/distributed/finalize_model_grads.py @d98e8a64).
      if (per_chunk)
        std::stable_sort(buckets.begin(), buckets.end(), [&](const Bucket& a, const Bucket& b) {
          return c.overlap_grad_reduce ? a.ready < b.ready : a.chunk < b.chunk;
        });
      for (const Bucket& bk : buckets) grad_buckets.push_back({bk.ready, bk.el}), grad_bucket_dense.push_back(bk.dense);
    }
    std::vector<std::uint32_t> grad_done, outer_done;
    double local_params = 0;
    for (const auto& bk : grad_buckets) local_params += bk.second;
    const bool shard_opt = c.use_distributed_optimizer || c.data_parallel_sharding_strategy != "no_shard";
    // Megatron-Core's DDP scales a bucket's gradients by 1 / (DP x CP) before its collective unless the collective
    // averages (GptConfig::ddp_average_in_collective): `grad_data *= gradient_scaling_factor` on the compute stream
    // in start_grad_sync (param_and_grad_buffer.py:660-667 @d98e8a64), one in-place multiply reading and writing
    // the bucket's gradient buffer in its dtype. With overlap_grad_reduce the backward hook that finds the bucket
    // ready runs it, so it follows the op that completed the bucket; without, finish_grad_sync runs bucket after
    // bucket, each collective synchronous (async_op false: the compute stream waits for it), so each scale waits
    // for the previous bucket's collective.
    auto grad_scale = [&](const std::string& name, double el) {
      return compute_op(name, K.memory_pass(x_.cm, models::MemoryKernel::Elementwise, 2.0 * el * grad_elem_bytes,
                                            grad_elem_bytes == 4.0 ? Precision::FP32 : Precision::BF16));
    };
    const bool ddp_scale = c.megatron_ddp() && !c.ddp_average_in_collective;
    if (dp * cp > 1 && !c.fsdp()) {
      for (std::size_t k = 0; k < grad_buckets.size(); ++k) {
        const std::string name = "dp.bucket" + std::to_string(k);
        const double el = padded(grad_buckets[k].second, Y.shard_n);
        Op op = coll_op(name + (shard_opt ? ".rs" : ".ar"), shard_opt ? CollOp::ReduceScatter : CollOp::AllReduce,
                        Y.dp_comm[st], el * grad_elem_bytes, RankBuilder::kDp, "dp");
        std::uint32_t ready = c.overlap_grad_reduce ? grad_buckets[k].first : backward_done;
        if (ddp_scale) {
          Op s = grad_scale(name + ".scale", el);
          if (c.overlap_grad_reduce) ready = rb.insert_after(ready, std::move(s));
          else ready = grad_done.empty() ? rb.chain(std::move(s)) : rb.chain(std::move(s), {grad_done.back()});
        }
        if (c.megatron_fsdp_grad_scale()) ready = megatron_fsdp_scale(name + ".scale", el, RankBuilder::kDp, ready);
        op.deps.push_back(ready);
        grad_done.push_back(rb.push(std::move(op)));
        if (mfsdp_outer_ar()) {
          // Megatron-FSDP's all-reduce of the bucket over the replicas, unscaled, after its shard reduction.
          Op ar = coll_op(name + ".replica.ar", CollOp::AllReduce, Y.rep_comm[st], mfsdp_outer_el(el) * grad_elem_bytes,
                          kFsdpAr, "dp");
          ar.deps.push_back(grad_done.back());
          outer_done.push_back(rb.push(std::move(ar)));
        }
      }
    }
    for (auto d : outer_done) grad_done.push_back(d);
    // The stage's expert gradients over the expert data-parallel group, after the dense buckets: the call waits for
    // the whole backward and the data-parallel stream runs its calls in order. (Megatron FSDP and torch FSDP2
    // expert units reduce them per layer instead, fsdp_experts.)
    if (moe_on && edp > 1 && stage_expert_params > 0 && !(c.fsdp() && (!c.use_torch_fsdp2 || c.fsdp_expert_units))) {
      const bool sh = c.use_distributed_optimizer || c.data_parallel_sharding_strategy != "no_shard" || c.fsdp();
      const double expert_el = padded(stage_expert_params, edp);
      Op op = coll_op(sh ? "edp.experts.rs" : "edp.experts.ar", sh ? CollOp::ReduceScatter : CollOp::AllReduce,
                      Y.edp_comm[st], expert_el * grad_elem_bytes, RankBuilder::kDp, "dp");
      // The expert buckets' scale: 1 / (DP x CP), or EDP / (DP x CP) when the collective averages -- none where
      // that is 1 (distributed_data_parallel.py:271-278 @d98e8a64).
      if (c.megatron_ddp() && (!c.ddp_average_in_collective || edp != dp * cp))
        op.deps.push_back(rb.chain(grad_scale("edp.experts.scale", expert_el)));
      if (c.megatron_fsdp_grad_scale())
        op.deps.push_back(megatron_fsdp_scale("edp.experts.scale", expert_el, RankBuilder::kDp, backward_done));
      op.deps.push_back(backward_done);
      expert_grad_done.push_back(rb.push(std::move(op)));
    }
    if (Y.R > 1 && !hsdp_per_unit() && !mfsdp_outer_ar()) {
      // HSDP: the gradient shards are all-reduced across the replica groups.
      Op op = coll_op("dp.replica.ar", CollOp::AllReduce, Y.rep_comm[st], local_params / double(Y.shard_n) * grad_elem_bytes,
                      RankBuilder::kDp, "dp");
      op.deps = grad_done.empty() ? std::vector<std::uint32_t>{backward_done} : grad_done;
      grad_done = {rb.push(std::move(op))};
    }
    if (Y.emb_comm >= 0 && Y.emb_stage[st]) {
      Op op = coll_op("embedding.grad.ar", CollOp::AllReduce, Y.emb_comm, x_.V * x_.h / double(t) * grad_elem_bytes,
                      RankBuilder::kDp, "dp");
      op.deps.push_back(backward_done);
      grad_done.push_back(rb.push(std::move(op)));
    }
    double shard = (shard_opt || c.fsdp()) ? local_params / double(Y.shard_n) : local_params;
    shard += (shard_opt || c.fsdp()) ? stage_expert_params / double(edp) : stage_expert_params;
    for (auto d : expert_grad_done) grad_done.push_back(d);
    // Chunked optimizer-state offload: each optimizer's masters and first chunk come back from the host once the last
    // backward is done -- finalize_model_grads is wrapped to start the copies first (megatron/training/training.py:
    // 2762-2796 @d48bd6be; prefetch_for_step, chunked_optimizer_state_offload.py:785-792), on the H2D stream after
    // what is on the D2H stream and the compute stream (_order_h2d_after_source_streams, lines 700-710), beside the
    // gradient reductions. Every optimizer of the chain prefetches (ChainedOptimizer.prefetch_optimizer_state_for_
    // gradient_finalization, optimizer.py:1585-1589).
    std::vector<std::uint32_t> masters_in, first_in;
    if (c.state_offload()) {
      const double link = host_copy_Bps(c.gpu);
      for (std::size_t i = 0; i < state_plan_.children.size(); ++i) {
        const auto& ch = state_plan_.children[i];
        const std::string who = i == 0 ? "optimizer" : "optimizer.experts";
        masters_in.push_back(0), first_in.push_back(0);
        if (ch.chunks.empty()) continue;
        Op m = host_copy(who + ".masters.h2d", ch.selected * state_plan_.master_bytes / link, static_cast<std::uint16_t>(kOptStateD2h + 1));
        m.deps = {backward_done, opt_state_d2h_};
        masters_in.back() = rb.push(std::move(m));
        Op f = host_copy(who + ".state.c0.h2d", ch.chunks.front() * state_plan_.moment_bytes / link,
                         static_cast<std::uint16_t>(kOptStateD2h + 1));
        f.deps = {backward_done, opt_state_d2h_};
        first_in.back() = rb.push(std::move(f));
      }
    }
    // optimizer_cpu_offload: the GPU's FusedAdam steps the share of the shard left on the GPU.
    const double host_el = c.optimizer_host_fraction() * shard;
    // overlap_param_gather_with_optimizer_step: the first chunk's optimizer (ChainedOptimizer's first) steps first,
    // then its parameter all-gather is dispatched (ChainedOptimizer._step, megatron/core/optimizer/optimizer.py
    // @d98e8a64) and runs beside the other chunks' step; the next step's first forward needs it.
    const bool split_first = c.overlap_param_gather_with_optimizer_step && dist_opt_sharded;
    double shard0 = 0;
    if (split_first)
      for (std::size_t k = 0; k < bucket_elements.size(); ++k)
        if (bucket_chunk[k] == 0) shard0 += bucket_elements[k] / double(Y.shard_n);
    const Costs opt = K.optimizer(x_.cm, shard - host_el - shard0);
    if (c.fsdp()) {
      // The optimizer waits for the last reduce-scatter: a zero-length join on the FSDP stream.
      Op j = wait_op("fsdp.rs.done");
      j.stream = RankBuilder::kFsdp;
      grad_done.push_back(rb.fork(std::move(j)));
      if (hsdp_per_unit() || mfsdp_outer_ar()) {
        Op a = wait_op("fsdp.ar.done");
        a.stream = kFsdpAr;
        grad_done.push_back(rb.fork(std::move(a)));
      }
    }
    // fp8_param_gather (fp4_param_gather): the updated fp32 main-parameter shard is quantised into the FP8 (NVFP4)
    // parameters of the quantised layers (not first_last_layers_bf16's) of chunks [from, to)
    // (quantize_param_shard, megatron/core/fp8_utils.py @d98e8a64 -> Transformer Engine's
    // cast_master_weights_to_fp8, transformer_engine/pytorch/tensor/utils.py @d0067d0da), then the amaxes
    // are all-reduced (MAX) over the data-parallel group before the scales are set (fp8_param_cast_costs).
    auto quantise_params = [&](std::int64_t from, std::int64_t to, const std::string& suffix) {
      double layers = 0;
      for (std::int64_t ch = from; ch < to; ++ch)
        for (std::int64_t l = 0; l < place(ch).nl; ++l) layers += c.bf16_layer(place(ch).base + l) ? 0.0 : 1.0;
      // Transformer Engine's four linears per layer: LayerNormLinear qkv, Linear proj, LayerNormLinear fc1, Linear fc2.
      // Multi-latent attention has five attention linears instead of two (multi_latent_attention.py @d98e8a64:
      // linear_q_down_proj, linear_q_up_proj -- one linear_q_proj without q_lora_rank --, linear_kv_down_proj,
      // linear_kv_up_proj, linear_proj), each an FP8 parameter with its own scale.
      const double mla_linears = c.moe.q_lora_rank > 0 ? 5.0 : 4.0;
      const double linears = c.moe.multi_latent_attention ? mla_linears + 2.0 : 4.0;
      const Fp8ParamCast f = fp8_param_cast_costs(c, x_.cm, layers * x_.Pl, double(Y.shard_n), linears * layers);
      rb.chain(compute_op("fp8_param_gather.cast" + suffix, f.cast));
      if (Y.shard_n > 1)
        rb.chain(coll_op("fp8_param_gather.amax.ar" + suffix, CollOp::AllReduce, Y.dp_comm[st], f.amax_bytes, RankBuilder::kDp, "dp"));
    };
    const bool quantised_params = c.fp8_param_gather || c.fp4_param_gather;
    if (split_first) {
      rb.chain(compute_op("optimizer.step.c0", K.optimizer(x_.cm, shard0)), grad_done);
      grad_done.clear();
      if (quantised_params) quantise_params(0, 1, ".c0");
      dispatch_param_ag(0);
    }
    if (host_el > 0) offloaded_optimizer_step(opt, host_el, grad_done);
    else if (c.state_offload()) chunked_optimizer_step(grad_done, masters_in, first_in);
    else rb.chain(compute_op("optimizer.step", opt), grad_done);
    if (quantised_params) {
      quantise_params(split_first ? 1 : 0, nchunks(), "");
      // The experts' FP8 (NVFP4) weights the same way by the expert optimizer, on its shard over the expert
      // data-parallel group (megatron/core/optimizer/__init__.py:1214-1243 @d98e8a64 builds it with
      // intra_expt_dp_group, which _copy_main_params_to_model_params passes to quantize_param_shard,
      // distrib_optimizer.py:2847-2852): one weight tensor per local expert in each of fc1 and fc2 (TEGroupedLinear).
      const double q_experts = stage_expert_params - stage_expert_bf16;
      if (q_experts > 0) {
        const double edp_shard = c.use_distributed_optimizer ? double(edp) : 1.0;
        const double tensors = 2.0 * double(c.moe.num_experts / Y.ep) * q_experts / expert_params_per_gpu(c);
        const Fp8ParamCast fe = fp8_param_cast_costs(c, x_.cm, q_experts, edp_shard, tensors);
        rb.chain(compute_op("fp8_param_gather.cast.experts", fe.cast));
        if (edp > 1)
          rb.chain(coll_op("fp8_param_gather.amax.ar.experts", CollOp::AllReduce, Y.edp_comm[st], fe.amax_bytes, RankBuilder::kDp, "dp"));
      }
    }
    if (float8_weights().precompute.kernels) {
      // torchao's precompute_float8_dynamic_scale_for_fsdp after the optimizer step: the amaxes, their
      // all-reduce over the shard group, the scales (torchao_float8_weight_costs).
      rb.chain(compute_op("float8.precompute.amax", float8_weights().precompute));
      rb.chain(coll_op("float8.precompute.amax.ar", CollOp::AllReduce, Y.dp_comm[st], 4.0 * float8_weights().precompute_amaxes,
                       RankBuilder::kDp, "dp"));
    }
    if (moe_on && edp > 1 && stage_expert_params > 0 && c.use_distributed_optimizer && !c.fsdp()) {
      // With fp8_param_gather / fp4_param_gather the quantised layers' experts gather their FP8 (NVFP4) data.
      Op op = coll_op("edp.experts.ag", CollOp::AllGather, Y.edp_comm[st], param_ag_bytes(padded(stage_expert_params, edp), stage_expert_bf16),
                      RankBuilder::kDp, "dp");
      op.deps.push_back(rb.last());
      rb.push(std::move(op));
    }
    if (dist_opt_sharded && !c.overlap_param_gather) {
      for (std::size_t k = 0; k < grad_buckets.size(); ++k) {
        Op op = coll_op("dp.bucket" + std::to_string(k) + ".ag", CollOp::AllGather, Y.dp_comm[st],
                        param_ag_bytes(padded(grad_buckets[k].second, Y.shard_n), grad_bucket_dense[k]), RankBuilder::kDp, "dp");
        op.deps.push_back(rb.last());
        rb.push(std::move(op));
      }
    }
  }
};

}  // namespace

GptMemory check_gpt_layout_and_memory(const GptConfig& c, const std::string& where) {
  gpt_layer_layout(c);
  const auto& gpu = models::gpu_spec(c.gpu, where + " gpu");
  GptMemory mem = gpt_memory_per_gpu(c);
  if (mem.total_bytes() > gpu.hbm_capacity_bytes) {
    char res[400] = "";
    if (mem.allocator_reserve_bytes > 0 || mem.buffers_bytes > 0)
      std::snprintf(res, sizeof res, ", allocator reserve %.1f GiB, buffers %.2f GiB", mem.allocator_reserve_bytes / 1073741824.0,
                    mem.buffers_bytes / 1073741824.0);
    if (mem.optimizer_offloaded_bytes > 0) {
      const std::size_t used = std::strlen(res);
      std::snprintf(res + used, sizeof res - used,
                    ", %.1f GiB of optimizer state in host memory, %.1f GiB of it in HBM at the optimizer step (masters "
                    "window %.1f GiB, staging slots %.1f GiB)",
                    mem.optimizer_offloaded_bytes / 1073741824.0, mem.optimizer_step_bytes / 1073741824.0,
                    mem.state_offload.masters_bytes() / 1073741824.0, mem.state_offload.staging_bytes() / 1073741824.0);
    }
    if (mem.activations_offloaded_bytes > 0) {
      const std::size_t used = std::strlen(res);
      std::snprintf(res + used, sizeof res - used, ", %.1f GiB of activations offloaded to host memory",
                    mem.activations_offloaded_bytes / 1073741824.0);
    }
    const std::string reserve = res;
    char buf[1000];
    std::snprintf(buf, sizeof buf,
                  "model does not fit in GPU memory: needs %.1f GiB per GPU on pipeline stage %lld (weights %.1f GiB, "
                  "gradients %.1f GiB, optimizer %.1f GiB, activations %.1f GiB%s; largest: %s) but %s has %.1f GiB; "
                  "increase tensor/pipeline/context parallelism, enable use_distributed_optimizer or "
                  "recompute_granularity=full",
                  mem.total_bytes() / 1073741824.0, static_cast<long long>(mem.stage), mem.weights_bytes / 1073741824.0,
                  mem.grads_bytes / 1073741824.0, mem.optimizer_bytes / 1073741824.0,
                  mem.activations_bytes / 1073741824.0, reserve.c_str(), mem.largest_term().c_str(), gpu.name.c_str(),
                  gpu.hbm_capacity_bytes / 1073741824.0);
    throw DoesNotFitError(where, buf);
  }
  if (c.host_memory_per_gpu > 0) {
    // Host memory: the pipeline stage with the most offloaded bytes per GPU (not necessarily the HBM peak's).
    GptMemory host = mem;
    for (std::int64_t st = 0; st < c.pipeline_model_parallel_size; ++st)
      if (st != mem.stage) {
        GptMemory m = gpt_memory_of_stage(c, st);
        if (m.host_bytes() > host.host_bytes()) host = m;
      }
    if (host.host_bytes() > c.host_memory_per_gpu) {
      std::string terms;
      auto term = [&](double v, const char* name) {
        if (v <= 0) return;
        char t[120];
        std::snprintf(t, sizeof t, "%s%s %.1f GiB", terms.empty() ? "" : ", ", name, v / 1073741824.0);
        terms += t;
      };
      term(host.host_optimizer_bytes, "optimizer_cpu_offload's optimizer shard");
      term(host.optimizer_offloaded_bytes, "chunked_optimizer_state_offload's optimizer state");
      term(host.activations_offloaded_bytes, "offloaded activations");
      char buf[900];
      std::snprintf(buf, sizeof buf,
                    "model does not fit in host memory: needs %.1f GiB of pinned host memory per GPU on pipeline stage "
                    "%lld (%s; largest: %s) but the servers have %.1f GiB per GPU (%.1f GiB per %lld-GPU server; the "
                    "topology's host_memory parameter states another); offload less (optimizer_offload_fraction, fewer "
                    "offloaded activations) or shard the optimizer over more GPUs",
                    host.host_bytes() / 1073741824.0, static_cast<long long>(host.stage), terms.c_str(),
                    host.largest_host_term().c_str(), c.host_memory_per_gpu / 1073741824.0,
                    c.host_memory_per_gpu * double(c.gpus_per_host) / 1073741824.0, static_cast<long long>(c.gpus_per_host));
      throw DoesNotFitError(where, buf);
    }
  }
  return mem;
}

Trace generate_gpt(const GptConfig& c, const models::ComputeModel& cm_in, const std::string& where) {
  const auto t = c.tensor_model_parallel_size, p = c.pipeline_model_parallel_size, dp = c.data_parallel(),
             cp = c.context_parallel_size;
  const auto m = c.global_batch_size / (c.micro_batch_size * dp);
  const auto layout = gpt_layer_layout(c);
  const auto& gpu = models::gpu_spec(c.gpu, where + " gpu");
  models::ComputeModel cm = cm_in;
  cm.gpu = gpu;
  // 1. Model description: the memory per GPU decides whether the configuration runs at all.
  const GptMemory mem = check_gpt_layout_and_memory(c, where);
  // 2. Kernels of one step, priced.
  const GptStepKernels K = gpt_step_kernels(c, cm, where);
  Trace tr;
  tr.name = "gpt";
  tr.world_size = static_cast<std::int32_t>(c.world_size);
  tr.gpu = gpu.name;
  tr.params = gpt_config_to_params(c);
  // 3. Parallel layout: the communicators.
  const GptParallelLayout Y = gpt_parallel_layout(c, layout, K, tr);
  const StepContext x = step_context(c, cm, K, Y, layout);
  // 4. + 5. Per pipeline stage: the schedule, emitted as ops.
  for (std::int64_t st = 0; st < p; ++st) {
    RankTrace rt;
    StageEmitter(x, st, rt).run(gpt_schedule(c, st, m));
    tr.ranks.push_back(std::move(rt));
  }
  const bool moe_on = c.moe.enabled();
  const bool full = c.recompute_granularity == "full";
  const std::int64_t ep = Y.ep, etp = Y.etp, edp = Y.edp, n_moe = K.n_moe;
  const auto& moe_pattern = K.moe_pattern;
  const std::int64_t R = Y.R, dp_mirrors = Y.dp_mirrors;
  (void)t;
  tr.metadata["samples_per_iteration"] = double(c.global_batch_size);
  tr.metadata["tokens_per_iteration"] = double(c.global_batch_size) * double(c.seq_length);
  tr.metadata["model_flops_per_iteration"] = gpt_model_flops(c);
  tr.metadata["model_parameters"] = gpt_num_parameters(c);
  tr.metadata["micro_batches"] = double(m);
  tr.metadata["peak_dense_flops_per_gpu"] = gpu.peak_flops(c.fp8() ? Precision::FP8 : c.fp4() ? Precision::FP4 : c.precision == "bf16" ? Precision::BF16 : Precision::FP16);
  tr.metadata["memory_per_gpu_bytes.max"] = mem.total_bytes();
  tr.metadata["memory_per_gpu_bytes.weights_grads_optimizer"] = mem.params_bytes();
  tr.metadata["memory_per_gpu_bytes.weights"] = mem.weights_bytes;
  tr.metadata["memory_per_gpu_bytes.gradients"] = mem.grads_bytes;
  tr.metadata["memory_per_gpu_bytes.optimizer"] = mem.optimizer_bytes;
  tr.metadata["memory_per_gpu_bytes.activations"] = mem.activations_bytes;
  if (mem.allocator_reserve_bytes > 0) tr.metadata["memory_per_gpu_bytes.allocator_reserve"] = mem.allocator_reserve_bytes;
  if (mem.buffers_bytes > 0) tr.metadata["memory_per_gpu_bytes.buffers"] = mem.buffers_bytes;
  if (c.optimizer_host_fraction() > 0) {
    // optimizer_cpu_offload: what is on the host (not in the HBM figures above) and what its step costs.
    tr.metadata["host_memory_per_gpu_bytes.optimizer"] = mem.host_optimizer_bytes;
    const OptimizerOffloadTimes o = optimizer_offload_times(c, mem.host_optimizer_elements);
    const double dram = host_dram_Bps(c);
    char buf[900];
    std::snprintf(buf, sizeof buf,
                  "gpt: optimizer_cpu_offload: %.3g of the optimizer shard (%.3g M elements on pipeline stage %lld) is on "
                  "the host: %.2f GiB of pinned host memory per GPU (fp32 master, AdamW moments and gradient buffer, 16 "
                  "bytes per element), %.2f GiB per %lld-GPU server; %.2f GiB of optimizer state left HBM. Its step "
                  "per GPU: gradients to the host %.1f ms + CPU AdamW %.1f ms (28 bytes per element at %.1f GB/s host "
                  "DRAM per GPU, %s; a lower bound, no CPU AdamW is measured) + parameters back %.1f ms over %.1f GB/s "
                  "per direction, %s",
                  c.optimizer_offload_fraction, mem.host_optimizer_elements / 1e6, static_cast<long long>(mem.stage),
                  mem.host_optimizer_bytes / 1073741824.0,
                  mem.host_optimizer_bytes * double(c.gpus_per_host) / 1073741824.0, static_cast<long long>(c.gpus_per_host),
                  12.0 * mem.host_optimizer_elements / 1073741824.0, 1e3 * o.d2h_s, 1e3 * o.cpu_s, dram / 1e9,
                  c.host_memory_bandwidth_per_gpu > 0 ? "host_memory_bandwidth_per_gpu" : "the server's peak by GPU (docs/workloads.md)",
                  1e3 * o.h2d_s, host_copy_Bps(c.gpu) / 1e9,
                  c.overlap_cpu_optimizer_d2h_h2d ? "pipelined per parameter (overlap_cpu_optimizer_d2h_h2d)"
                                                  : "one after the other, the CPU AdamW beside the GPU's");
    tr.notes.push_back(buf);
  }
  if (c.state_offload()) {
    // The chunked optimizer-state offload: the selected state between steps in pinned host memory, in HBM for the
    // optimizer step as the masters window and the two staging slots.
    const OptimizerStateOffload& so = mem.state_offload;
    tr.metadata["memory_per_gpu_bytes.optimizer_offloaded"] = mem.optimizer_offloaded_bytes;
    tr.metadata["memory_per_gpu_bytes.optimizer_step"] = mem.optimizer_step_bytes;
    tr.metadata["host_memory_per_gpu_bytes.optimizer"] = mem.optimizer_offloaded_bytes;
    tr.metadata["optimizer_state_offload.chunks"] = double(so.chunks());
    const double link = host_copy_Bps(c.gpu);
    const double step_phase = mem.params_bytes() + mem.optimizer_step_bytes + mem.allocator_reserve_bytes + mem.buffers_bytes;
    double largest_chunk = 0;
    for (const auto& ch : so.children)
      for (double e : ch.chunks) largest_chunk = std::max(largest_chunk, e);
    char buf[900];
    std::snprintf(buf, sizeof buf,
                  "gpt: %s: %.2f GiB of optimizer state per GPU on pipeline stage %lld (fraction %g of the moments and "
                  "master weights; %.2f GiB stay in HBM) is in pinned host memory between steps, %.2f GiB per %lld-GPU "
                  "server; the step restores the masters (%.2f GiB) and %lld chunk%s of moments (largest %.1f MiB) "
                  "through two staging slots (%.2f GiB at the peak) over %.1f GB/s per direction. HBM peak %.1f GiB in "
                  "the forward / backward, %.1f GiB at the optimizer step",
                  c.chunked_optimizer_state_offload ? "chunked_optimizer_state_offload" : "offload_optimizer_states",
                  mem.optimizer_offloaded_bytes / 1073741824.0, static_cast<long long>(mem.stage), c.optimizer_state_offload_fraction,
                  mem.optimizer_bytes / 1073741824.0, mem.optimizer_offloaded_bytes * double(c.gpus_per_host) / 1073741824.0,
                  static_cast<long long>(c.gpus_per_host), so.masters_bytes() / 1073741824.0, static_cast<long long>(so.chunks()),
                  so.chunks() == 1 ? "" : "s", largest_chunk * so.moment_bytes / 1048576.0, so.staging_bytes() / 1073741824.0,
                  link / 1e9, (mem.params_bytes() + mem.activations_bytes + mem.allocator_reserve_bytes + mem.buffers_bytes) / 1073741824.0,
                  step_phase / 1073741824.0);
    tr.notes.push_back(buf);
  }
  if (mem.activations_offloaded_bytes > 0)
    tr.metadata["memory_per_gpu_bytes.activations_offloaded"] = mem.activations_offloaded_bytes;
  if (mem.host_bytes() > 0) {
    // Host memory beside the HBM peak: what the offloads pin per GPU (the HBM peak's stage), and the servers'
    // capacity per GPU when the topology gives it (check_gpt_layout_and_memory has refused more than it).
    tr.metadata["host_memory_per_gpu_bytes.max"] = mem.host_bytes();
    if (c.host_memory_per_gpu > 0) tr.metadata["host_memory_per_gpu_bytes.capacity"] = c.host_memory_per_gpu;
    char buf[400];
    if (c.host_memory_per_gpu > 0)
      std::snprintf(buf, sizeof buf,
                    "gpt: host memory: %.2f GiB pinned per GPU on pipeline stage %lld (HBM peak %.1f GiB) of the "
                    "servers' %.1f GiB per GPU (%.1f GiB per %lld-GPU server, from the topology)",
                    mem.host_bytes() / 1073741824.0, static_cast<long long>(mem.stage), mem.total_bytes() / 1073741824.0,
                    c.host_memory_per_gpu / 1073741824.0, c.host_memory_per_gpu * double(c.gpus_per_host) / 1073741824.0,
                    static_cast<long long>(c.gpus_per_host));
    else
      std::snprintf(buf, sizeof buf,
                    "gpt: host memory: %.2f GiB pinned per GPU on pipeline stage %lld (HBM peak %.1f GiB); not checked: "
                    "the topology does not give its servers' host memory (--param host_memory=... or a cpu node's "
                    "\"memory\" states it)",
                    mem.host_bytes() / 1073741824.0, static_cast<long long>(mem.stage), mem.total_bytes() / 1073741824.0);
    tr.notes.push_back(buf);
  }
  if (moe_on) {
    // Imbalance: per MoE layer the busiest expert-parallel rank's tokens over the mean, and the expert
    // compute time it costs (busiest minus evenly spread, forward + backward (+ recompute), all micro-
    // batches) on the most loaded pipeline stage.
    double mx = 0, mean = 0, ratio = 0, dropped = 0, lost_max = 0, a2a_ratio = 0;
    std::vector<double> lost(p, 0.0);
    for (std::int64_t gl = 0; gl < c.num_layers; ++gl) {
      if (!moe_pattern[gl]) continue;
      const auto& ld = K.loads[K.moe_index[gl]];
      const auto& M = K.moe[K.moe_index[gl]];
      mx = std::max(mx, ld.max_rank_tokens), mean += ld.mean_rank_tokens;
      ratio = std::max(ratio, ld.mean_rank_tokens > 0 ? ld.max_rank_tokens / ld.mean_rank_tokens : 1.0);
      dropped += ld.dropped_fraction;
      for (double r : ld.recv_share) a2a_ratio = std::max(a2a_ratio, r * double(ep));
      const double df = M.experts_f.seconds - M.experts_f_mean.seconds, db = M.experts_b.seconds - M.experts_b_mean.seconds;
      for (std::int64_t st = 0; st < p; ++st)
        for (std::int64_t ch = 0; ch < Y.chunks; ++ch) {
          const std::int64_t first = Y.places[st][ch].base, nl = Y.places[st][ch].nl, l = gl - first;
          if (l < 0 || l >= nl) continue;
          // Recomputed layers run the forward (and its experts) twice (full recompute; block: the first N).
          const bool re = (full && !(c.recompute_method == "block" && c.recompute_num_layers &&
                                     l >= std::min(c.recompute_num_layers, nl))) ||
                          c.recomputes("moe");
          // Each chunk runs every micro-batch (DualPipe: each direction half of them).
          lost[st] += (df * (re ? 2.0 : 1.0) + db) * double(c.dualpipe() ? m / 2 : m);
        }
    }
    for (double x : lost) lost_max = std::max(lost_max, x);
    tr.metadata["moe.tokens_per_rank.max"] = mx;
    tr.metadata["moe.tokens_per_rank.mean"] = mean / double(n_moe);
    tr.metadata["moe.tokens_per_rank.max_over_mean"] = ratio;
    tr.metadata["moe.dropped_token_fraction"] = dropped / double(n_moe);
    // Bytes the busiest EP rank receives in a dispatch over the mean (worst layer): the factor by which a
    // receiver-bound all-to-all is slower than with a uniform router.
    tr.metadata["moe.all_to_all_max_over_mean_bytes"] = a2a_ratio;
    tr.metadata["moe.imbalance_compute_s"] = lost_max;
    tr.notes.push_back("gpt/moe: " + std::to_string(n_moe) + " MoE layers, EP " + std::to_string(ep) + " x ETP " +
                       std::to_string(etp) + " x EDP " + std::to_string(edp) + ", dispatcher " +
                       c.moe.moe_token_dispatcher_type + ", load " + c.moe.moe_load +
                       "; each layer's dispatch/combine is an all_to_allv with the routing's per-destination bytes; "
                       "expert compute priced for the busiest EP rank of each layer (the simulated rank stands in "
                       "for it)");
  }
  if (c.fp4())
    tr.notes.push_back("gpt: NVFP4 GEMMs priced at the GPU's dense FP4 peak with the FP8 GEMM efficiency (no FP4 kernel "
                       "is measured): FP4 throughput is not validated (docs/workloads.md)");
  if (c.hybrid()) tr.notes.push_back(hybrid_note(c));
  if (c.gdn()) {
    std::int64_t n_gdn = 0;
    for (bool g : K.gdn_layers) n_gdn += g ? 1 : 0;
    tr.notes.push_back("gpt: " + std::to_string(n_gdn) + " of " + std::to_string(c.num_layers) +
                       " decoder layers are Gated DeltaNet (linear_attention_freq " + c.linear_attention_freq +
                       "): the chunked gated delta-rule kernel is priced from Megatron-LM's gdn_layer_flops count at "
                       "the GEMM fit's rate, as (tokens x value heads) x value dim x key dim GEMMs; no linear-attention "
                       "kernel is measured, so the GDN kernel rate is not validated (docs/workloads.md); model FLOPs "
                       "count these layers with gdn_layer_flops (no s x s term)");
  }
  if (K.has_bf16_layers())
    tr.notes.push_back("gpt: first_last_layers_bf16: decoder layers [0, " + std::to_string(c.num_layers_at_start_in_bf16) +
                       ") and [" + std::to_string(c.num_layers - c.num_layers_at_end_in_bf16) + ", " +
                       std::to_string(c.num_layers) + ") run their GEMMs in bf16");
  if (!c.defaulted_layout.empty()) {
    std::string d;
    for (const auto& x : c.defaulted_layout) d += (d.empty() ? "" : ", ") + x;
    tr.notes.push_back("gpt: not given, so the generator's defaults (the SC'21 GPT-3 layout; Megatron-LM's own are TP 1, "
                       "PP 1, micro-batch x DP, no recompute): " + d);
  }
  tr.notes.push_back("gpt: simulated one rank per pipeline stage (" + std::to_string(p) + " of " +
                     std::to_string(c.world_size) + " GPUs: data-parallel replica 0, context rank 0, tensor rank 0); its " +
                     std::to_string(t - 1) + " tensor-parallel peers, " + std::to_string(cp - 1) +
                     " context-parallel peers and the other " + std::to_string(dp - 1) +
                     " data-parallel replicas are symmetric stand-ins");
  tr.notes.push_back("gpt: tensor-parallel collectives priced over the real TP group; data-parallel collectives "
                     "over the full DP group of " + std::to_string(dp * cp / R) + " ranks with " + std::to_string(dp_mirrors) +
                     " concurrent co-located DP groups (mirrors)");
  tr.notes.push_back("gpt: model FLOPs (tflops_per_gpu) counted with the " + c.flops_convention +
                     " convention (docs/workloads.md); MFU = tflops_per_gpu / peak_dense_flops_per_gpu (" +
                     c.precision + ")");
  tr.notes.push_back("gpt: compute kernel durations from the compute model at generation time (GPU " + gpu.name +
                     ", attention " + c.attention_backend + ")");
  return tr;
}

}  // namespace fabricsim::workloads
