#include "workloads/gpt.hpp"

// Layer 3, parallel layout: how the world's ranks form the tensor / context / data / pipeline / expert
// groups (Megatron-LM's rank order and expert grid) and the communicators of the simulated ranks, with the
// concurrent groups that share their hosts' NICs as mirrors.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>

#include "workloads/gpt_detail.hpp"

namespace fabricsim::workloads::gpt_detail {

namespace {
// The placement classes of the groups of one kind in a pipeline stage (groups[0]: the simulated rank's), rank
// r on GPU r: two groups are alike when their members, in order, sit in the same NVLink domains (`dom` GPUs
// each) and servers (`gph` GPUs each) relative to their first member's. The rails (a GPU's index in its
// server) are left out: the fabrics give every rail the same links. The first group of each class, in
// first-seen order, so the first is groups[0].
std::vector<std::vector<std::int32_t>> group_classes(const std::vector<std::vector<std::int32_t>>& groups,
                                                     std::int64_t dom, std::int64_t gph) {
  std::vector<std::vector<std::int32_t>> out;
  if (dom <= 0 || gph <= 0) return out;
  std::set<std::vector<std::int64_t>> seen;
  std::vector<std::int64_t> key;
  for (const auto& g : groups) {
    key.clear();
    for (auto r : g) key.push_back(r / dom - g.front() / dom), key.push_back(r / gph - g.front() / gph);
    if (seen.insert(key).second) out.push_back(g);
  }
  return out;
}
}  // namespace

GptParallelLayout gpt_parallel_layout(const GptConfig& c, const std::vector<std::vector<std::int64_t>>& layout,
                                      const GptStepKernels& K, Trace& tr) {
  GptParallelLayout Y;
  const auto t = c.tensor_model_parallel_size, p = c.pipeline_model_parallel_size, dp = c.data_parallel(),
             cp = c.context_parallel_size, v = c.vp();
  Y.t = t, Y.p = p, Y.dp = dp, Y.cp = cp, Y.v = v;
  Y.pp_inner = c.use_tp_pp_dp_mapping;
  Y.chunks = c.dualpipe() ? 2 : v;
  {
    // Model chunks per rank. Interleaved (Megatron): chunk ch of stage st holds the layers from
    // offset[ch * p + st]; the last stage's chunk ch sends to the first stage's chunk ch + 1. DualPipe
    // (github:deepseek-ai/DualPipe dualpipe.py): chunk 0 is stage st of the pipeline fed at rank 0, chunk 1
    // stage p - 1 - st of the pipeline fed at rank p - 1 (the same model, a second copy of its parameters).
    const std::vector<std::int64_t> off = chunk_offsets(c, layout);
    Y.places.assign(p, std::vector<GptChunkPlace>(Y.chunks));
    for (std::int64_t st = 0; st < p; ++st)
      for (std::int64_t ch = 0; ch < Y.chunks; ++ch) {
        GptChunkPlace& pl = Y.places[st][ch];
        if (c.dualpipe()) {
          const std::int64_t s = ch == 0 ? st : p - 1 - st;
          pl.base = off[s], pl.nl = layout[s][0];
          pl.first = s == 0, pl.last = s == p - 1;
          pl.from = Y.rank_of(ch == 0 ? st - 1 : st + 1, 0, 0, 0);
          pl.to = Y.rank_of(ch == 0 ? st + 1 : st - 1, 0, 0, 0);
          pl.to_chunk = pl.from_chunk = ch;
          if (pl.first) pl.from = -1;
          if (pl.last) pl.to = -1;
        } else {
          pl.base = off[ch * p + st], pl.nl = layout[st][ch];
          pl.first = st == 0 && ch == 0, pl.last = st == p - 1 && ch == v - 1;
          pl.from = Y.rank_of(st == 0 ? p - 1 : st - 1, 0, 0, 0);
          pl.to = Y.rank_of(st == p - 1 ? 0 : st + 1, 0, 0, 0);
          pl.to_chunk = st == p - 1 ? ch + 1 : ch;
          pl.from_chunk = st == 0 ? ch - 1 : ch;
          // Megatron-Core with an MTP stage before the loss's (mtp_standalone): the MTP stage sends the decoder's
          // hidden states with every MTP layer's output concatenated along the sequence, and so does every
          // virtual stage after it up to the loss (p2p_communication.py communicates the shapes then).
          const std::int64_t k = ch * p + st, M = c.mtp_virtual_stage();
          pl.mtp = k == M;
          if (c.mtp_standalone()) {
            const double w = 1.0 + double(c.moe.mtp_num_layers);
            pl.in_hidden = k > M ? w : 1.0, pl.out_hidden = k >= M ? w : 1.0;
          }
        }
        if (c.dualpipe()) pl.mtp = pl.last && c.moe.mtp_num_layers > 0;
      }
  }
  // Rank layout as Megatron-LM's default order (tensor fastest, then context, then data, then pipeline):
  //   rank = stage * (dp * cp * t) + dp_index * (cp * t) + cp_index * t + tp_index,
  // or with use_tp_pp_dp_mapping (pipeline before data):
  //   rank = dp_index * (p * cp * t) + stage * (cp * t) + cp_index * t + tp_index (GptParallelLayout::rank_of).
  auto rank_of = [&](std::int64_t stage, std::int64_t d, std::int64_t k, std::int64_t tp) { return Y.rank_of(stage, d, k, tp); };
  const std::int64_t dp_mirrors = std::min<std::int64_t>(t, c.gpus_per_host) - 1;
  Y.dp_mirrors = dp_mirrors;
  // Gradient / parameter collectives run over the DP x CP group (Megatron-Core reduces gradients over
  // data- and context-parallel ranks together); HSDP (num_distributed_optimizer_instances R) shards over
  // DP x CP / R consecutive ranks and all-reduces across the R replicas.
  const std::int64_t R = c.num_distributed_optimizer_instances, shard_n = dp * cp / R;
  Y.R = R, Y.shard_n = shard_n;
  // Appends a communicator to the trace and returns its index.
  auto add_comm = [&](std::string name, const char* category, std::vector<std::int32_t> ranks,
                      std::int64_t mirrors = 0, std::int32_t mirror_stride = 1) {
    Communicator comm;
    comm.name = std::move(name);
    comm.category = category;
    comm.ranks = std::move(ranks);
    comm.mirrors = static_cast<std::int32_t>(mirrors);
    comm.mirror_stride = mirror_stride;
    comm.collnet_enable = false;  // Megatron creates its groups without NCCL_COLLNET_ENABLE but for use_sharp's
    tr.comms.push_back(std::move(comm));
    return static_cast<std::int32_t>(tr.comms.size() - 1);
  };
  // Placement classes of the stage's groups of one kind (docs/workloads.md "Symmetry"): when the groups
  // do not all have the shape of the simulated rank's (groups[0]) over the NVLink domains and servers, the
  // first group of each other shape is added as communicator "NAME@FIRST_RANK" beside the simulated rank's
  // NAME (same kind, mirrors and matrices computed for its own ranks). No op calls it: the replay prices
  // NAME's calls over the slowest of them (replay/placement_classes.hpp). Megatron's default rank order only
  // (with use_tp_pp_dp_mapping a stage's ranks are not consecutive: the simulated rank's group stands for all).
  const std::int64_t class_dom = std::max(c.gpus_per_nvlink_domain, c.gpus_per_host);
  auto classes_of = [&](const std::vector<std::vector<std::int32_t>>& groups) {
    std::vector<std::vector<std::int32_t>> cls;
    if (!Y.pp_inner) cls = group_classes(groups, class_dom, c.gpus_per_host);
    if (cls.size() < 2) cls.clear();
    return cls;
  };
  // Adds the class communicator of `own` (an index into tr.comms) for the group `ranks`; returns its index.
  auto add_class = [&](std::int32_t own, const std::vector<std::int32_t>& ranks) {
    Communicator a;
    const Communicator& o = tr.comms[static_cast<std::size_t>(own)];
    a.name = o.name + "@" + std::to_string(ranks.front());
    a.category = o.category;
    a.ranks = ranks;
    a.mirrors = o.mirrors, a.mirror_stride = o.mirror_stride;
    // Its co-located copies as the own group's, as far as the world reaches.
    while (a.mirrors > 0 && *std::max_element(a.ranks.begin(), a.ranks.end()) +
                                    static_cast<std::int64_t>(a.mirrors) * a.mirror_stride >= c.world_size)
      --a.mirrors;
    a.collnet_enable = o.collnet_enable;
    tr.comms.push_back(std::move(a));
    return static_cast<std::int32_t>(tr.comms.size() - 1);
  };
  auto attach_classes = [&](std::int32_t own, const std::vector<std::vector<std::int32_t>>& groups) {
    const auto cls = classes_of(groups);
    for (std::size_t k = 1; k < cls.size(); ++k) add_class(own, cls[k]);
  };
  auto& tp_comm = Y.tp_comm;
  auto& dp_comm = Y.dp_comm;
  auto& cp_comm = Y.cp_comm;
  auto& rep_comm = Y.rep_comm;
  tp_comm.assign(p, 0), dp_comm.assign(p, 0), cp_comm.assign(p, -1), rep_comm.assign(p, -1);
  Y.cp_a2a_comm.assign(p, -1), Y.cp_ring_comm.assign(p, -1), Y.tpcp_comm.assign(p, -1);
  for (std::int64_t st = 0; st < p; ++st) {
    const std::string sfx = ".stage" + std::to_string(st);
    std::vector<std::int32_t> ranks;
    for (std::int64_t k = 0; k < t; ++k) ranks.push_back(rank_of(st, 0, 0, k));
    tp_comm[st] = add_comm("tp" + sfx, "tp", std::move(ranks));
    if (t > 1) {
      std::vector<std::vector<std::int32_t>> groups;
      for (std::int64_t d = 0; d < dp; ++d)
        for (std::int64_t k = 0; k < cp; ++k) {
          groups.emplace_back();
          for (std::int64_t tp = 0; tp < t; ++tp) groups.back().push_back(rank_of(st, d, k, tp));
        }
      attach_classes(tp_comm[st], groups);
    }
    ranks.clear();
    for (std::int64_t d = 0; d < dp; ++d)
      for (std::int64_t k = 0; k < cp; ++k)
        if (d * cp + k < shard_n) ranks.push_back(rank_of(st, d, k, 0));
    dp_comm[st] = add_comm("dp" + sfx, "dp", std::move(ranks), dp_mirrors);
    tr.comms[static_cast<std::size_t>(dp_comm[st])].collnet_enable = c.use_sharp;  // GptConfig::use_sharp
    // The stage's data-parallel (shard) groups: one per tensor index and HSDP replica, member m at data x
    // context index r * shard_n + m. Shifts by the tensor index, so one shape wherever the NVLink domains and
    // servers hold whole tensor-parallel groups (docs/workloads.md "Symmetry").
    if (t * R > 1) {
      std::vector<std::vector<std::int32_t>> groups;
      for (std::int64_t r = 0; r < R; ++r)
        for (std::int64_t tp = 0; tp < t; ++tp) {
          groups.emplace_back();
          for (std::int64_t m = r * shard_n; m < (r + 1) * shard_n; ++m) groups.back().push_back(rank_of(st, m / cp, m % cp, tp));
        }
      attach_classes(dp_comm[st], groups);
    }
    if (cp > 1) {
      ranks.clear();
      for (std::int64_t k = 0; k < cp; ++k) ranks.push_back(rank_of(st, 0, k, 0));
      cp_comm[st] = add_comm("cp" + sfx, "cp", std::move(ranks), dp_mirrors);
      {
        std::vector<std::vector<std::int32_t>> groups;
        for (std::int64_t d = 0; d < dp; ++d)
          for (std::int64_t tp = 0; tp < t; ++tp) {
            groups.emplace_back();
            for (std::int64_t k = 0; k < cp; ++k) groups.back().push_back(rank_of(st, d, k, tp));
          }
        attach_classes(cp_comm[st], groups);
      }
      if (c.cp_impl() == "a2a+p2p") {
        // Megatron's hierarchical CP groups of the simulated rank (CP index 0): level 0 the first n CP ranks,
        // level 1 every n-th (create_hierarchical_groups, parallel_state.py at NVIDIA/Megatron-LM@d98e8a64).
        const std::int64_t n = c.cp_a2a_size();
        std::vector<std::int32_t> inner, outer;
        for (std::int64_t k = 0; k < n; ++k) inner.push_back(rank_of(st, 0, k, 0));
        for (std::int64_t k = 0; k < cp; k += n) outer.push_back(rank_of(st, 0, k, 0));
        Y.cp_a2a_comm[st] = add_comm("cp.a2a" + sfx, "cp", std::move(inner), dp_mirrors);
        // The n x t rings of a host's consecutive ranks (every TP and inner index) run at once and share its NICs.
        Y.cp_ring_comm[st] = add_comm("cp.p2p" + sfx, "cp", std::move(outer), std::min<std::int64_t>(n * t, c.gpus_per_host) - 1);
        // Their placement classes over the stage's (data, tensor) indices: level-0 groups per block of n CP
        // ranks, level-1 groups per position inside the block.
        std::vector<std::vector<std::int32_t>> g0, g1;
        for (std::int64_t d = 0; d < dp; ++d)
          for (std::int64_t tp = 0; tp < t; ++tp) {
            for (std::int64_t b = 0; b < cp; b += n) {
              g0.emplace_back();
              for (std::int64_t k = b; k < b + n; ++k) g0.back().push_back(rank_of(st, d, k, tp));
            }
            for (std::int64_t j = 0; j < n; ++j) {
              g1.emplace_back();
              for (std::int64_t k = j; k < cp; k += n) g1.back().push_back(rank_of(st, d, k, tp));
            }
          }
        attach_classes(Y.cp_a2a_comm[st], g0);
        attach_classes(Y.cp_ring_comm[st], g1);
      }
    }
    if (c.moe.enabled() && c.moe.aux_loss_on() && t * cp > 1) {
      ranks.clear();
      for (std::int64_t k = 0; k < cp; ++k)
        for (std::int64_t tp = 0; tp < t; ++tp) ranks.push_back(rank_of(st, 0, k, tp));
      Y.tpcp_comm[st] = cp > 1 ? add_comm("tp.cp" + sfx, "tp", std::move(ranks)) : tp_comm[st];
      if (cp > 1) {
        std::vector<std::vector<std::int32_t>> groups;
        for (std::int64_t d = 0; d < dp; ++d) {
          groups.emplace_back();
          for (std::int64_t k = 0; k < cp; ++k)
            for (std::int64_t tp = 0; tp < t; ++tp) groups.back().push_back(rank_of(st, d, k, tp));
        }
        attach_classes(Y.tpcp_comm[st], groups);
      }
    }
    if (R > 1) {
      ranks.clear();
      for (std::int64_t r = 0; r < R; ++r) ranks.push_back(rank_of(st, r * shard_n / cp, r * shard_n % cp, 0));
      rep_comm[st] = add_comm("dp.replica" + sfx, "dp", std::move(ranks), dp_mirrors);
      // One replica group per tensor index and position m inside a shard.
      std::vector<std::vector<std::int32_t>> groups;
      for (std::int64_t m = 0; m < shard_n; ++m)
        for (std::int64_t tp = 0; tp < t; ++tp) {
          groups.emplace_back();
          for (std::int64_t r = 0; r < R; ++r) groups.back().push_back(rank_of(st, (r * shard_n + m) / cp, (r * shard_n + m) % cp, tp));
        }
      attach_classes(rep_comm[st], groups);
    }
  }
  // ---- Mixture of experts: per-layer dispatch/combine communicators.
  const bool moe_on = c.moe.enabled();
  const auto& moe_pattern = K.moe_pattern;
  const std::int64_t ep = c.moe.expert_model_parallel_size, etp = moe_on ? c.etp() : 1,
                     edp = moe_on ? c.expert_data_parallel() : 1;
  Y.ep = ep, Y.etp = etp, Y.edp = edp;
  const bool a2a = c.moe.moe_token_dispatcher_type != "allgather";
  Y.a2a = a2a;
  // Expert ranks of a stage: local index = etp_i + etp * (ep_i + ep * edp_i) (expert tensor fastest, as
  // Megatron-Core's expert grid); the simulated rank is local index 0.
  Y.disp_comm.assign(p, std::vector<std::int32_t>(c.num_layers + 1, -1));
  Y.comb_comm.assign(p, std::vector<std::int32_t>(c.num_layers + 1, -1));
  Y.epag_comm.assign(p, -1), Y.etp_comm.assign(p, -1), Y.edp_comm.assign(p, -1);
  // flex: copies of a token per routed slot, per destination EP rank -- over NVLink inside the sender's
  // domain, and for the whole destination domain across the scale-out network (1 = one copy per slot).
  std::vector<double> gpu_copies(static_cast<std::size_t>(ep), 1.0);
  if (moe_on) {
    const std::int64_t gph = c.gpus_per_host;
    std::int32_t mir = 0, mstride = 1;
    if (etp > 1) mir = static_cast<std::int32_t>(std::min(etp, gph) - 1);
    else if (ep < gph) mir = static_cast<std::int32_t>(std::min(edp, gph / ep) - 1), mstride = static_cast<std::int32_t>(ep);
    // EP rank k sits on GPU k * etp of the stage; NVLink domains of gpus_per_nvlink_domain GPUs (a DGX
    // server, or a whole NVL72 rack).
    const std::int64_t dom = std::max(c.gpus_per_nvlink_domain, gph);
    auto host_of = [&](std::int64_t base, std::size_t k) { return (base + static_cast<std::int64_t>(k) * etp) / dom; };
    const bool flex = c.moe.moe_token_dispatcher_type == "flex";
    const std::int64_t per_rank = c.moe.num_experts / ep;
    std::optional<MoeTokenSpread> spread;
    if (flex) {
      // DeepEP-style dispatch (flex): a token crosses the scale-out network once per destination node and is
      // forwarded to that node's experts over NVLink; the combine reduces inside the node before sending
      // back. Scale-out bytes shrink from the token's remote slots to its distinct remote nodes: the entries
      // into a remote domain carry the domain's copies per slot, P(the token has a slot on the domain's
      // experts) / (k x the domain's share of the experts), with the domain's experts taken from the layout
      // (the EP ranks host_of puts there, however many that is) and node-limited routing
      // (moe_router_num_groups / moe_router_group_topk) as Megatron routes it (MoeTokenSpread,
      // workloads/moe.hpp: hypergeometric without group limit; DeepSeek-V3's 4 of 8 nodes: 0.494 copies per
      // slot where (1 - (1 - 1/4)^8) 4 / 8 gave 0.450).
      // Inside an NVLink domain a token moves once per destination GPU, not once per routed slot, in all
      // three kernels the flex dispatcher runs: DeepEP intranode (deepseek-ai/DeepEP@031a5c49
      // csrc/kernels/intranode.cu dispatch: a sender skips a token unless is_token_in_rank[token][rank], one
      // flag per destination rank), DeepEP internode (same commit, internode.cu dispatch: the RDMA sender
      // sends a token once to each node whose 8 is_token_in_rank flags are not all false, and the
      // kRDMAAndNVLForwarder warp for destination GPU j forwards it only if SourceMeta::is_token_in_nvl_rank(j))
      // and HybridEP on NVL72 racks (DeepEP hybrid-ep branch @94a9f8f6 csrc/hybrid_ep/backend/
      // hybrid_ep_backend.cuh S2G_warp_group_device_function: a token is stored once per node that needs it
      // and then written once to each rank of the node whose sparse_to_dense_map entry is set). The combines
      // send one summed copy per token and rank back the same way. Megatron-LM 1e057005
      // megatron/core/transformer/moe/fused_a2a.py hands DeepEP the top-k indices; token_dispatcher.py
      // MoEFlexTokenDispatcher permutes the received tokens to the local experts. A rank's num_experts / ep
      // experts give its copies per slot the same way (Qwen3-235B, 128 experts top-8 over EP 8: 0.667).
      spread.emplace(c.moe);
      for (std::int64_t j = 0; j < ep; ++j)
        gpu_copies[static_cast<std::size_t>(j)] = spread->copies_per_slot(j * per_rank, (j + 1) * per_rank);
      // The forwarding leg (DeepEP internode dispatch: RDMA to the GPU with the sender's local index in the
      // destination node, then NVLink to the GPUs holding the token's experts; the combine reduces the other
      // way): the rail GPU i of a node forwards to GPU j of the same node the slots every remote source with
      // i's local index routed to j -- recv_share[j] of each such source's slots, one full copy per
      // destination GPU. Modelled as an all_to_allv inside each NVLink domain beside the RDMA one.
      Y.flex_forwarding = ep * etp > dom && ep > 1 && a2a;
    }
    Y.fwd_disp_comm.assign(p, std::vector<std::int32_t>(c.num_layers + 1, -1));
    Y.fwd_comb_comm.assign(p, std::vector<std::int32_t>(c.num_layers + 1, -1));
    for (std::int64_t st = 0; st < p; ++st) {
      // Expert grid ranks of the stage by local index (expert tensor fastest, then EP, then EDP); with
      // use_tp_pp_dp_mapping the grid's pipeline groups equal the dense ones only when ETP x EP = TP x CP
      // (gpt.cpp refuses the rest, as Megatron-Core asserts), so local index j is the stage's j-th rank.
      const std::int32_t base = rank_of(st, 0, 0, 0);
      auto expert_rank = [&](std::int64_t j) { return Y.stage_rank(st, j); };
      auto add = [&](const std::string& name, std::vector<std::int32_t> ranks, std::int32_t mirrors, std::int32_t stride) {
        return add_comm(name, "ep", std::move(ranks), mirrors, stride);
      };
      std::vector<std::int32_t> ep_ranks;
      for (std::int64_t k = 0; k < ep; ++k) ep_ranks.push_back(expert_rank(k * etp));
      // flex: copies per slot into each EP rank's domain (its EP ranks are consecutive: host_of grows with k), for
      // the EP group whose first GPU is b.
      auto dom_copies_of = [&](std::int64_t b) {
        std::vector<double> dc(static_cast<std::size_t>(ep), 1.0);
        if (spread)
          for (std::size_t a = 0, e = 0; a < static_cast<std::size_t>(ep); a = e) {
            while (e < static_cast<std::size_t>(ep) && host_of(b, e) == host_of(b, a)) ++e;
            const double f = spread->copies_per_slot(static_cast<std::int64_t>(a) * per_rank, static_cast<std::int64_t>(e) * per_rank);
            std::fill(dc.begin() + static_cast<std::ptrdiff_t>(a), dc.begin() + static_cast<std::ptrdiff_t>(e), f);
          }
        return dc;
      };
      const std::vector<double> dom_copies = dom_copies_of(base);
      // Placement classes of the stage's EP groups (expert tensor index e, expert data index d; the simulated
      // rank's is e = d = 0): their all_to_allv matrices differ with the domains their ranks sit in.
      std::vector<std::vector<std::int32_t>> ep_cls;
      std::vector<std::vector<double>> ep_cls_copies;
      if (ep > 1) {
        std::vector<std::vector<std::int32_t>> groups;
        for (std::int64_t d = 0; d < edp; ++d)
          for (std::int64_t e = 0; e < etp; ++e) {
            groups.emplace_back();
            for (std::int64_t k = 0; k < ep; ++k) groups.back().push_back(expert_rank(e + etp * (k + ep * d)));
          }
        ep_cls = classes_of(groups);
        for (const auto& g : ep_cls) ep_cls_copies.push_back(dom_copies_of(g.front()));
      }
      if (a2a && ep > 1) {
        using Matrix = std::vector<std::vector<double>>;
        // One MoE layer's matrices on the EP group whose first GPU is b (dc: its dom_copies).
        struct Mats {
          Matrix W, WT, U, UT, F, FT, FU, FUT;
        };
        auto layer_mats = [&](std::int64_t gl, std::int64_t b, const std::vector<double>& dc) {
          const auto& ld = K.loads[K.moe_index[gl]];
          // Dispatch: every source sends recv_share[j] of its slots to EP rank j; combine: the transpose.
          const std::size_t n = static_cast<std::size_t>(ep);
          // U, UT: the same with a uniform router (recv_share 1/n), the routing-skew metric's reference
          // (Communicator::a2a_uniform): with flex the copies per slot depend on the NVLink domains, so a
          // group that straddles domains unevenly has unequal row sums even with a uniform router.
          Mats m;
          m.W.assign(n, std::vector<double>(n)), m.WT = m.W, m.U = m.W, m.UT = m.W;
          for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < n; ++j) {
              const double f = host_of(b, i) != host_of(b, j) ? dc[j] : gpu_copies[j];
              m.W[i][j] = ld.recv_share[j] * f, m.WT[j][i] = m.W[i][j];
              m.U[i][j] = f / double(n), m.UT[j][i] = m.U[i][j];
            }
          if (Y.flex_forwarding) {
            // Sources per local index in other domains, for each EP rank i: EP ranks in another domain
            // with i's position in its domain.
            m.F.assign(n, std::vector<double>(n, 0.0)), m.FT = m.F, m.FU = m.F, m.FUT = m.F;
            for (std::size_t i = 0; i < n; ++i) {
              double remote_sources = 0;
              for (std::size_t s2 = 0; s2 < n; ++s2)
                if (host_of(b, s2) != host_of(b, i) &&
                    (b + static_cast<std::int64_t>(s2) * etp) % dom == (b + static_cast<std::int64_t>(i) * etp) % dom)
                  remote_sources += 1.0;
              for (std::size_t j = 0; j < n; ++j)
                if (j != i && host_of(b, j) == host_of(b, i))
                  m.F[i][j] = remote_sources * ld.recv_share[j] * gpu_copies[j], m.FT[j][i] = m.F[i][j],
                  m.FU[i][j] = remote_sources * gpu_copies[j] / double(n), m.FUT[j][i] = m.FU[i][j];
            }
          }
          return m;
        };
        // One MoE layer's communicators; gl = num_layers: the MTP layers' MoE block (GptStepKernels::mtp_moe),
        // on the stage running them (one pair per stage: the MTP depths run one after another).
        auto layer_comms = [&](std::int64_t gl) {
          Mats m = layer_mats(gl, base, dom_copies);
          std::vector<Mats> cm;
          for (std::size_t k = 1; k < ep_cls.size(); ++k) cm.push_back(layer_mats(gl, ep_cls[k].front(), ep_cls_copies[k]));
          // The communicator just added (`own`) gets the matrices `mat` / `uni` of its own group, and each
          // class's communicator its group's.
          auto set_mats = [&](Matrix Mats::*mat, Matrix Mats::*uni) {
            const auto own = static_cast<std::int32_t>(tr.comms.size() - 1);
            tr.comms.back().a2a_matrix = std::move(m.*mat), tr.comms.back().a2a_uniform = std::move(m.*uni);
            for (std::size_t k = 1; k < ep_cls.size(); ++k) {
              Communicator& a = tr.comms[static_cast<std::size_t>(add_class(own, ep_cls[k]))];
              a.a2a_matrix = std::move(cm[k - 1].*mat), a.a2a_uniform = std::move(cm[k - 1].*uni);
            }
          };
          // DualPipe: every layer sits on two ranks (one per direction), each with its own EP group.
          const std::string ln = "ep." + (c.dualpipe() ? "s" + std::to_string(st) + "." : std::string()) +
                                 (gl == c.num_layers ? std::string("mtp") : "l" + std::to_string(gl));
          Y.disp_comm[st][gl] = add(ln + ".dispatch", ep_ranks, mir, mstride);
          set_mats(&Mats::W, &Mats::U);
          Y.comb_comm[st][gl] = add(ln + ".combine", ep_ranks, mir, mstride);
          set_mats(&Mats::WT, &Mats::UT);
          if (Y.flex_forwarding) {
            Y.fwd_disp_comm[st][gl] = add(ln + ".dispatch.nvlink", ep_ranks, mir, mstride);
            set_mats(&Mats::F, &Mats::FU);
            Y.fwd_comb_comm[st][gl] = add(ln + ".combine.nvlink", ep_ranks, mir, mstride);
            set_mats(&Mats::FT, &Mats::FUT);
          }
        };
        for (std::int64_t ch = 0; ch < Y.chunks; ++ch)
          for (std::int64_t l = 0; l < Y.places[st][ch].nl; ++l)
            if (moe_pattern[Y.places[st][ch].base + l]) layer_comms(Y.places[st][ch].base + l);
        for (std::int64_t ch = 0; ch < Y.chunks; ++ch)
          if (K.mtp_moe && Y.places[st][ch].mtp) layer_comms(c.num_layers);
      }
      if (!a2a && ep * etp > 1) {
        std::vector<std::int32_t> r;
        for (std::int64_t k = 0; k < ep * etp; ++k) r.push_back(expert_rank(k));
        const std::int32_t m2 = ep * etp < gph ? static_cast<std::int32_t>(std::min(edp, gph / (ep * etp)) - 1) : 0;
        Y.epag_comm[st] = add("ep.allgather.stage" + std::to_string(st), r, m2, static_cast<std::int32_t>(ep * etp));
        std::vector<std::vector<std::int32_t>> groups;
        for (std::int64_t d = 0; d < edp; ++d) {
          groups.emplace_back();
          for (std::int64_t k = 0; k < ep * etp; ++k) groups.back().push_back(expert_rank(k + ep * etp * d));
        }
        attach_classes(Y.epag_comm[st], groups);
      }
      if (a2a && etp > 1) {
        std::vector<std::int32_t> r;
        for (std::int64_t k = 0; k < etp; ++k) r.push_back(expert_rank(k));
        // The other EP ranks' ETP groups on the same server run the same gathers (co-located mirrors).
        const std::int64_t co = std::max<std::int64_t>(0, std::min(ep, gph / etp) - 1);
        Y.etp_comm[st] = add("etp.stage" + std::to_string(st), r, static_cast<std::int32_t>(co), static_cast<std::int32_t>(etp));
        std::vector<std::vector<std::int32_t>> groups;
        for (std::int64_t j = 0; j < ep * edp; ++j) {
          groups.emplace_back();
          for (std::int64_t e = 0; e < etp; ++e) groups.back().push_back(expert_rank(e + etp * j));
        }
        attach_classes(Y.etp_comm[st], groups);
      }
      if (edp > 1) {
        std::vector<std::int32_t> r;
        for (std::int64_t k = 0; k < edp; ++k) r.push_back(expert_rank(k * ep * etp));
        Y.edp_comm[st] = add("edp.stage" + std::to_string(st), r, static_cast<std::int32_t>(std::min(ep * etp, gph) - 1), 1);
        tr.comms.back().category = "dp";
        // One expert data-parallel group per position j in the expert model-parallel block (EP x ETP ranks).
        std::vector<std::vector<std::int32_t>> groups;
        for (std::int64_t j = 0; j < ep * etp; ++j) {
          groups.emplace_back();
          for (std::int64_t k = 0; k < edp; ++k) groups.back().push_back(expert_rank(j + k * ep * etp));
        }
        attach_classes(Y.edp_comm[st], groups);
      }
    }
  }
  // The word embeddings' gradient all-reduce (Megatron-Core finalize_model_grads.py
  // _allreduce_word_embedding_grads) over the embedding group: pipeline rank 0, the last rank with tied output
  // weights, and the ranks holding MTP layers, which keep their own copy of the word embeddings
  // (pretrain_gpt.py get_embedding_ranks and multi_token_prediction.py get_mtp_ranks at
  // NVIDIA/Megatron-LM@d98e8a64dd; GPTModel builds the embedding where mtp_process). DualPipe keeps the
  // tied-weights pair.
  Y.emb_stage.assign(p, false);
  if (p > 1) {
    Y.emb_stage[0] = true;
    if (!c.untie_embeddings_and_output_weights) Y.emb_stage[p - 1] = true;
    if (!c.dualpipe() && c.mtp_virtual_stage() >= 0) Y.emb_stage[c.mtp_virtual_stage() % p] = true;
    std::vector<std::int32_t> ranks;
    for (std::int64_t st = 0; st < p; ++st)
      if (Y.emb_stage[st]) ranks.push_back(rank_of(st, 0, 0, 0));
    if (ranks.size() > 1) Y.emb_comm = add_comm("embedding", "dp", std::move(ranks));
    else Y.emb_stage.assign(p, false);
  }
  std::size_t classes = 0;
  for (const auto& cm : tr.comms) classes += cm.name.find('@') != std::string::npos ? 1 : 0;
  if (classes > 0)
    tr.notes.push_back("gpt: the groups of a kind in a pipeline stage are not all alike over the NVLink domains and "
                       "servers: " + std::to_string(classes) + " communicators NAME@RANK hold the first group of "
                       "another placement class beside the simulated rank's NAME (the replay prices NAME's calls over "
                       "the slowest of them)");
  return Y;
}

}  // namespace fabricsim::workloads::gpt_detail
