// ASTRA-sim 1.0 and SimAI/AICB text workloads (grammar and semantics in workloads/importers.hpp).
// Read against astra-sim/astra-sim@07d5d19de827d77890c0c02850f5bcf78bf6ba45 (branch ASTRA-sim-1.0)
// astra-sim/workload/Workload.cc (initialize_workload, decode_involved_dimensions, iterate_*) and
// aliyun/SimAI@120db6a2f026f842956ba2ae24416b839d24267e astra-sim-alibabacloud/astra-sim/workload/Workload.cc
// (header keys model_parallel_NPU_group / ep / pp / vpp / ga / all_gpus / pp_comm, the _EP and _DP_EP comm
// type suffixes selecting MockNccl::GroupType EP / DP_EP, token-wise layer parsing).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "sim/base/error.hpp"
#include "sim/base/input_file.hpp"
#include "sim/base/json_reader.hpp"
#include "sim/base/units.hpp"
#include "workloads/importers.hpp"

namespace fabricsim::workloads {

namespace {

enum class Group { None, Model, Data, Ep, DpEp, All };

std::string num_text(double v) {  // "1e+300", "1.5", for messages
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Layers per file: far above any real workload (AICB writes one line per layer and micro-batch, thousands);
// checked before the layer loop so a huge stated count fails at once.
constexpr std::int64_t kMaxAstraLayers = 1 << 22;

struct Comm {
  bool none = true;
  std::vector<CollOp> ops;  // ALLREDUCEALLTOALL = all_reduce then all_to_all
  Group group = Group::None;
  double bytes = 0;
};

struct Layer {
  std::string name;
  double fwd = 0, ig = 0, wg = 0, upd = 0;
  Comm fc, ic, wc;
  std::string policy;  // HYBRID_CUSTOMIZED: the layer's own policy
  int line = 0;
};

const char* kComm = "NONE, ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, ALLREDUCEALLTOALL or BROADCAST, optionally with _EP or _DP_EP";

bool parse_comm(const std::string& s, Group dflt, Comm& c) {
  c = Comm{};
  if (s == "NONE") return true;
  std::string base = s;
  Group g = dflt;
  auto ends = [&](const std::string& suf) {
    return base.size() > suf.size() && base.compare(base.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (ends("_DP_EP")) {
    base.resize(base.size() - 6);
    g = Group::DpEp;
  } else if (ends("_EP")) {
    base.resize(base.size() - 3);
    g = Group::Ep;
  }
  // Matched by prefix, as SimAI does (ALLREDUCE_ASYNC is an all-reduce on the default group).
  auto starts = [&](const char* p) { return base.rfind(p, 0) == 0; };
  if (starts("ALLREDUCEALLTOALL")) c.ops = {CollOp::AllReduce, CollOp::AllToAll};
  else if (starts("ALLREDUCE")) c.ops = {CollOp::AllReduce};
  else if (starts("ALLGATHER")) c.ops = {CollOp::AllGather};
  else if (starts("REDUCESCATTER")) c.ops = {CollOp::ReduceScatter};
  else if (starts("ALLTOALL")) c.ops = {CollOp::AllToAll};
  else if (starts("BROADCAST")) c.ops = {CollOp::Broadcast};
  else return false;
  c.none = false;
  c.group = g;
  return true;
}

const std::vector<std::string> kPolicies = {"DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "HYBRID_DLRM",
                                            "HYBRID_DLRM_ENHANCED", "HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
                                            "HYBRID_CUSTOMIZED", "MICRO", "DISTRIBUTED_INFERENCE"};

}  // namespace

Trace import_astra_text(const std::string& text, const std::string& file, const ParamMap& params,
                        const std::string& where) {
  // Tokens with their line numbers.
  struct Tok {
    std::string s;
    int line;
  };
  std::vector<std::vector<Tok>> lines;
  {
    std::istringstream in(text);
    std::string l;
    int n = 0;
    while (std::getline(in, l)) {
      ++n;
      std::istringstream ls(l);
      std::vector<Tok> t;
      std::string s;
      while (ls >> s) t.push_back({s, n});
      if (!t.empty()) lines.push_back(std::move(t));
    }
  }
  auto fail = [&](int line, const std::string& what) -> void { throw InputError(file + ":" + std::to_string(line), what); };
  if (lines.empty()) fail(1, "empty workload file");
  const auto& head = lines[0];
  const std::string policy = head[0].s;
  const int hl = head[0].line;
  if (std::find(kPolicies.begin(), kPolicies.end(), policy) == kPolicies.end()) {
    std::string all;
    for (const auto& p : kPolicies) all += (all.empty() ? "" : ", ") + p;
    fail(hl, "unknown parallelism '" + text_excerpt(policy) + "' (expected one of " + all + ")");
  }
  // Header keys.
  std::int64_t mp = 0, ep = 1, pp = 1, all_gpus = 0, pp_comm = 0, dlrm_last = -1;
  std::vector<int> checkpoints, initiates;
  std::vector<std::string> ignored_keys;
  auto head_int = [&](std::size_t i, const std::string& key) -> std::int64_t {
    if (i >= head.size()) fail(hl, "'" + key + "' needs a number after it");
    try {
      return parse_int(head[i].s, key);
    } catch (const InputError&) {
      fail(hl, "'" + key + "' needs an integer, found '" + text_excerpt(head[i].s) + "'");
    }
    return 0;
  };
  for (std::size_t i = 1; i < head.size(); ++i) {
    const std::string& k = head[i].s;
    if (k == "model_parallel_NPU_group:") mp = head_int(++i, k);
    else if (k == "ep:") ep = head_int(++i, k);
    else if (k == "pp:") pp = head_int(++i, k);
    else if (k == "vpp:" || k == "ga:") head_int(++i, k);  // AICB unrolls micro-batches and chunks into the layers
    else if (k == "all_gpus:") all_gpus = head_int(++i, k);
    else if (k == "pp_comm" || k == "pp_comm:") pp_comm = head_int(++i, k);
    else if (k == "DLRM_LAST_BOTTOM_LAYER:") dlrm_last = head_int(++i, k);
    else if (k == "checkpoints:" || k == "checkpoint_initiates:") {
      auto& v = k == "checkpoints:" ? checkpoints : initiates;
      std::int64_t cnt = head_int(++i, k);
      for (std::int64_t j = 0; j < cnt; ++j) {
        const std::int64_t layer = head_int(++i, k);
        if (layer < 0 || layer > kMaxAstraLayers)  // checked against the layer count below; no narrowing first
          fail(hl, "'" + k + "' layer " + std::to_string(layer) + " is not a layer index");
        v.push_back(static_cast<int>(layer));
      }
    } else if ((policy == "HYBRID_DLRM" || policy == "HYBRID_DLRM_ENHANCED") && i == 1) {
      dlrm_last = head_int(i, "last bottom layer");
    } else if (k.size() > 1 && k.back() == ':' && i + 1 < head.size()) {
      ignored_keys.push_back(text_excerpt(k) + " " + text_excerpt(head[++i].s));  // a key this importer does not model (SimAI adds keys over time)
    } else {
      fail(hl, "unknown header token '" + text_excerpt(k) + "' (expected model_parallel_NPU_group:, ep:, pp:, vpp:, ga:, all_gpus:, "
               "checkpoints:, checkpoint_initiates:, pp_comm)");
    }
  }
  if (mp < 0 || ep < 1 || pp < 1 || all_gpus < 0 || pp_comm < 0) fail(hl, "header counts must be >= 1");
  // Group sizes and the rank count are checked against the limit before any product or narrowing.
  for (auto [v, key] : {std::pair{mp, "model_parallel_NPU_group:"}, {ep, "ep:"}, {pp, "pp:"}, {all_gpus, "all_gpus:"}})
    if (v > kMaxImportedWorld)
      fail(hl, std::string(key) + " " + std::to_string(v) + " is above the " + std::to_string(kMaxImportedWorld) +
                   " ranks an imported workload may have");
  if (!(double(pp_comm) <= double(kMaxSize))) fail(hl, "pp_comm is above 2^60 bytes");
  ParamReader pr(params, where);
  std::int64_t npus = pr.integer("npus", all_gpus, 0);
  const double cycle_ns = pr.number("cycle_ns", 1.0, 0);
  if (npus > kMaxImportedWorld)
    pr.fail("npus", "expected at most " + std::to_string(kMaxImportedWorld) + " ranks, found " + std::to_string(npus));
  if (!(cycle_ns <= kMaxTime * 1e9)) pr.fail("cycle_ns", "expected at most 1e18 ns per cycle");
  const std::string dims_s = pr.string("dims", "");
  const std::int64_t gpus_per_host = pr.integer("gpus_per_host", 8, 1);
  pr.finish();
  if (npus < 1)
    throw InputError(where + " npus", "the workload's rank count is not in " + file +
                                          " (no all_gpus: on line 1); give it as params npus / --param npus=N");
  if (all_gpus && npus != all_gpus)
    ignored_keys.push_back("all_gpus: " + std::to_string(all_gpus) + " (npus " + std::to_string(npus) + " given)");
  // Layer count and layers (token stream).
  if (lines.size() < 2) fail(hl, "missing the layer count on line 2");
  std::int64_t nlayers = 0;
  try {
    nlayers = parse_int(lines[1][0].s, "layer count");
  } catch (const InputError&) {
    fail(lines[1][0].line, "expected the layer count, found '" + text_excerpt(lines[1][0].s) + "'");
  }
  if (nlayers < 1 || nlayers > kMaxAstraLayers)
    fail(lines[1][0].line, "expected a layer count in [1, " + std::to_string(kMaxAstraLayers) + "]");
  std::vector<Tok> toks(lines[1].begin() + 1, lines[1].end());
  for (std::size_t i = 2; i < lines.size(); ++i) toks.insert(toks.end(), lines[i].begin(), lines[i].end());
  const std::size_t per = policy == "HYBRID_CUSTOMIZED" ? 13 : 12;
  std::size_t at = 0;
  std::vector<Layer> layers;
  const bool data_like = policy == "DATA" || policy == "MICRO";
  for (std::int64_t i = 0; i < nlayers; ++i) {
    if (at + per > toks.size())
      fail(toks.empty() ? lines.back()[0].line : toks.back().line,
           "expected " + std::to_string(nlayers) + " layers of " + std::to_string(per) + " fields, found " + std::to_string(i) +
               " complete layer(s)" + (per == 13 ? " (HYBRID_CUSTOMIZED layers end with their policy)" : ""));
    Layer L;
    L.line = toks[at].line;
    L.name = toks[at].s;
    auto num = [&](std::size_t k, const char* what) {
      const Tok& t = toks[at + k];
      double v = 0;
      try {
        v = parse_double(t.s, what);
      } catch (const InputError&) {
        fail(t.line, std::string("layer '") + text_excerpt(L.name) + "': expected " + what + " (a number), found '" +
                         text_excerpt(t.s) + "'");
      }
      if (v < 0) fail(t.line, std::string("layer '") + text_excerpt(L.name) + "': " + what + " must be >= 0");
      return v;
    };
    // Compute times are cycles: cycles x cycle_ns must stay within the time range (1e9 s); sizes within 2^60 bytes.
    auto cycles = [&](std::size_t k, const char* what) {
      const double v = num(k, what);
      if (!(v * cycle_ns / 1e9 <= kMaxTime))
        fail(toks[at + k].line, std::string("layer '") + text_excerpt(L.name) + "': " + what + " of " + text_excerpt(toks[at + k].s) +
                                    " cycles x " + num_text(cycle_ns) + " ns is beyond 1e9 s");
      return v;
    };
    auto bytes = [&](std::size_t k, const char* what) {
      const double v = num(k, what);
      if (!(v <= double(kMaxSize))) fail(toks[at + k].line, std::string("layer '") + text_excerpt(L.name) + "': " + what + " is above 2^60 bytes");
      return v;
    };
    auto comm = [&](std::size_t k, Group dflt, Comm& c, const char* what) {
      if (!parse_comm(toks[at + k].s, dflt, c))
        fail(toks[at + k].line, std::string("layer '") + text_excerpt(L.name) + "': unknown " + what + " communication type '" +
                                    text_excerpt(toks[at + k].s) + "' (expected " + kComm + ")");
    };
    L.fwd = cycles(2, "forward compute time");
    comm(3, Group::Model, L.fc, "forward");
    L.fc.bytes = bytes(4, "forward bytes");
    L.ig = cycles(5, "input-gradient compute time");
    comm(6, Group::Model, L.ic, "input-gradient");
    L.ic.bytes = bytes(7, "input-gradient bytes");
    L.wg = cycles(8, "weight-gradient compute time");
    comm(9, Group::Data, L.wc, "weight-gradient");
    L.wc.bytes = bytes(10, "weight-gradient bytes");
    L.upd = cycles(11, "update time");
    if (per == 13) {
      L.policy = toks[at + 12].s;
      if (L.policy == "HYBRID_CUSTOMIZED" ||
          std::find(kPolicies.begin(), kPolicies.end(), L.policy) == kPolicies.end())
        fail(toks[at + 12].line, "layer '" + text_excerpt(L.name) + "': unknown layer parallelism '" + text_excerpt(L.policy) +
                                     "' (expected DATA, MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, ...)");
    }
    (void)data_like;
    layers.push_back(L);
    at += per;
  }
  if (at != toks.size())  // ASTRA-sim reads the stated number of layers and stops; said in the notes
    ignored_keys.push_back(std::to_string(toks.size() - at) + " token(s) after the " + std::to_string(nlayers) +
                           " layers, from line " + std::to_string(toks[at].line));
  for (int c : checkpoints)
    if (c < 0 || c >= nlayers) fail(hl, "checkpoint layer " + std::to_string(c) + " outside [0, " + std::to_string(nlayers) + ")");
  for (int c : initiates)
    if (c < 0 || c >= nlayers) fail(hl, "checkpoint_initiates layer " + std::to_string(c) + " outside [0, " + std::to_string(nlayers) + ")");

  // Group sizes.
  const bool transformer = policy.rfind("HYBRID_TRANSFORMER", 0) == 0;
  std::int64_t d0 = 0;  // first network dimension (HYBRID_DATA_MODEL / HYBRID_MODEL_DATA / CUSTOMIZED)
  if (!dims_s.empty()) {
    std::stringstream ss(dims_s);
    std::string tok;
    std::int64_t prod = 1;
    bool first = true;
    while (std::getline(ss, tok, ',')) {
      std::int64_t v = 0;
      try {
        v = parse_int(tok, "dims");
      } catch (const InputError&) {
        throw InputError(where + " dims", "expected comma-separated NPU counts per network dimension, e.g. 8,8");
      }
      if (v < 1 || v > npus) throw InputError(where + " dims", "expected counts in [1, npus " + std::to_string(npus) + "]");
      if (first) d0 = v;
      first = false;
      prod *= v;
      if (prod > npus) throw InputError(where + " dims", "dims multiply to more than npus " + std::to_string(npus));
    }
    if (prod != npus) throw InputError(where + " dims", "dims multiply to " + std::to_string(prod) + ", not npus " + std::to_string(npus));
  } else {
    d0 = std::min<std::int64_t>(gpus_per_host, npus);
    if (npus % d0) d0 = npus;
  }
  std::int64_t tp = 1, dp = npus;
  if (transformer) {
    tp = mp > 0 ? mp : 1;
    if (npus % (tp * pp))
      throw InputError(file + ":" + std::to_string(hl), "npus " + std::to_string(npus) + " is not a multiple of model_parallel_NPU_group " +
                                                         std::to_string(tp) + " x pp " + std::to_string(pp));
    dp = npus / (tp * pp);
    if (dp % ep)
      throw InputError(file + ":" + std::to_string(hl), "the data-parallel size " + std::to_string(dp) + " is not a multiple of ep " +
                                                         std::to_string(ep));
  }

  Trace tr;
  tr.name = "astra:" + policy;
  tr.world_size = static_cast<std::int32_t>(npus);
  std::map<std::string, std::int32_t> comm_of;
  auto make_comm = [&](const std::string& name, std::int64_t size, std::int64_t stride, const char* cat,
                       std::int64_t mirrors, std::int64_t mirror_stride) -> std::int32_t {
    if (size <= 1) return -1;
    auto it = comm_of.find(name);
    if (it != comm_of.end()) return it->second;
    Communicator c;
    c.name = name;
    for (std::int64_t k = 0; k < size; ++k) c.ranks.push_back(static_cast<std::int32_t>(k * stride));
    c.category = cat;
    // Copies of a data-parallel group on the same hosts run the same collective at the same time (their NIC
    // load); as in the GPT generator, min(model-parallel size, GPUs per host) - 1 of them.
    c.mirrors = static_cast<std::int32_t>(mirrors);
    c.mirror_stride = static_cast<std::int32_t>(mirror_stride);
    tr.comms.push_back(c);
    return comm_of[name] = static_cast<std::int32_t>(tr.comms.size() - 1);
  };
  auto dp_mirrors = [&](std::int64_t stride) { return std::min(stride, gpus_per_host) - 1; };
  // The communicator of a collective of `Group` g under `pol` (the layer's policy).
  auto comm_for = [&](const std::string& pol, Group g) -> std::int32_t {
    if (g == Group::None) return -1;
    if (pol == "MICRO") return make_comm("all", npus, 1, "dp", 0, 1);
    if (transformer || pol.rfind("HYBRID_TRANSFORMER", 0) == 0) {
      switch (g) {
        case Group::Model: return make_comm("tp", tp, 1, "tp", 0, 1);
        case Group::Data: return make_comm("dp", dp, tp, "dp", dp_mirrors(tp), 1);
        case Group::Ep: return make_comm("ep", ep, tp, "ep", dp_mirrors(tp), 1);
        case Group::DpEp: return make_comm("dp_ep", dp / ep, tp * ep, "dp", dp_mirrors(tp), 1);
        default: return make_comm("all", npus, 1, "dp", 0, 1);
      }
    }
    if (g == Group::Ep || g == Group::DpEp)
      throw InputError(file, "_EP / _DP_EP communication types need a HYBRID_TRANSFORMER policy with ep:");
    if (g == Group::All) return make_comm("all", npus, 1, "dp", 0, 1);
    if (pol == "DATA") return g == Group::Data ? make_comm("all", npus, 1, "dp", 0, 1) : -1;
    if (pol == "MODEL" || pol == "DISTRIBUTED_INFERENCE")
      return g == Group::Model ? make_comm("all.model", npus, 1, "tp", 0, 1) : -1;
    // decode_involved_dimensions: HYBRID_DATA_MODEL runs its model-parallel collectives in dimension 0 and
    // its data-parallel ones across the others; HYBRID_MODEL_DATA the reverse.
    const bool data_first = pol == "HYBRID_MODEL_DATA";
    if (pol == "HYBRID_DATA_MODEL" || pol == "HYBRID_MODEL_DATA") {
      // dimension 0: d0 consecutive ranks; the other dimensions: npus / d0 ranks at stride d0.
      const bool inner = (g == Group::Data) == data_first;
      return inner ? make_comm(g == Group::Data ? "dp.dim0" : "mp.dim0", d0, 1, g == Group::Data ? "dp" : "tp", 0, 1)
                   : make_comm(g == Group::Data ? "dp.outer" : "mp.outer", npus / d0, d0, g == Group::Data ? "dp" : "tp",
                               g == Group::Data ? dp_mirrors(d0) : 0, 1);
    }
    // HYBRID_DLRM(_ENHANCED): layers other than the embedding are data parallel.
    return g == Group::Data ? make_comm("all", npus, 1, "dp", 0, 1) : -1;
  };

  RankTrace rt;
  rt.rank = 0;
  rt.streams = {"compute", "comm", "comm.wg", "comm.embedding"};
  std::int64_t chain = -1;
  auto push = [&](Op op, bool advance) {
    if (chain >= 0) op.deps.push_back(static_cast<std::uint32_t>(chain));
    rt.ops.push_back(std::move(op));
    const auto idx = static_cast<std::int64_t>(rt.ops.size() - 1);
    if (advance) chain = idx;
    return static_cast<std::uint32_t>(idx);
  };
  auto compute = [&](const std::string& name, double cycles) {
    Op op;
    op.kind = OpKind::Compute;
    op.name = name;
    op.category = "compute";
    op.duration_s = cycles * cycle_ns * 1e-9;  // cycles (ASTRA-sim 1.0, 1 GHz) / ticks (SimAI, ns)
    push(op, true);
  };
  // Issues the collective(s) of `c`; returns the last op index or -1. stream 1 blocks the chain.
  auto collective = [&](const std::string& name, const Comm& c, const std::string& pol, std::uint16_t stream,
                        bool blocking, Group override_group = Group::None) -> std::int64_t {
    if (c.none || c.bytes <= 0) return -1;
    const std::int32_t cm = comm_for(pol, override_group == Group::None ? c.group : override_group);
    if (cm < 0) return -1;
    std::int64_t last = -1;
    for (CollOp o : c.ops) {
      Op op;
      op.kind = OpKind::Collective;
      op.stream = stream;
      op.name = name;
      op.coll = o;
      op.comm = cm;
      op.bytes = c.bytes;
      op.category = o == CollOp::AllToAll && tr.comms[cm].category != "ep" ? "all_to_all" : tr.comms[cm].category;
      if (last >= 0) op.deps.push_back(static_cast<std::uint32_t>(last));
      last = push(op, blocking);
    }
    return last;
  };
  auto pol_of = [&](const Layer& L) { return L.policy.empty() ? policy : L.policy; };
  const bool dlrm = policy.rfind("HYBRID_DLRM", 0) == 0;
  std::vector<std::uint32_t> wg_ops;
  if (policy == "MICRO") {
    for (const auto& L : layers) collective(L.name + ".wg.comm", L.wc, policy, 1, true);
  } else if (policy == "DISTRIBUTED_INFERENCE") {  // the forward pass only
    for (const auto& L : layers) {
      compute(L.name + ".fwd", L.fwd);
      collective(L.name + ".fwd.comm", L.fc, policy, 1, true);
    }
  } else {
    // Forward.
    std::int64_t emb_fwd = -1;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const Layer& L = layers[i];
      if (dlrm && emb_fwd >= 0 && static_cast<std::int64_t>(i) == dlrm_last + 1) {
        Op join;  // the top MLP needs the embeddings' all-to-all
        join.kind = OpKind::Compute;
        join.name = "embedding.fwd.wait";
        join.category = "compute";
        join.duration_s = 0;
        join.deps.push_back(static_cast<std::uint32_t>(emb_fwd));
        push(join, true);
      }
      compute(L.name + ".fwd", L.fwd);
      if (dlrm && i == 0) emb_fwd = collective(L.name + ".fwd.comm", L.fc, policy, 3, false, Group::All);
      else collective(L.name + ".fwd.comm", L.fc, pol_of(L), 1, true);
    }
    // Backward.
    std::int64_t emb_ig = -1;
    for (std::size_t r = layers.size(); r-- > 0;) {
      const Layer& L = layers[r];
      if (std::find(initiates.begin(), initiates.end(), static_cast<int>(r)) != initiates.end()) {
        // Recompute the forward from the nearest checkpoint at or below this layer.
        int from = 0;
        for (int c : checkpoints)
          if (c <= static_cast<int>(r)) from = std::max(from, c);
        for (std::size_t k = static_cast<std::size_t>(from); k <= r; ++k) {
          compute(layers[k].name + ".fwd.recompute", layers[k].fwd);
          collective(layers[k].name + ".fwd.recompute.comm", layers[k].fc, pol_of(layers[k]), 1, true);
        }
      }
      compute(L.name + ".ig", L.ig);
      // HYBRID_DLRM: the embedding's input-gradient all-to-all starts once the first top layer's input
      // gradient is computed (iterate_hybrid_parallel_DLRM) and overlaps the bottom MLP's backward.
      if (dlrm && static_cast<std::int64_t>(r) == dlrm_last + 1)
        emb_ig = collective(layers[0].name + ".ig.comm", layers[0].ic, policy, 3, false, Group::All);
      if (!(dlrm && r == 0)) collective(L.name + ".ig.comm", L.ic, pol_of(L), 1, true);
      compute(L.name + ".wg", L.wg);
      std::int64_t w = collective(L.name + ".wg.comm", L.wc, pol_of(L), 2, false, dlrm && r == 0 ? Group::All : Group::None);
      if (w >= 0) wg_ops.push_back(static_cast<std::uint32_t>(w));
    }
    if (emb_ig >= 0) wg_ops.push_back(static_cast<std::uint32_t>(emb_ig));
    double upd = 0;
    for (const auto& L : layers) upd += L.upd;
    if (!(upd * cycle_ns / 1e9 <= kMaxTime))
      fail(hl, "the layers' update times add up to more than 1e9 s (" + num_text(upd) + " cycles x " +
                   num_text(cycle_ns) + " ns)");
    Op u;
    u.kind = OpKind::Compute;
    u.name = "update";
    u.category = "compute";
    u.duration_s = upd * cycle_ns * 1e-9;
    u.deps = wg_ops;
    push(u, true);
  }
  if (rt.ops.empty()) {
    Op z;
    z.kind = OpKind::Compute;
    z.name = "empty";
    z.category = "compute";
    z.duration_s = 0;
    push(z, true);
  }
  tr.ranks.push_back(std::move(rt));
  char cyc[32];
  std::snprintf(cyc, sizeof cyc, "%g", cycle_ns);
  std::string groups;
  for (const auto& c : tr.comms) groups += " " + c.name + "=" + std::to_string(c.ranks.size());
  tr.notes.push_back("astra: " + policy + " workload, " + std::to_string(nlayers) + " layers; rank 0 of " +
                     std::to_string(npus) + " simulated, the others run the same program; groups:" +
                     (groups.empty() ? std::string(" none") : groups) + "; 1 cycle = " + cyc + " ns" +
                     (pp > 1 ? "; pp " + std::to_string(pp) + ": every stage runs this layer list (as in SimAI, whose "
                               "Workload.cc reads pp_comm but sends nothing between stages), data-parallel groups are "
                               "npus / (TP x pp)" + (pp_comm ? "; pp_comm " + std::to_string(pp_comm) + " bytes not sent" : std::string())
                            : std::string()));
  if (!ignored_keys.empty()) {
    std::string k;
    for (const auto& x : ignored_keys) k += (k.empty() ? "" : ", ") + x;
    tr.notes.push_back("astra: not used: " + k);
  }
  check_trace(tr, file);
  return tr;
}

Trace import_astra_file(const std::string& path, const ParamMap& params, const std::string& where) {
  const std::string text = read_input_file(path);
  // A compressed or binary file (PARAM ships PyTorch traces as .json.gz) is named as such instead of being
  // parsed as a workload line full of bytes.
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f && static_cast<unsigned char>(text[1]) == 0x8b)
    throw InputError(path, "a gzip-compressed file: decompress it first (gunzip); fabricsim reads Chakra .et/JSON, "
                           "ASTRA-sim/SimAI text and fabricsim traces");
  if (const auto nul = text.find('\0'); nul != std::string::npos && nul < 4096)
    throw InputError(path, "a binary file, not ASTRA-sim/SimAI workload text (a Chakra .et trace is given by its rank "
                           "PREFIX, for PREFIX.0.et, PREFIX.1.et, ...)");
  return import_astra_text(text, path, params, where);
}

Trace import_chakra_file(const std::string& path, const ParamMap& params, const std::string& where) {
  return import_chakra(path, chakra_options_from_params(params, where));
}

}  // namespace fabricsim::workloads
