// Calibration defaults (each constant cites its source) and strict JSON load/save.
//
// Sources:
//  [NCCL-T] NVIDIA/nccl src/graph/tuning.cc @ 5067397c (ncclTunerConstantsDefaults: baseLatencies,
//           hwLatencies; ncclTopoTuneModel: protocol/algorithm bandwidth factors), read, not copied.
//  [NCCL-H] NVIDIA/nccl src/graph/topo.h @ 5067397c (SM*_NVLINK_BW, PCI_BW: NCCL's modelled usable
//           bandwidth per link) and src/include/device.h / src/init.cc (NCCL_STEPS, buffer sizes).
//  [NCCL-T28] NVIDIA/nccl src/graph/tuning.cc @ tag v2.8.4-1 (baseLat, hwLat, Ring LL busBw factor), the
//           same rows checked unchanged through tag v2.17.1-1. Read, not copied.
//  [LOG-*]  /work/shared/data/nccl-tests/<name>.csv (copied in docs/calibration.md with the derivation).
//  [HW]     /work/shared/data/hardware/hardware_specs.json: statements by NVIDIA engineers in nccl-tests
//           issues, with their quotes (copied with provenance in tests/data/hardware/).
//  [EXT-aws-p5] tests/data/external/aws_p5_h100_1node_8gpu_all_reduce.json: an nccl-tests all_reduce sweep
//           on one AWS p5.48xlarge (8x H100), transcribed with its provenance (tests/data/external/README.md).
//           Not one of the shared logs: it only sets NVLS defaults, and leave-one-out never sees it.
#include "models/calibration.hpp"

#include <cmath>

#include "models/calibration_params.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace fabricsim::models {

const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::Ring: return "ring";
    case Algorithm::Tree: return "tree";
    case Algorithm::Nvls: return "nvls";
    case Algorithm::NvlsTree: return "nvls_tree";
    case Algorithm::CollNet: return "collnet";
    case Algorithm::Pat: return "pat";
    case Algorithm::Direct: return "direct";
    case Algorithm::Pairwise: return "pairwise";
    case Algorithm::Hierarchical: return "hierarchical";
  }
  return "?";
}

const char* to_string(Protocol p) {
  switch (p) {
    case Protocol::Simple: return "simple";
    case Protocol::LL: return "ll";
    case Protocol::LL128: return "ll128";
  }
  return "?";
}

namespace {
// The value of `all` whose to_string is `s`; false (out untouched) when none is.
template <class E, std::size_t N>
bool parse_named(const std::string& s, const std::array<E, N>& all, E& out) {
  for (E e : all)
    if (s == to_string(e)) {
      out = e;
      return true;
    }
  return false;
}
}  // namespace

bool parse_algorithm(const std::string& s, Algorithm& out) { return parse_named(s, kAllAlgorithms, out); }

bool parse_protocol(const std::string& s, Protocol& out) { return parse_named(s, kAllProtocols, out); }

const AlgoProtoParams& Calibration::of(Algorithm a, Protocol p) const {
  auto it = algo.find({a, p});
  if (it == algo.end())
    throw InputError("calibration '" + name + "'",
                     std::string("no parameters for algorithm ") + to_string(a) + " with protocol " + to_string(p) +
                         " (that protocol does not exist for this algorithm)");
  return it->second;
}

namespace {
const ParamDecl& declared_param(std::string_view key, const std::string& calibration) {
  const ParamDecl* d = find_calibration_param(key);
  if (!d)
    throw InputError("calibration '" + calibration + "'", "no parameter named '" + std::string(key) +
                                                              "' (fabricsim calibrate --list-params)");
  return *d;
}
}  // namespace

double Calibration::factor(std::string_view key) const {
  const double v = factors.*declared_param(key, name).field;
  if (std::isnan(v)) throw InputError("calibration '" + name + "'", "factor '" + std::string(key) + "' is not set");
  return v;
}

bool Calibration::has_factor(std::string_view key) const {
  const ParamDecl* d = find_calibration_param(key);
  return d && !std::isnan(factors.*d->field);
}

void Calibration::set_factor(std::string_view key, double value) { factors.*declared_param(key, name).field = value; }

std::map<std::string, double> Calibration::named_factors() const {
  std::map<std::string, double> out;
  for (const auto& d : calibration_params())
    if (!std::isnan(factors.*d.field)) out[d.name] = factors.*d.field;
  return out;
}

double Calibration::nvlink_efficiency(const std::string& gpu_model) const {
  // The longest GPU prefix of the model name wins ("a100-80gb" -> a100); other GPUs take the default.
  static const std::pair<std::string_view, double CalibrationFactors::*> kByGpu[] = {
      {"v100", &CalibrationFactors::nvlink_efficiency_v100},   {"a100", &CalibrationFactors::nvlink_efficiency_a100},
      {"h100", &CalibrationFactors::nvlink_efficiency_h100},   {"h200", &CalibrationFactors::nvlink_efficiency_h200},
      {"b200", &CalibrationFactors::nvlink_efficiency_b200},   {"gb200", &CalibrationFactors::nvlink_efficiency_gb200}};
  double CalibrationFactors::*best = &CalibrationFactors::nvlink_efficiency_default;
  std::size_t best_len = 0;
  for (const auto& [prefix, field] : kByGpu)
    if (prefix.size() > best_len && std::string_view(gpu_model).substr(0, prefix.size()) == prefix) {
      best = field;
      best_len = prefix.size();
    }
  return factors.*best;
}

namespace {
constexpr double us = 1e-6;

void set(Calibration& c, Algorithm a, Protocol p, double base_us, double nvl_step_us, double net_step_us,
         double eff) {
  c.algo[{a, p}] = AlgoProtoParams{base_us * us, nvl_step_us * us, net_step_us * us, eff};
}
}  // namespace

Calibration default_calibration() {
  Calibration c;
  c.name = "default";
  c.source =
      "NCCL src/graph/tuning.cc + topo.h @5067397c (latencies, protocol/algorithm factors, NVLink usable "
      "bandwidth) and /work/shared/data/nccl-tests logs (network and NVLS efficiency); see "
      "docs/calibration.md";
  // Link kinds: neutral. The topology presets carry nominal bandwidth and latency; the achievable
  // fraction is applied per transfer by build_schedule (nvlink_efficiency.*, network_efficiency,
  // pcie_efficiency below), so the engine must not scale capacities a second time.
  for (auto& l : c.link) l = LinkKindParams{0.0, 1.0};

  // Latencies: [NCCL-T] baseLatencies (once per call) and hwLatencies (per step) in microseconds,
  // NVLINK row for steps inside an NVLink domain and NET row for steps that cross the network.
  // Protocol efficiencies: [NCCL-T] ncclTopoTuneModel: Ring LL busBw*0.5 (LL lines carry 4 data bytes in
  // 8), Ring LL128 busBw*0.92 (comment there: ~120/128), Simple 1.0.
  //                                     base   nvl-step  net-step  efficiency
  set(c, Algorithm::Ring, Protocol::LL, 6.6, 0.6, 2.7, 0.5);
  set(c, Algorithm::Ring, Protocol::LL128, 14.0, 1.9, 4.0, 0.92);
  set(c, Algorithm::Ring, Protocol::Simple, 8.4, 3.4, 14.0, 1.0);
  // Tree: [NCCL-T] baseLatencies Tree row, hwLatencies Tree rows; bandwidth: Tree LL busBw/3.8, Tree LL128
  // 120/128 across nodes; Simple 1.0 (the all_reduce-specific 0.92 is tree_efficiency below).
  set(c, Algorithm::Tree, Protocol::LL, 6.8, 0.6, 5.0, 1.0 / 3.8);
  set(c, Algorithm::Tree, Protocol::LL128, 14.0, 1.25, 8.5, 120.0 / 128.0);
  set(c, Algorithm::Tree, Protocol::Simple, 8.4, 4.0, 14.0, 1.0);
  // NVLS: Simple only. NCCL's own model ([NCCL-T]) charges hwLatencies[NVLINK][NVLS][Simple] = 25 us once
  // per call and NET NVLS 18 us once more across nodes (kept: per-network-step latency, one network step per
  // call). Its kernel, though, works in loops of 16 channels x 8 heads x a 16-128 KiB chunk that shrinks for
  // smaller calls (tuner.hpp nccl_nvls_loops), and real sweeps pay a cost per loop that NCCL's model does not
  // have: the time per MiB of an 8x H100 all_reduce falls from ~5.9 us at 16 KiB chunks to ~3.8 us at 128 KiB
  // (docs/calibration.md "NVLS loops"). So the per-step latency here is per NVLS loop, and base, per-loop
  // latency and nvls_efficiency (below) are one fit of this model to the NVLS sizes of [EXT-aws-p5]
  // (`fabricsim calibrate --min-bytes 2M tests/data/external/aws_p5_h100_1node_8gpu_all_reduce.json`; not
  // one of the shared logs, so no leave-one-out prediction starts from its own held-out data): base 18.7 us,
  // 5.78 us per loop (in-sample 2-16384 MiB: median 2.7 %, p90 4.8 %).
  set(c, Algorithm::Nvls, Protocol::Simple, 18.7, 5.78, 18.0, 1.0);
  // NVLS_TREE (multi-host all_reduce, Simple only; collectives.cpp build_nvls_tree): inside the host the NVLS
  // kernel's loops, so the NVLS fit above (base 18.7 us, 5.78 us per NCCL loop on the NVLink hops; not refitted
  // on a multi-host log; the tree hops pay the same per-loop cost); between hosts [NCCL-T]
  // hwLatencies[NET][NVLS_TREE][Simple] = 20.9 us per tree level and direction, once per call as NCCL's model
  // has it (intraLat + 2 log2(nNodes) interLat; 14 us in NCCL 2.19-2.26, tuning.cc at v2.19.3-1 .. v2.26.2-1).
  set(c, Algorithm::NvlsTree, Protocol::Simple, 18.7, 5.78, 20.9, 1.0);
  // CollNet (Direct): [NCCL-T] Simple only; baseLatency 0, hwLatencies NVLINK 3.7, NET 31 us.
  set(c, Algorithm::CollNet, Protocol::Simple, 0.0, 3.7, 31.0, 1.0);
  // PAT: [NCCL-T] Simple only; baseLatency 8.0, hwLatencies NVLINK 4.0, NET 14 us.
  set(c, Algorithm::Pat, Protocol::Simple, 8.0, 4.0, 14.0, 1.0);
  // Direct / pairwise all-to-all and send/recv: NCCL's tuning table has no p2p row; p2p runs the Simple
  // protocol (LL only below NCCL_P2P_LL_THRESHOLD), so we reuse [NCCL-T]'s Ring latencies.
  // Hierarchical (intra-node ring + inter-node ring on the rails): [NCCL-T] Ring rows, as above.
  for (Algorithm a : {Algorithm::Direct, Algorithm::Pairwise})
    for (Protocol p : {Protocol::Simple, Protocol::LL}) c.algo[{a, p}] = c.algo.at({Algorithm::Ring, p});
  for (Protocol p : {Protocol::LL, Protocol::LL128, Protocol::Simple})
    c.algo[{Algorithm::Hierarchical, p}] = c.algo.at({Algorithm::Ring, p});

  // Named factors (c.factors): their defaults are declared once, with unit, range and citation, in
  // models/calibration_params.cpp (derivations in docs/calibration.md "Named factors"). Keys without a
  // default (compute.*) stay unset so that the scenario's compute preset applies.

  return c;
}

double host_channel_launch_s(const Calibration& c, int gpus_per_thread) {
  return std::max(1, gpus_per_thread) * c.factors.channel_launch_s;
}

double host_launch_floor_s(const Calibration& c, int gpus_per_thread, int channels) {
  return std::max(1, gpus_per_thread) *
         (c.factors.kernel_launch_s + std::max(0, channels - 1) * c.factors.channel_launch_s);
}

std::vector<NcclEra> default_nccl_eras() {
  // NCCL 2.8 to 2.17: [NCCL-T28] baseLat and hwLat differ from the current table, and Ring LL's bandwidth
  // is busBw / 4 (all_reduce, or any multi-node run; busBw / 3 for single-node all_gather, reduce_scatter,
  // broadcast: one value per (algorithm, protocol) here, so the all_reduce one). The baseLat Tree/Ring
  // rows, the NVLINK and NET hwLat Tree/Ring rows and the LL factor are identical in v2.8.4-1 through
  // v2.17.1-1 (checked tag by tag); v2.18 changed them. CollNet, NVLS and PAT keep the current rows
  // (NVLS/PAT did not exist before 2.17/2.23; CollNet's row changed inside the range).
  std::vector<NcclEra> out;
  {
    NcclEra e;
    e.name = "2.8-2.17";
    e.from_code = 208;
    e.until_code = 218;
    auto put = [&](Algorithm a, Protocol p, double base_us, double nvl_us, double net_us, double eff) {
      e.algo[{a, p}] = AlgoProtoParams{base_us * us, nvl_us * us, net_us * us, eff};
    };
    //                                          base  nvl-step net-step efficiency
    put(Algorithm::Ring, Protocol::LL, 3.6, 0.47, 2.7, 0.25);
    put(Algorithm::Ring, Protocol::LL128, 10.0, 1.9, 4.0, 0.92);
    put(Algorithm::Ring, Protocol::Simple, 8.4, 3.4, 9.6, 1.0);
    // Tree: baseLat {4.4, 4.4, 0}; hwLat NVLINK {.52, 1.25, 28}, NET {5.0, 8.5, 28}; LL busBw / 3.8,
    // LL128 0.915 across nodes (7/9 inside one node; the multi-node value here, as in the current table).
    put(Algorithm::Tree, Protocol::LL, 4.4, 0.52, 5.0, 1.0 / 3.8);
    put(Algorithm::Tree, Protocol::LL128, 4.4, 1.25, 8.5, 0.915);
    put(Algorithm::Tree, Protocol::Simple, 0.0, 28.0, 28.0, 1.0);
    // p2p and fabricsim's hierarchical all_reduce reuse the era's Ring rows, as the current table does.
    for (Algorithm a : {Algorithm::Direct, Algorithm::Pairwise, Algorithm::Hierarchical}) {
      put(a, Protocol::LL, 3.6, 0.47, 2.7, 0.25);
      put(a, Protocol::Simple, 8.4, 3.4, 9.6, 1.0);
    }
    put(Algorithm::Hierarchical, Protocol::LL128, 10.0, 1.9, 4.0, 0.92);
    out.push_back(std::move(e));
  }
  return out;
}

int nccl_version_code(const std::string& v) {
  std::size_t i = 0;
  while (i < v.size() && !std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
  std::size_t j = i;
  while (j < v.size() && std::isdigit(static_cast<unsigned char>(v[j]))) ++j;
  if (i == j || j - i > 6) return -1;
  const std::string first = v.substr(i, j - i);
  if (j < v.size() && v[j] == '.') {
    std::size_t k = j + 1;
    while (k < v.size() && std::isdigit(static_cast<unsigned char>(v[k]))) ++k;
    if (k == j + 1 || k - j - 1 > 4) return -1;
    return std::stoi(first) * 100 + std::stoi(v.substr(j + 1, k - j - 1));
  }
  if (first.size() == 5) return std::stoi(first) / 100;  // 22602 -> 2.26 (NCCL_VERSION_CODE >= 2.9)
  return -1;
}

int nccl_era_index(const Calibration& c, int code) {
  if (code < 0) return -1;
  for (std::size_t i = 0; i < c.nccl_eras.size(); ++i)
    if (code >= c.nccl_eras[i].from_code && code < c.nccl_eras[i].until_code) return static_cast<int>(i);
  return -1;
}

Calibration for_nccl_version(const Calibration& c, const std::string& version) {
  Calibration out = c;
  const int e = nccl_era_index(c, nccl_version_code(version));
  if (e < 0) return out;
  for (const auto& [key, q] : c.nccl_eras[static_cast<std::size_t>(e)].algo) out.algo[key] = q;
  return out;
}

// ---------------------------------------------------------------------------------------------------
// JSON

namespace {

std::string link_key(int k) { return topo::to_string(static_cast<topo::LinkKind>(k)); }

double read_fraction(ObjectReader& r, const std::string& key, double dflt) {
  if (!r.has(key)) return r.number_or(key, dflt);
  double v = r.number(key);
  if (!(v > 0.0 && v <= 1.0)) json_fail(r.path_of(key), "expected a fraction in (0, 1], found " + std::to_string(v));
  return v;
}

// Reads an "algorithms" object into `into`; only (algorithm, protocol) pairs already present may be named.
void read_algorithms(const Json& algos, const JsonPath& at0,
                     std::map<std::pair<Algorithm, Protocol>, AlgoProtoParams>& into) {
  ObjectReader ar(algos, at0);
  for (Algorithm a : kAllAlgorithms) {
    if (!ar.has(to_string(a))) continue;
    ObjectReader pr(ar.object(to_string(a)), ar.path_of(to_string(a)));
    for (Protocol p : kAllProtocols) {
      if (!pr.has(to_string(p))) continue;
      JsonPath at = pr.path_of(to_string(p));
      if (!into.count({a, p}))
        json_fail(at, std::string("protocol ") + to_string(p) + " does not exist for algorithm " + to_string(a) +
                          " (in this table)");
      ObjectReader one(pr.object(to_string(p)), at);
      AlgoProtoParams& q = into[{a, p}];
      q.base_latency_s = one.time_or("base_latency", q.base_latency_s);
      q.step_latency_s = one.time_or("step_latency", q.step_latency_s);
      q.net_step_latency_s = one.time_or("net_step_latency", q.net_step_latency_s);
      q.bw_efficiency = read_fraction(one, "bw_efficiency", q.bw_efficiency);
      one.finish();
    }
    pr.finish();
  }
  ar.finish();
}

Json algorithms_json(const std::map<std::pair<Algorithm, Protocol>, AlgoProtoParams>& algo) {
  Json algos = Json::object();
  for (const auto& [key, q] : algo) {
    algos[to_string(key.first)][to_string(key.second)] = {{"base_latency", q.base_latency_s},
                                                          {"step_latency", q.step_latency_s},
                                                          {"net_step_latency", q.net_step_latency_s},
                                                          {"bw_efficiency", q.bw_efficiency}};
  }
  return algos;
}

std::string version_str(int code) { return std::to_string(code / 100) + "." + std::to_string(code % 100); }

}  // namespace

Calibration calibration_from_json(const Json& doc, const std::string& file) {
  Calibration c = default_calibration();
  ObjectReader root(doc, JsonPath{file, ""});
  c.name = root.string_or("name", "custom");
  c.source = root.string_or("source", "");
  if (const Json* links = root.object_optional("links")) {
    ObjectReader lr(*links, root.path_of("links"));
    for (int k = 0; k < 4; ++k) {
      const std::string key = link_key(k);
      if (!lr.has(key)) continue;
      ObjectReader one(lr.object(key), lr.path_of(key));
      c.link[k].latency_s = one.time_or("latency", c.link[k].latency_s);
      c.link[k].bw_efficiency = read_fraction(one, "bw_efficiency", c.link[k].bw_efficiency);
      one.finish();
    }
    lr.finish();
  }
  if (const Json* algos = root.object_optional("algorithms")) read_algorithms(*algos, root.path_of("algorithms"), c.algo);
  if (const Json* eras = root.object_optional("nccl_eras")) {
    ObjectReader er(*eras, root.path_of("nccl_eras"));
    for (auto it = eras->begin(); it != eras->end(); ++it) {
      const std::string& nm = it.key();
      ObjectReader one(er.object(nm), er.path_of(nm));
      NcclEra* e = nullptr;
      for (auto& x : c.nccl_eras)
        if (x.name == nm) e = &x;
      if (!e) {
        // A built-in era (default_nccl_eras) starts from its cited table; any other from the file's current
        // table and needs its version range.
        NcclEra fresh;
        for (auto& d : default_nccl_eras())
          if (d.name == nm) fresh = d;
        if (fresh.name.empty()) {
          if (!one.has("from") || !one.has("until"))
            json_fail(one.path(), "a new NCCL era needs \"from\" and \"until\" versions (\"2.8\", \"2.18\")");
          fresh.name = nm;
          fresh.algo = c.algo;
        }
        c.nccl_eras.push_back(std::move(fresh));
        e = &c.nccl_eras.back();
      }
      for (const char* k : {"from", "until"}) {
        if (!one.has(k)) continue;
        const std::string v = one.string(k);
        const int code = nccl_version_code(v);
        if (code < 0) json_fail(one.path_of(k), "expected an NCCL version such as \"2.8\", found " + json_excerpt(Json(v)));
        (std::string(k) == "from" ? e->from_code : e->until_code) = code;
      }
      if (e->until_code <= e->from_code) json_fail(one.path(), "expected \"until\" after \"from\"");
      if (const Json* a = one.object_optional("algorithms")) read_algorithms(*a, one.path_of("algorithms"), e->algo);
      one.finish();
    }
    for (std::size_t i = 0; i < c.nccl_eras.size(); ++i)
      for (std::size_t k = i + 1; k < c.nccl_eras.size(); ++k)
        if (c.nccl_eras[i].from_code < c.nccl_eras[k].until_code && c.nccl_eras[k].from_code < c.nccl_eras[i].until_code)
          json_fail(er.path(), "NCCL eras '" + c.nccl_eras[i].name + "' and '" + c.nccl_eras[k].name + "' overlap");
    er.finish();
  }
  if (const Json* extra = root.object_optional("extra")) {
    JsonPath at = root.path_of("extra");
    if (!extra->is_object()) json_fail(at, std::string("expected an object, found ") + extra->type_name());
    for (auto it = extra->begin(); it != extra->end(); ++it) {
      JsonPath kp = at.child(it.key());
      const ParamDecl* d = find_calibration_param(it.key());
      if (const char* gone = d ? nullptr : removed_calibration_param(it.key())) json_fail(kp, gone);
      if (!d)
        json_fail(kp, "unknown parameter '" + text_excerpt(it.key()) + "'; nearest known: '" +
                          nearest_calibration_param(it.key()) + "' (fabricsim calibrate --list-params, docs/calibration.md)");
      c.factors.*d->field = read_calibration_param(*d, it.value(), kp);
    }
  }
  root.finish();
  return c;
}

Calibration load_calibration(const std::string& path) { return calibration_from_json(load_json_file(path), path); }

Json calibration_to_json(const Calibration& c) {
  Json j = Json::object();
  j["name"] = c.name;
  j["source"] = c.source;
  Json links = Json::object();
  for (int k = 0; k < 4; ++k)
    links[link_key(k)] = {{"latency", c.link[k].latency_s}, {"bw_efficiency", c.link[k].bw_efficiency}};
  j["links"] = links;
  j["algorithms"] = algorithms_json(c.algo);
  if (!c.nccl_eras.empty()) {
    Json eras = Json::object();
    for (const auto& e : c.nccl_eras)
      eras[e.name] = {{"from", version_str(e.from_code)}, {"until", version_str(e.until_code)},
                      {"algorithms", algorithms_json(e.algo)}};
    j["nccl_eras"] = eras;
  }
  Json extra = Json::object();
  for (const auto& [k, v] : c.named_factors()) extra[k] = v;
  j["extra"] = extra;
  return j;
}

}  // namespace fabricsim::models
