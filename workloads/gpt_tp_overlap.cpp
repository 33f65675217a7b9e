// Transformer Engine's userbuffers settings per GEMM (Megatron-LM's --tp-comm-overlap-cfg, the scenario's
// tp_comm_overlap_cfg object): TE's defaults, the given entries checked as TE checks them, and what a setting
// does to a GEMM's time (GptConfig::ub_sm_factor). Source read: initialize_ub / get_default_config / add_ub in
// transformer_engine/pytorch/module/base.py and CommOverlapCore in
// transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp, both at NVIDIA/TransformerEngine@d0067d0da;
// the YAML is loaded by _initialize_tp_communicators (megatron/training/initialize.py at NVIDIA/Megatron-LM@d98e8a64)
// and handed to initialize_ub as ub_cfgs.
#include <algorithm>
#include <functional>
#include <set>

#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"

namespace fabricsim::workloads {

namespace {

// initialize_ub's default method per GEMM name (its `methods` table).
const std::map<std::string, std::string>& default_methods() {
  static const std::map<std::string, std::string> m = {
      {"qkv_fprop", "ring_exchange"}, {"fc1_fprop", "ring_exchange"}, {"proj_dgrad", "ring_exchange"},
      {"fc2_dgrad", "ring_exchange"}, {"proj_fprop", "pipeline"},     {"fc2_fprop", "pipeline"},
      {"qkv_dgrad", "bulk"},          {"qkv_wgrad", "bulk"},          {"fc1_dgrad", "bulk"},
      {"fc1_wgrad", "bulk"},          {"proj_wgrad", "external"},     {"fc2_wgrad", "external"}};
  return m;
}

// initialize_ub's layers_reduce_scatter_overlap (the others all-gather) and layers_all_gather_overlap (fp8_buf).
bool default_reduce_scatter(const std::string& g) {
  return g == "proj_fprop" || g == "fc2_fprop" || g == "qkv_wgrad" || g == "fc1_wgrad";
}
bool all_gather_buffer(const std::string& g) {
  return g == "qkv_fprop" || g == "qkv_dgrad" || g == "proj_dgrad" || g == "proj_wgrad" || g == "fc1_fprop" ||
         g == "fc1_dgrad" || g == "fc2_dgrad" || g == "fc2_wgrad";
}

UbGemm ub_default(const std::string& g, std::int64_t tp) {
  UbGemm u;
  u.method = default_methods().at(g);
  const bool ring = u.method == "ring_exchange";
  u.is_reduce_scatter = default_reduce_scatter(g);
  u.num_sm = ring ? 1 : 16;
  u.cga_size = ring ? 1 : 2;
  u.set_sm_margin = !ring;
  u.num_splits = ring ? tp : 4;
  u.fp8_buf = all_gather_buffer(g);
  return u;
}

// The SMs a GEMM shares with a userbuffers kernel: H100 SXM's 132 (NVIDIA H100 Tensor Core GPU architecture
// whitepaper), on every GPU (the overlap's SM cost is priced as measured on H100: TE's default num_sm 16 of them).
constexpr double kUbSms = 132.0;

}  // namespace

UbGemm GptConfig::ub(const std::string& gemm) const {
  const auto it = ub_gemms.find(gemm);
  return it != ub_gemms.end() ? it->second : ub_default(gemm, tensor_model_parallel_size);
}

double GptConfig::ub_sm_factor(const std::string& gemm) const {
  const UbGemm u = ub(gemm);
  // CommOverlapCore: _math_sms = set_sm_margin ? sm_count - num_comm_sm : sm_count (comm_gemm_overlap.cpp:143).
  return u.set_sm_margin ? kUbSms / (kUbSms - double(u.num_sm)) : 1.0;
}

// tp_comm_overlap_cfg: checks each entry as Transformer Engine does and fills c.ub_gemms; errors name `where`
// tp_comm_overlap_cfg/<gemm>/<key>.
static void read_tp_comm_overlap_cfg(GptConfig& c, const Json& cfg, const std::string& where) {
  const std::string at = where + " tp_comm_overlap_cfg";
  std::string names;
  for (const auto& [g, m] : default_methods()) names += (names.empty() ? "" : ", ") + g;
  for (auto it = cfg.begin(); it != cfg.end(); ++it) {
    const std::string& g = it.key();
    const std::string here = at + "/" + g;
    if (!default_methods().count(g))
      throw InputError(here, "unknown GEMM '" + g + "' (Transformer Engine's userbuffers GEMMs: " + names + ")");
    if (!it->is_object()) throw InputError(here, "expected an object of userbuffers settings (method, num_sm, ...)");
    UbGemm u = ub_default(g, c.tensor_model_parallel_size);
    for (auto kv = it->begin(); kv != it->end(); ++kv) {
      const std::string& k = kv.key();
      const Json& v = *kv;
      const std::string hk = here + "/" + k;
      auto boolean = [&](bool& out) {
        if (!v.is_boolean()) throw InputError(hk, "expected true or false, got " + v.dump());
        out = v.get<bool>();
      };
      auto count = [&](std::int64_t& out, std::int64_t min) {
        if (!v.is_number_integer() || v.get<std::int64_t>() < min)
          throw InputError(hk, "expected an integer >= " + std::to_string(min) + ", got " + v.dump());
        out = v.get<std::int64_t>();
      };
      if (k == "method") {
        if (!v.is_string()) throw InputError(hk, "expected a string, got " + v.dump());
        u.method = v.get<std::string>();
        if (u.method != "ring_exchange" && u.method != "pipeline" && u.method != "bulk" && u.method != "external")
          throw InputError(hk, "expected ring_exchange, pipeline, bulk or external, got '" + u.method + "'");
      } else if (k == "num_sm") {
        count(u.num_sm, 1);
        if (u.num_sm >= std::int64_t(kUbSms))
          throw InputError(hk, "leaves the GEMM no SM (" + std::to_string(u.num_sm) + " of H100's 132)");
      } else if (k == "cga_size") {
        count(u.cga_size, 1);
      } else if (k == "num_splits") {
        count(u.num_splits, 1);
      } else if (k == "set_sm_margin") {
        boolean(u.set_sm_margin);
      } else if (k == "aggregate") {
        boolean(u.aggregate);
      } else if (k == "atomic_gemm") {
        boolean(u.atomic_gemm);
      } else if (k == "use_ce") {
        boolean(u.use_ce);
      } else if (k == "fp8_buf") {
        boolean(u.fp8_buf);
      } else if (k == "is_reduce_scatter") {
        boolean(u.is_reduce_scatter);
      } else if (k == "pipeline_rs_overlap_first_gemm") {
        bool b;
        boolean(b);
      } else if (k == "comm_priority" || k == "gemm_priority") {
        if (!v.is_number_integer()) throw InputError(hk, "expected an integer, got " + v.dump());
      } else {
        throw InputError(hk, "unknown userbuffers setting '" + k +
                                 "' (expected method, num_sm, cga_size, num_splits, set_sm_margin, aggregate, "
                                 "atomic_gemm, use_ce, fp8_buf, is_reduce_scatter, comm_priority, gemm_priority, "
                                 "pipeline_rs_overlap_first_gemm)");
      }
    }
    // initialize_ub: a qkv / fc1 dgrad given a method other than bulk becomes a reduce-scatter overlap, and its
    // wgrad (whose bulk reduce-scatter it replaces) may not be configured.
    const bool dgrad_rs = (g == "qkv_dgrad" || g == "fc1_dgrad") && it->contains("method") && u.method != "bulk";
    if (dgrad_rs) {
      const std::string w = g.substr(0, 3) + "_wgrad";
      if (cfg.contains(w))
        throw InputError(at + "/" + w, "cannot be configured when " + g + " uses a non-bulk method ('" + u.method +
                                           "'), as Transformer Engine's initialize_ub refuses");
      u.is_reduce_scatter = true;
    }
    // add_ub's checks.
    if (u.method == "pipeline" && !u.is_reduce_scatter)
      throw InputError(here + "/method", "pipeline is not supported for an all-gather GEMM (Transformer Engine's add_ub)");
    const bool ext_gemm = g == "proj_wgrad" || g == "fc2_wgrad";
    if (ext_gemm && u.method != "external")
      throw InputError(here + "/method", "must be external (it overlaps the ring-exchange " + g.substr(0, g.find('_')) +
                                             "_dgrad: Transformer Engine's add_ub), got '" + u.method + "'");
    if (!ext_gemm && u.method == "external")
      throw InputError(here + "/method", "external is only proj_wgrad's and fc2_wgrad's (Transformer Engine's "
                                         "external_gemm_to_overlap)");
    if (u.atomic_gemm && !c.fp8())
      throw InputError(here + "/atomic_gemm", "atomic GEMM overlap needs FP8 GEMMs (precision fp8), as Transformer "
                                              "Engine's add_ub requires");
    if (u.atomic_gemm && u.method == "bulk") u.atomic_gemm = false;  // add_ub: warns and turns it off
    // initialize_ub keeps fp8_buf for the all-gather GEMMs and, of the rest, only a pipeline one asking for it.
    u.fp8_buf = all_gather_buffer(g) || (u.fp8_buf && u.method == "pipeline");
    c.ub_gemms[g] = u;
  }
  // add_ub: an atomic ring-exchange all-gather and its block's reduce-scatter (qkv_fprop / proj_fprop,
  // fc1_fprop / fc2_fprop) must both be atomic ring exchanges.
  for (const auto& [ag, rs] : {std::pair<const char*, const char*>{"qkv_fprop", "proj_fprop"}, {"fc1_fprop", "fc2_fprop"}}) {
    const UbGemm a = c.ub(ag), b = c.ub(rs);
    const bool aa = a.atomic_gemm && a.method == "ring_exchange", bb = b.atomic_gemm && b.method == "ring_exchange";
    if (aa != bb)
      throw InputError(at + "/" + (aa ? rs : ag), std::string("must use atomic_gemm with ring_exchange as ") +
                                                     (aa ? ag : rs) + " does (Transformer Engine's add_ub: the pair "
                                                     "shuffles and un-shuffles the GEMM chunks)");
  }
}

void gpt_detail::check_tp_overlap_settings(GptConfig& c, const std::string& where,
                                           const std::function<void(const std::string&, const std::string&)>& fail) {
  if (!c.tp_comm_overlap_cfg.empty()) read_tp_comm_overlap_cfg(c, Json::parse(c.tp_comm_overlap_cfg), where);
  if (c.tp_comm_overlap_impl == "symmetric_memory") {
    const char* ub_only = !c.tp_comm_overlap_ag          ? "tp_comm_overlap_ag"
                          : !c.tp_comm_overlap_rs        ? "tp_comm_overlap_rs"
                          : !c.tp_comm_bulk_dgrad        ? "tp_comm_bulk_dgrad"
                          : c.tp_comm_overlap_rs_dgrad   ? "tp_comm_overlap_rs_dgrad"
                          : !c.tp_comm_overlap_cfg.empty() ? "tp_comm_overlap_cfg"
                                                           : nullptr;
    if (ub_only)
      fail(ub_only, "is a Transformer Engine userbuffers setting: tp_comm_overlap_impl symmetric_memory (PyTorch's "
                    "async TP) has none");
  }
  // Transformer Engine's LayerNormLinear / Linear: ub_bulk_wgrad and ub_bulk_dgrad hold only without
  // ub_overlap_rs_dgrad (transformer_engine/pytorch/module/layernorm_linear.py at @d0067d0da, __init__).
  if (c.tp_comm_overlap && c.tp_comm_overlap_rs_dgrad) c.tp_comm_bulk_wgrad = c.tp_comm_bulk_dgrad = false;
  if (c.defer_embedding_wgrad_compute) {
    // ModelParallelConfig.__post_init__ (megatron/core/model_parallel_config.py at NVIDIA/Megatron-LM@d98e8a64).
    if (c.pipeline_model_parallel_size == 1)
      fail("defer_embedding_wgrad_compute", "needs pipeline_model_parallel_size > 1 (Megatron-LM: \"Cannot defer "
                                            "embedding wgrad compute when pipeline model parallel is not used\")");
    if (c.dualpipe())
      fail("defer_embedding_wgrad_compute", "is drained by Megatron-LM's 1F1B / interleaved schedules, not DualPipe");
    if (!c.gradient_accumulation_fusion)
      fail("defer_embedding_wgrad_compute", "needs gradient_accumulation_fusion (Megatron-LM: \"Cannot defer embedding "
                                            "wgrad compute when gradient accumulation fusion is not used\")");
    if (!c.torch_compile.empty())
      fail("defer_embedding_wgrad_compute", "is Megatron-LM's (its pipeline schedules drain the deferred GEMMs); "
                                            "torch_compile selects torchtitan's step");
  }
}

}  // namespace fabricsim::workloads
