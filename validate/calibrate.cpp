#include "validate/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "sim/base/error.hpp"

namespace fabricsim::validate {
namespace {

enum class Field { Base, Step, NetStep, Eff };

struct Param {
  std::string name;
  bool is_extra = true;
  std::string key;  // extra key
  Field field = Field::Base;
  models::Protocol proto = models::Protocol::Simple;
  int era = -1;           // latency groups: index into Calibration::nccl_eras, -1 for the current table
  bool fraction = false;  // capped at 1
  // Latency groups: the one algorithm the group scales (NVLS, CollNet, PAT), or none for a protocol group
  // (every algorithm built from NCCL's ring/tree/p2p primitives with that protocol).
  std::optional<models::Algorithm> algo;
};

// Algorithms whose latencies come from their own mechanism (NVLS multimem through the NVSwitch, CollNet
// through SHARP switches, PAT's log-step schedule), each with its own [NCCL-T] row: they get their own
// latency group, so that runs that never use them (a ring-only log) cannot move them through the Simple
// protocol's group. Measured: fitted on the three Together H100 ring logs, the Simple group rose 20x
// (8.4 -> 169 us base latency, standing in for Simple's slow approach to its peak) and carried NVLS's
// 25 us to 500 us, so the held-out DGX H100 log ran on Ring LL128 up to 256 MiB (docs/validation.md).
bool own_latency_group(models::Algorithm a) {
  return a == models::Algorithm::Nvls || a == models::Algorithm::NvlsTree || a == models::Algorithm::CollNet ||
         a == models::Algorithm::Pat;
}

// Whether latency group `p` scales the table entry of (a, proto).
bool in_group(const Param& p, models::Algorithm a, models::Protocol proto) {
  if (proto != p.proto) return false;
  // NVLS_TREE runs NVLS's kernel loop (calibration.cpp): it moves with NVLS's group, not a group of its own.
  if (a == models::Algorithm::NvlsTree) a = models::Algorithm::Nvls;
  return p.algo ? *p.algo == a : !own_latency_group(a);
}

// Upper bound of a protocol's payload efficiency set by its wire format ([NCCL-H] src/include/device.h):
// an LL line is 8 bytes carrying 4 data bytes and a 4-byte flag (0.5); an LL128 line is 128 bytes carrying
// 120 data bytes (120/128). The fit may lower a protocol's efficiency (slower than NCCL's model), never
// raise it past its format.
double wire_format_cap(models::Protocol p) {
  return p == models::Protocol::LL ? 0.5 : p == models::Protocol::LL128 ? 120.0 / 128.0 : 1.0;
}

using AlgoTable = std::map<std::pair<models::Algorithm, models::Protocol>, models::AlgoProtoParams>;
AlgoTable& table_of(models::Calibration& c, int era) {
  return era < 0 ? c.algo : c.nccl_eras[static_cast<std::size_t>(era)].algo;
}
const AlgoTable& table_of(const models::Calibration& c, int era) {
  return era < 0 ? c.algo : c.nccl_eras[static_cast<std::size_t>(era)].algo;
}

double& field_of(models::AlgoProtoParams& a, Field f) {
  return f == Field::Base ? a.base_latency_s
         : f == Field::Step ? a.step_latency_s
         : f == Field::Eff  ? a.bw_efficiency
                            : a.net_step_latency_s;
}

const char* field_name(Field f) {
  return f == Field::Base ? "base_latency"
         : f == Field::Step ? "step_latency"
         : f == Field::Eff  ? "bw_efficiency"
                            : "net_step_latency";
}

// Value reported for a parameter: the extra factor, or the Ring value of a latency group (the group
// multiplier applies to every algorithm).
double report_value(const models::Calibration& c, const Param& p) {
  if (p.is_extra) return c.factor(p.key);
  const AlgoTable& tab = table_of(c, p.era);
  for (models::Algorithm a : models::kAllAlgorithms) {  // Ring first: a protocol group reports Ring's value
    if (!in_group(p, a, p.proto)) continue;
    auto it = tab.find({a, p.proto});
    if (it != tab.end()) {
      auto copy = it->second;
      return field_of(copy, p.field);
    }
  }
  return 0;
}

// The host launch costs under nccl-tests -g N floors (models::host_launch_floor_s).
bool is_host_launch_key(const std::string& k) { return k == "kernel_launch_s" || k == "channel_launch_s"; }

std::vector<Param> candidate_params(const models::Calibration& start, bool split) {
  std::vector<Param> out;
  for (const auto& [k, v] : start.named_factors()) {
    bool eff = k.rfind("nvlink_efficiency.", 0) == 0 || k == "network_efficiency" || k == "pcie_efficiency" ||
               k == "nvls_efficiency" || k == "tree_efficiency";
    const bool multi = split && k == "multi_host_base_latency_factor";
    const bool unbounded = is_host_launch_key(k) || k == "ll_channel_rate";  // free, not fractions
    if ((!eff && !multi && !unbounded) || !(v > 0)) continue;
    Param p;
    p.name = k;
    p.key = k;
    p.fraction = eff;
    out.push_back(p);
  }
  // Latency groups of the current table, then of every older NCCL era (models::NcclEra): each era's
  // multipliers are fitted on the runs of that NCCL generation only.
  std::vector<std::optional<models::Algorithm>> groups{std::nullopt};
  for (models::Algorithm a : models::kAllAlgorithms)
    if (own_latency_group(a) && a != models::Algorithm::NvlsTree) groups.push_back(a);
  for (int era = -1; era < static_cast<int>(start.nccl_eras.size()); ++era)
    for (const auto& algo : groups)
      for (Field f : {Field::Base, Field::Step, Field::NetStep, Field::Eff})
        for (models::Protocol pr : models::kAllProtocols) {
          // Protocol payload efficiency (--split-fit only): LL and LL128 (Simple moves whole buffers; its
          // losses are the link efficiencies). One multiplier per protocol, capped by the wire format.
          if (f == Field::Eff && (!split || pr == models::Protocol::Simple || algo)) continue;
          Param p;
          p.is_extra = false;
          p.field = f;
          p.proto = pr;
          p.era = era;
          p.algo = algo;
          // A group only exists when some algorithm in it has a positive value to scale.
          bool any = false;
          for (const auto& [ap, v] : table_of(start, era)) {
            auto copy = v;
            if (in_group(p, ap.first, ap.second) && field_of(copy, f) > 0) any = true;
          }
          if (!any) continue;
          p.name = (era < 0 ? std::string() : "nccl_eras." + start.nccl_eras[static_cast<std::size_t>(era)].name + ".") +
                   field_name(f) + "." + (algo ? std::string(models::to_string(*algo)) + "." : std::string()) +
                   models::to_string(pr);
          out.push_back(p);
        }
  return out;
}

models::Calibration apply(const models::Calibration& start, const std::vector<Param>& ps, const std::vector<double>& theta) {
  models::Calibration c = start;
  for (std::size_t k = 0; k < ps.size(); ++k) {
    const Param& p = ps[k];
    const double mult = std::exp(theta[k]);
    if (p.is_extra) {
      double v = start.factor(p.key) * mult;
      c.set_factor(p.key, p.fraction ? std::min(v, 1.0) : v);
    } else {
      for (auto& [ap, v] : table_of(c, p.era))
        if (in_group(p, ap.first, ap.second)) {
          field_of(v, p.field) *= mult;
          if (p.field == Field::Eff) v.bw_efficiency = std::min(v.bw_efficiency, wire_format_cap(ap.second));
        }
    }
  }
  return c;
}

// The nvlink_efficiency key Calibration::nvlink_efficiency resolves for a GPU model (longest prefix).
std::string nvlink_key(const models::Calibration& c, const std::string& model) {
  std::string best;
  const std::string pre = "nvlink_efficiency.";
  for (const auto& [k, v] : c.named_factors()) {
    if (k.rfind(pre, 0) != 0) continue;
    std::string m = k.substr(pre.size());
    if (m == "default") continue;
    if (model.rfind(m, 0) == 0 && m.size() > best.size()) best = m;
  }
  return pre + (best.empty() ? "default" : best);
}

// The scale-out fabric of a multi-host case (its topology's `fabric` parameter), "" for a single-host one.
std::string fabric_of(const Case& cs) { return cs.m.num_nodes <= 1 ? "" : fabric_param(cs); }

bool relevant(const Param& p, const Case& cs, const models::Calibration& c, bool split, const std::string& fabric) {
  // FitOptions::fabric: a fabric's efficiency and network step latency from runs on that fabric only.
  const bool network_param = p.is_extra ? p.key == "network_efficiency" || p.key == "multi_host_base_latency_factor"
                                        : p.field == Field::NetStep;
  if (network_param && !fabric.empty() && fabric_of(cs) != fabric) return false;
  // ... and the host-side latencies (base latency per call, step latency inside a host) from single-host runs
  // and runs on that fabric. NCCL's model keeps them apart: baseLat and hwLat[NVLINK] are per algorithm and
  // protocol, the network's share is hwLat[NET] plus the latency the net plugin reports (graph->latencyInter,
  // 75 us from aws-ofi-nccl on p4d/p5), added per inter-node step (NVIDIA/nccl src/graph/tuning.cc
  // ncclTopoTuneModel at v2.26.2-1). In a multi-host run they add up to one constant per call (2 x 8 ranks,
  // Tree LL: baseLat + 2 x 7 x hwLat[NVLINK] + 2 x hwLat[NET]), so its small sizes cannot tell a host's cost
  // from its fabric's: with the network step latency held to the held-out fabric, the base latency took p5's
  // EFA per-message cost to XE9680's InfiniBand (docs/validation.md "Leave one system out").
  const bool host_latency = !p.is_extra && (p.field == Field::Base || p.field == Field::Step);
  if (host_latency && !fabric.empty() && cs.m.num_nodes > 1 && fabric_of(cs) != fabric) return false;
  // A latency group moves the runs of its own NCCL era only (the era's table replaces the current one).
  if (!p.is_extra) {
    if (models::nccl_era_index(c, models::nccl_version_code(cs.m.nccl_version)) != p.era) return false;
    // NCCL's latencies are identified from runs with one GPU per host thread only. In an nccl-tests -g N
    // run (N > 1) every latency-bound size sits on the host launch floor, and the sizes just above it carry
    // host effects the floor does not model (Together H100 -g 8: 44-46 us at 512 KiB-1 MiB, where both the
    // floor, 34 us, and the same GPUs' time with one process per GPU, 20-27 us, are lower); fitted there, the
    // LL latency rose to 21.5 us for an 8-byte all_reduce on 8 H100, against 13.0 us measured with one process
    // per GPU (docs/validation.md). Such runs still identify kernel_launch_s and the efficiencies.
    if (p.field != Field::Eff && cs.m.gpus_per_thread > 1) return false;
    if (!split) return true;
    // Per-step latency inside a host and the LL/LL128 payload efficiency are identified from single-host
    // runs only, the network step latency from multi-host runs only (the same reasoning as for NVLink
    // efficiency below: in a multi-host run the intra-host steps are hidden behind the network ones, and a
    // protocol efficiency multiplies the network hops exactly like network_efficiency, so the two cannot
    // be told apart there; fitted on multi-host runs they absorbed the multi-host model's error).
    if (p.field == Field::NetStep) return cs.m.num_nodes > 1;
    if (p.field == Field::Base) return true;
    return cs.m.num_nodes <= 1;
  }
  if (p.key.rfind("nvlink_efficiency.", 0) == 0) {
    // NVLink efficiency is identified from single-host runs only. In multi-host runs NCCL is limited by the
    // network (an EDR/HDR port moves 12.5-25 GB/s, a GPU's NVLink 150-300 GB/s), and letting those rows
    // move it makes it absorb the network model's error: fitted on the ABCI V inter-node logs alone it
    // fell to 0.10 (8x below NCCL's SM70 value, 20/25 GB/s per link), and the 4-GPU intra-node log was
    // then predicted 7x too slow (docs/validation.md).
    if (cs.m.num_nodes > 1) return false;
    for (const auto& m : cs.gpu_models)
      if (nvlink_key(c, m) == p.key) return true;
    return false;
  }
  if (p.key == "network_efficiency" || p.key == "multi_host_base_latency_factor") return cs.m.num_nodes > 1;
  // The host launch costs (per launch, per extra channel) are identified from runs where one thread drives
  // several GPUs (nccl-tests -g > 1): with one GPU per thread its floor (one launch, ~4 us) sits below every
  // measured time, and letting those runs move it would let it absorb their latency error.
  if (is_host_launch_key(p.key)) return cs.m.gpus_per_thread > 1;
  // The per-channel LL rate, like the latencies, from runs with one GPU per host thread (with -g N the LL
  // sizes sit on the host launch floor), and single-host ones: the model applies it inside one host only
  // (models/collectives.cpp build_schedule), so a multi-host run's times do not depend on it.
  if (p.key == "ll_channel_rate") return cs.m.gpus_per_thread <= 1 && cs.m.num_nodes <= 1;
  return true;
}

double huber(double r, double d) {
  double a = std::fabs(r);
  return a <= d ? 0.5 * r * r : d * (a - 0.5 * d);
}

// ln(t_sim) for every usable row of one case.
std::vector<double> log_times(const Case& cs, const models::Calibration& c, int& sims) {
  std::vector<double> out;
  out.reserve(cs.sizes.size());
  for (auto s : cs.sizes) {
    out.push_back(std::log(cs.sys->simulate(s, c).time_s));
    ++sims;
  }
  return out;
}

// ln(t_sim) of the selected cases, computed on up to `threads` threads (each case owns its topology and
// routing, so cases are independent; results land in case order, so the output does not depend on the
// thread count).
std::vector<std::vector<double>> simulate_cases(const std::vector<Case>& cases, const std::vector<bool>& use,
                                                const models::Calibration& c, int threads, int& sims) {
  std::vector<std::vector<double>> out(cases.size());
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < cases.size(); ++i)
    if (use[i]) todo.push_back(i);
  std::vector<int> counts(todo.size(), 0);
  auto work = [&](std::size_t from, std::size_t step) {
    for (std::size_t t = from; t < todo.size(); t += step) out[todo[t]] = log_times(cases[todo[t]], c, counts[t]);
  };
  std::size_t nt = static_cast<std::size_t>(std::max(1, threads));
  nt = std::min(nt, std::max<std::size_t>(1, todo.size()));
  if (nt == 1) {
    work(0, 1);
  } else {
    std::vector<std::thread> pool;
    for (std::size_t k = 0; k < nt; ++k) pool.emplace_back(work, k, nt);
    for (auto& th : pool) th.join();
  }
  for (int n : counts) sims += n;
  return out;
}

// Solves A x = b (small dense, partial pivoting). Returns false when singular.
bool solve(std::vector<std::vector<double>> A, std::vector<double> b, std::vector<double>& x) {
  const std::size_t n = b.size();
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t piv = i;
    for (std::size_t r = i + 1; r < n; ++r)
      if (std::fabs(A[r][i]) > std::fabs(A[piv][i])) piv = r;
    if (std::fabs(A[piv][i]) < 1e-300) return false;
    std::swap(A[i], A[piv]);
    std::swap(b[i], b[piv]);
    for (std::size_t r = i + 1; r < n; ++r) {
      double f = A[r][i] / A[i][i];
      for (std::size_t k = i; k < n; ++k) A[r][k] -= f * A[i][k];
      b[r] -= f * b[i];
    }
  }
  x.assign(n, 0);
  for (std::size_t i = n; i-- > 0;) {
    double s = b[i];
    for (std::size_t k = i + 1; k < n; ++k) s -= A[i][k] * x[k];
    x[i] = s / A[i][i];
  }
  return true;
}

}  // namespace

std::string fabric_param(const Case& cs) {
  const auto& ps = cs.sys->mapping().params;
  const auto it = ps.find("fabric");
  return it == ps.end() ? "" : it->second;
}

void restrict_sizes(std::vector<Case>& cases, std::uint64_t min_bytes, std::uint64_t max_bytes) {
  for (auto& c : cases) {
    std::vector<std::uint64_t> sizes;
    std::vector<double> times;
    for (std::size_t i = 0; i < c.sizes.size(); ++i)
      if (c.sizes[i] >= min_bytes && c.sizes[i] <= max_bytes) {
        sizes.push_back(c.sizes[i]);
        times.push_back(c.measured_s[i]);
      }
    c.sizes = std::move(sizes);
    c.measured_s = std::move(times);
  }
  cases.erase(std::remove_if(cases.begin(), cases.end(), [](const Case& c) { return c.sizes.empty(); }), cases.end());
  if (cases.empty())
    throw InputError("--min-bytes/--max-bytes", "no measured row of any log is in [" + std::to_string(min_bytes) + ", " +
                                                    std::to_string(max_bytes) + "] bytes");
}

std::vector<Case> make_cases(const std::vector<Measurement>& ms, const std::string& preset,
                             const std::map<std::string, std::string>& params) {
  std::vector<Case> out;
  for (const auto& m : ms) {
    Case c;
    c.m = m;
    SystemMapping map = map_system(m, preset, params);
    c.sys = std::make_shared<SimSystem>(map, m);
    for (const auto& r : m.rows) {
      auto t = row_time_s(m, r);
      if (!t || !(*t > 0)) continue;
      // nccl-tests rows whose per-rank block is not a whole number of floats cannot be simulated.
      c.sizes.push_back(r.size_bytes);
      c.measured_s.push_back(*t);
    }
    c.gpu_models = c.sys->gpu_models();
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<RowResidual> residuals(const std::vector<Case>& cases, const models::Calibration& calib) {
  std::vector<RowResidual> out;
  for (const auto& cs : cases)
    for (std::size_t i = 0; i < cs.sizes.size(); ++i) {
      RowResidual r;
      r.source = cs.m.source;
      r.size_bytes = cs.sizes[i];
      r.measured_s = cs.measured_s[i];
      r.simulated_s = cs.sys->simulate(cs.sizes[i], calib).time_s;
      r.log_residual = std::log(r.simulated_s / r.measured_s);
      out.push_back(r);
    }
  return out;
}

FitResult fit_calibration(const std::vector<Case>& cases, const models::Calibration& start_in, const FitOptions& opt) {
  std::size_t nrows = 0;
  for (const auto& c : cases) nrows += c.sizes.size();
  if (nrows == 0) throw InputError("calibrate", "no measured rows with a usable time to fit");
  FitResult res;
  // --split-fit and --nccl-eras start from NCCL's older tuning tables too (models::default_nccl_eras) unless the start
  // calibration already has eras.
  models::Calibration start = start_in;
  if ((opt.split_identification || opt.nccl_eras) && start.nccl_eras.empty())
    start.nccl_eras = models::default_nccl_eras();
  const std::vector<Param> ps = candidate_params(start, opt.split_identification);
  const std::size_t np = ps.size();
  std::vector<double> theta(np, 0.0);
  // Upper bound in log space for fractions (value <= 1).
  std::vector<double> hi(np, 3.0), lo(np, -3.0);
  for (std::size_t k = 0; k < np; ++k)
    if (ps[k].fraction) hi[k] = std::log(1.0 / start.factor(ps[k].key));
  for (std::size_t k = 0; k < np; ++k)
    if (!ps[k].is_extra && ps[k].field == Field::Eff) {
      double mx = 0;  // the multiplier stops where the protocol's most efficient entry reaches its cap
      for (const auto& [ap, v] : table_of(start, ps[k].era))
        if (in_group(ps[k], ap.first, ap.second)) mx = std::max(mx, v.bw_efficiency);
      if (mx > 0) hi[k] = std::max(0.0, std::log(wire_format_cap(ps[k].proto) / mx));
    }

  std::vector<double> logmeas;
  for (const auto& c : cases)
    for (double t : c.measured_s) logmeas.push_back(std::log(t));

  auto eval = [&](const models::Calibration& c, std::vector<std::vector<double>>& per_case) {
    std::vector<bool> all(cases.size(), true);
    per_case = simulate_cases(cases, all, c, opt.threads, res.simulations);
    double obj = 0;
    std::size_t i = 0;
    for (const auto& fc : per_case)
      for (double f : fc) obj += huber(f - logmeas[i++], opt.huber_delta);
    return obj;
  };


  models::Calibration cur = apply(start, ps, theta);
  std::vector<std::vector<double>> f;
  double obj = eval(cur, f);
  res.start_objective = obj;
  double lambda = 1e-2;
  std::vector<bool> active(np, false);
  for (int it = 0; it < opt.max_iterations; ++it) {
    ++res.iterations;
    // Residuals, IRLS weights, Jacobian of ln t_sim with respect to theta.
    std::vector<double> r, w;
    {
      std::size_t i = 0;
      for (const auto& fc : f)
        for (double v : fc) {
          double ri = v - logmeas[i++];
          r.push_back(ri);
          w.push_back(std::fabs(ri) <= opt.huber_delta ? 1.0 : opt.huber_delta / std::fabs(ri));
        }
    }
    std::vector<std::vector<double>> J(nrows, std::vector<double>(np, 0.0));
    for (std::size_t k = 0; k < np; ++k) {
      std::vector<double> th = theta;
      double h = theta[k] + opt.fd_step > hi[k] ? -opt.fd_step : opt.fd_step;
      th[k] += h;
      models::Calibration ck = apply(start, ps, th);
      std::vector<bool> use(cases.size());
      for (std::size_t ci = 0; ci < cases.size(); ++ci) use[ci] = relevant(ps[k], cases[ci], cur, opt.split_identification, opt.fabric);
      auto fks = simulate_cases(cases, use, ck, opt.threads, res.simulations);
      std::size_t i = 0;
      for (std::size_t ci = 0; ci < cases.size(); ++ci) {
        if (!use[ci]) {
          i += cases[ci].sizes.size();
          continue;
        }
        for (std::size_t j = 0; j < fks[ci].size(); ++j, ++i) J[i][k] = (fks[ci][j] - f[ci][j]) / h;
      }
    }
    // Normal equations over the parameters the data constrains.
    std::vector<std::size_t> idx;
    for (std::size_t k = 0; k < np; ++k) {
      double s = 0;
      for (std::size_t i = 0; i < nrows; ++i) s += J[i][k] * J[i][k];
      if (s > 1e-10) {
        idx.push_back(k);
        active[k] = true;
      }
    }
    if (idx.empty()) break;
    const std::size_t m = idx.size();
    std::vector<std::vector<double>> A(m, std::vector<double>(m, 0.0));
    std::vector<double> g(m, 0.0);
    for (std::size_t i = 0; i < nrows; ++i)
      for (std::size_t a = 0; a < m; ++a) {
        double ja = J[i][idx[a]];
        if (ja == 0) continue;
        g[a] -= w[i] * ja * r[i];
        for (std::size_t b = 0; b < m; ++b) A[a][b] += w[i] * ja * J[i][idx[b]];
      }
    bool improved = false;
    for (int tries = 0; tries < 10 && !improved; ++tries) {
      auto Ad = A;
      for (std::size_t a = 0; a < m; ++a) Ad[a][a] += lambda * A[a][a] + 1e-9;
      std::vector<double> step;
      if (!solve(Ad, g, step)) {
        lambda *= 10;
        continue;
      }
      std::vector<double> th = theta;
      for (std::size_t a = 0; a < m; ++a) {
        std::size_t k = idx[a];
        th[k] = std::clamp(theta[k] + std::clamp(step[a], -1.0, 1.0), lo[k], hi[k]);
      }
      models::Calibration cand = apply(start, ps, th);
      std::vector<std::vector<double>> fc;
      double o = eval(cand, fc);
      if (o < obj * (1 - opt.min_improvement)) {
        theta = th;
        cur = cand;
        f = std::move(fc);
        obj = o;
        lambda = std::max(lambda / 3, 1e-6);
        improved = true;
      } else {
        lambda *= 4;
      }
    }
    if (!improved) break;
  }
  res.final_objective = obj;
  res.calib = cur;
  for (std::size_t k = 0; k < np; ++k)
    if (active[k]) res.params.push_back({ps[k].name, report_value(start, ps[k]), report_value(cur, ps[k])});
  res.residuals = residuals(cases, cur);
  res.simulations += static_cast<int>(nrows);
  return res;
}

}  // namespace fabricsim::validate
