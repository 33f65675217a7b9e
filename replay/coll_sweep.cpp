#include "replay/coll_sweep.hpp"

#include <algorithm>
#include <memory>
#include <cstdio>
#include <set>
#include <sstream>

#include "models/benchmark_loop.hpp"
#include "models/calibration.hpp"
#include "models/calibration_presets.hpp"
#include "models/ring_stream.hpp"
#include "models/tuner.hpp"
#include "sim/base/did_you_mean.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "models/system.hpp"
#include "sim/engine/collective_time.hpp"
#include "sim/engine/ring_stream.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "replay/outputs_links.hpp"
#include "workloads/cluster.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"

namespace fabricsim::sim {

std::vector<std::uint64_t> size_sweep(std::uint64_t min_bytes, std::uint64_t max_bytes, long long factor) {
  if (min_bytes == 0) throw InputError("-b", "a size of at least 1 byte");
  if (max_bytes < min_bytes) throw InputError("-e", "a size >= -b");
  if (factor < 1 || (factor < 2 && min_bytes != max_bytes))
    throw InputError("-f", "an integer >= 2 (1 only when -b equals -e), got " + std::to_string(factor));
  std::vector<std::uint64_t> sizes;
  const auto f = static_cast<std::uint64_t>(factor);
  for (std::uint64_t b = min_bytes; b <= max_bytes;) {
    sizes.push_back(b);
    if (min_bytes == max_bytes || b > max_bytes / f) break;  // the next size would pass -e (or overflow)
    b *= f;
  }
  return sizes;
}

namespace {

bool is_reduction(models::Op op) {
  return op == models::Op::AllReduce || op == models::Op::ReduceScatter || op == models::Op::Reduce;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

int coll_datatype_bytes(const std::string& name) {
  struct DType {
    const char* name;
    int bytes;
  };
  static constexpr DType kTypes[] = {{"int8", 1},  {"uint8", 1}, {"int32", 4}, {"uint32", 4},   {"int64", 8},
                                     {"uint64", 8}, {"half", 2}, {"float", 4}, {"double", 8}, {"bfloat16", 2}};
  for (const auto& t : kTypes)
    if (name == t.name) return t.bytes;
  return 0;
}

CollSweepRequest coll_request(const std::map<std::string, std::string>& options,
                              const std::map<std::string, std::string>& params) {
  static const std::set<std::string> known = {"topology", "op", "minbytes", "maxbytes", "stepfactor", "ngpus",
                                              "gpus-per-thread", "iters", "comm", "root", "algo", "proto",
                                              "channels", "engine", "fidelity", "calibration", "datatype", "redop",
                                              "batch-tolerance", "pxn", "ep", "ep-span"};
  for (const auto& [k, v] : options)
    if (!known.count(k)) throw InputError("coll option '" + k + "'", "unknown (see fabricsim coll --help)");
  auto has = [&](const char* k) { return options.count(k) > 0; };
  auto get = [&](const char* k, const std::string& dflt = "") {
    auto it = options.find(k);
    return it == options.end() ? dflt : it->second;
  };
  auto split = [](const std::string& s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    std::istringstream in(s);
    while (std::getline(in, cur, sep)) out.push_back(cur);
    return out;
  };
  models::CollectiveSpec spec;
  if (!models::parse_op(get("op", "all_reduce"), spec.op)) {
    const std::vector<std::string> ops = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                          "reduce",     "all_to_all", "all_to_allv",    "send_recv"};
    std::string list;
    for (const auto& op : ops) list += (list.empty() ? "" : ", ") + op;
    throw InputError("--op " + get("op"), "one of " + list + did_you_mean(get("op"), ops));
  }
  std::string dtype = get("datatype", "float");
  spec.elem_bytes = 0;
  spec.elem_bytes = coll_datatype_bytes(dtype);
  if (!spec.elem_bytes)
    throw InputError("--datatype " + dtype, "one of int8 uint8 int32 uint32 int64 uint64 half float double bfloat16");
  std::string redop = get("redop", "sum");
  if (redop != "sum" && redop != "prod" && redop != "min" && redop != "max" && redop != "avg")
    throw InputError("--redop " + redop, "one of sum, prod, min, max, avg");
  if (has("algo")) {
    models::Algorithm a;
    if (!models::parse_algorithm(get("algo"), a))
      throw InputError("--algo " + get("algo"),
                       "one of ring, tree, nvls, collnet, pat, direct, pairwise, hierarchical");
    spec.algorithm = a;
  }
  if (has("proto")) {
    models::Protocol p;
    if (!models::parse_protocol(get("proto"), p))
      throw InputError("--proto " + get("proto"), "one of simple, ll, ll128");
    spec.protocol = p;
  }
  if (!models::parse_fidelity(get("fidelity", "auto"), spec.fidelity))
    throw InputError("--fidelity " + get("fidelity"), "one of auto, step, phase, symmetry");
  if (has("channels")) {
    long long c = parse_int(get("channels"), "--channels");
    if (c < 1 || c > 64) throw InputError("--channels", "an integer in 1..64");
    spec.channels = static_cast<int>(c);
  }
  int gpus_per_thread = 0;
  if (has("gpus-per-thread")) {
    long long g = parse_int(get("gpus-per-thread"), "--gpus-per-thread");
    if (g < 1 || g > 4096) throw InputError("--gpus-per-thread", "an integer in 1..4096 (GPUs one host thread drives)");
    gpus_per_thread = static_cast<int>(g);
  }
  int iters = 0;
  if (has("iters")) {
    long long v = parse_int(get("iters"), "--iters");
    if (v < 1 || v > 1000000) throw InputError("--iters", "an integer in 1..1000000 (calls per size)");
    iters = static_cast<int>(v);
  }
  const std::uint64_t minb = parse_size(get("minbytes", "32M"), "-b");
  // Like nccl-tests, -e defaults to 32M; given -b alone, the sweep is that one size.
  const std::uint64_t maxb =
      parse_size(get("maxbytes", has("minbytes") && !has("maxbytes") ? get("minbytes") : "32M"), "-e");
  const long long factor = parse_int(get("stepfactor", "2"), "-f");
  size_sweep(minb, maxb, factor);  // checks -b, -e, -f
  CollSweepRequest req;
  if (!has("topology")) throw InputError("--topology", "a topology preset or JSON file is required");
  req.topology = get("topology");
  req.params = params;
  req.datatype = dtype;
  req.redop = redop;
  req.min_bytes = minb;
  req.max_bytes = maxb;
  req.step_factor = factor;
  if (has("ngpus")) req.ngpus = parse_int(get("ngpus"), "-g");
  if (has("comm")) req.comm = split(get("comm"), ',');
  if (has("ep")) {
    req.ep = parse_int(get("ep"), "--ep");
    if (req.ep < 2) throw InputError("--ep", "an expert-parallel size >= 2");
    if (spec.op != models::Op::AllToAll && spec.op != models::Op::AllToAllv)
      throw InputError("--ep", "only with --op all_to_all or all_to_allv");
  }
  req.ep_span = get("ep-span", "node");
  if (req.ep_span != "node" && req.ep_span != "rail")
    throw InputError("--ep-span", "node or rail, got '" + req.ep_span + "'");
  if (has("ep-span") && !has("ep")) throw InputError("--ep-span", "needs --ep");
  spec.root = static_cast<int>(parse_int(get("root", "0"), "--root"));
  req.spec = spec;
  req.gpus_per_thread = gpus_per_thread;
  req.iters = iters;
  req.engine = get("engine", "fabricsim");
  if (has("batch-tolerance")) req.batch_tolerance_s = parse_time(get("batch-tolerance"), "--batch-tolerance");
  req.calibration = get("calibration", "auto");
  req.pxn = get("pxn", "auto");
  return req;
}

CollSweep run_coll_sweep(const CollSweepRequest& req) {
  models::CollectiveSpec spec = req.spec;
  // One System, resolved by the policy every command uses (models/system.hpp): the calibration is the shipped
  // file fitted on matching hardware unless --calibration says otherwise.
  models::SystemSpec sspec;
  sspec.topology = req.topology;
  sspec.params = req.params;
  sspec.calibration = req.calibration;
  std::unique_ptr<models::System> built = std::make_unique<models::System>(sspec);
  // Faults: the same topology with its faulted links scaled or removed (workloads::apply_topology_faults, as
  // a cluster scenario applies them), priced with the calibration the unfaulted System resolved.
  std::vector<std::string> fault_notes;
  if (!req.faults.empty()) {
    for (const auto& f : req.faults)
      if (f.kind != "link" && f.kind != "switch" && f.kind != "nic")
        throw InputError(f.where, "a link, switch or NIC fault (a " + f.kind +
                                      " fault changes a job's compute or placement, not the fabric a collective runs on)");
    topo::Topology faulted = workloads::apply_topology_faults(built->topology(), req.faults, fault_notes);
    built = std::make_unique<models::System>(std::move(faulted), built->calibration(), built->calibration_ref());
  }
  const models::System& sys = *built;
  const topo::Topology& t = sys.topology();
  const models::Calibration& calib = sys.calibration();
  CollectiveCall base;
  base.engine = req.engine;
  base.batch_tolerance_s = req.batch_tolerance_s;
  base.gpus_per_thread = req.gpus_per_thread;
  base.iters = req.iters;
  if (req.pxn == "on" || req.pxn == "1") base.pxn = true;
  else if (req.pxn == "off" || req.pxn == "0") base.pxn = false;
  else if (req.pxn != "auto") throw InputError("--pxn " + req.pxn, "one of auto, on, off");
  {
    bool known = false;
    std::string names;
    for (const auto& n : engine_names()) {
      known |= n == req.engine;
      names += (names.empty() ? "" : ", ") + n;
    }
    if (!known) throw InputError("--engine " + req.engine, "one of the engines built in: " + names);
  }
  const auto& gpus = t.gpus();
  if (gpus.empty()) throw InputError("--topology", "a topology with GPUs");
  if (!req.comm.empty() && req.ngpus) throw InputError("--comm", "either --comm or -g, not both");
  if (req.ep > 0 && (!req.comm.empty() || req.ngpus)) throw InputError("--ep", "either --ep or --comm / -g, not both");
  if (req.ep > 0) {
    // EP layout: `node` packs the group onto whole servers (GPUs 0..ep-1 in the topology's order, so
    // NVLink inside a server and RDMA between), `rail` takes GPU 0 of ep servers (all traffic RDMA, one rail).
    std::map<int, std::vector<topo::NodeId>> by_host;
    for (auto g : gpus) by_host[t.node(g).host].push_back(g);
    if (req.ep_span == "node") {
      if (req.ep > static_cast<long long>(gpus.size()))
        throw InputError("--ep", std::to_string(req.ep) + " GPUs but the topology has " + std::to_string(gpus.size()));
      spec.communicator.assign(gpus.begin(), gpus.begin() + req.ep);
    } else {
      if (req.ep > static_cast<long long>(by_host.size()))
        throw InputError("--ep", "--ep-span rail needs " + std::to_string(req.ep) + " servers, the topology has " +
                                     std::to_string(by_host.size()));
      for (const auto& [h, gs] : by_host)
        if (static_cast<long long>(spec.communicator.size()) < req.ep) spec.communicator.push_back(gs.front());
    }
  } else if (!req.comm.empty()) {
    std::string joined;
    for (const auto& tok : req.comm) joined += (joined.empty() ? "" : ",") + tok;
    spec.where = "--comm";
    for (const auto& tok : req.comm) {
      long long r = parse_int(tok, "--comm");
      if (r < 0 || r >= static_cast<long long>(gpus.size()))
        throw InputError("--comm " + joined, "GPU rank " + tok + " does not exist (the topology has " +
                                                  std::to_string(gpus.size()) + " GPUs: 0.." +
                                                  std::to_string(gpus.size() - 1) + ")");
      spec.communicator.push_back(gpus[static_cast<std::size_t>(r)]);
    }
  } else {
    long long g = static_cast<long long>(gpus.size());
    if (req.ngpus) {
      g = *req.ngpus;
      if (g < 1 || g > static_cast<long long>(gpus.size()))
        throw InputError("-g", "1.." + std::to_string(gpus.size()) + " GPUs (the topology has " +
                                   std::to_string(gpus.size()) + ")");
    }
    spec.communicator.assign(gpus.begin(), gpus.begin() + g);
  }
  const int n = static_cast<int>(spec.communicator.size());
  const bool rooted = models::has_root(spec.op);
  if (rooted && (spec.root < 0 || spec.root >= n))
    throw InputError("--root", "a rank of the communicator, 0.." + std::to_string(n - 1) + " (got " +
                                   std::to_string(spec.root) + ")");

  // Sizes; validate every row before pricing anything so that a bad size gives no partial table.
  const std::vector<std::uint64_t> sizes = size_sweep(req.min_bytes, req.max_bytes, req.step_factor);
  struct Row {
    std::uint64_t bytes;
    double time_s, predicted_s;
    std::string algo, proto, fidelity;
    std::size_t transfers;
  };
  std::vector<Row> rows;
  std::vector<models::CollectiveSpec> specs;
  for (auto requested : sizes) {
    models::CollectiveSpec s = spec;
    // The size nccl-tests would run for this -b/-e step (whole elements, per-rank blocks of 16-byte multiples),
    // printed in the size column as nccl-tests prints it.
    const std::uint64_t b = models::nccl_tests_bytes(s.op, requested, n, s.elem_bytes);
    s.bytes = b;
    if (s.where == "collective") s.where = "-b/-e";
    if (b == 0) {
      const bool blocks = models::per_rank_blocks(s.op);
      const std::uint64_t least = blocks ? static_cast<std::uint64_t>(n) * std::max<std::uint64_t>(16, s.elem_bytes)
                                         : static_cast<std::uint64_t>(s.elem_bytes);
      throw InputError(s.where, "size " + std::to_string(requested) + " B runs 0 B: " +
                                    (blocks ? std::string(models::to_string(s.op)) + " runs bytes / nranks per rank rounded "
                                              "down to a multiple of 16 B, as nccl-tests does"
                                            : std::string("nccl-tests runs whole elements")) +
                                    "; the smallest size is " + std::to_string(least) + " B");
    }
    if (s.op == models::Op::AllToAllv && n > 0) {
      // Deterministic imbalance: pair (i, j) sends {0.5, 1, 1.5} x bytes/n by (i + j) mod 3, in elements.
      const std::uint64_t eb = static_cast<std::uint64_t>(s.elem_bytes);
      s.matrix.assign(n, std::vector<std::uint64_t>(n, 0));
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          double w = 0.5 * (1 + (i + j) % 3);
          std::uint64_t v = static_cast<std::uint64_t>(w * static_cast<double>(b) / n);
          s.matrix[i][j] = v / eb * eb;
        }
      if (b % (static_cast<std::uint64_t>(n) * eb) != 0)
        throw InputError(s.where, "all_to_allv mean size must be a multiple of nranks x element size = " +
                                      std::to_string(static_cast<std::uint64_t>(n) * eb) + " B");
    }
    CollectiveCall c = base;
    c.spec = s;
    models::validate_spec(s, t, call_routing(sys, c));
    specs.push_back(std::move(s));
  }
  CollSweep out;
  for (std::size_t si = 0; si < specs.size(); ++si) {
    const bool last = si + 1 == specs.size();
    CollectiveCall c = base;
    c.spec = specs[si];
    c.keep_run = req.want_run && last;  // the outputs need the largest size's per-transfer results
    const CollectiveTime ct = time_collective(sys, c);
    if (c.keep_run) {
      CollectiveRunInfo info;
      info.topology = req.topology;
      info.topology_params = req.params;
      info.op = models::to_string(c.spec.op);
      info.bytes = static_cast<double>(c.spec.bytes);
      info.communicator = c.spec.communicator;
      out.last = collective_run_result(t, *ct.schedule, *ct.run, info);
      out.last.calibration = sys.calibration_label();
    }
    rows.push_back({c.spec.bytes, ct.time_s, ct.predicted_s, ct.algorithm, ct.protocol, ct.fidelity, ct.transfers});
    out.times_s.push_back(ct.time_s);
  }

  const char* opname = models::to_string(spec.op);
  const std::string redop_out = is_reduction(spec.op) ? req.redop : "none";
  int hosts = 0;
  {
    std::set<int> hs;
    for (auto g : spec.communicator) hs.insert(t.node(g).host);
    hosts = static_cast<int>(hs.size());
  }
  // NCCL's nodes (models::nccl_nodes): a multi-node NVLink domain (a GB200/GB300 NVL72 rack) is one node of
  // several trays (hosts); say both where they differ.
  const std::vector<int> nn = models::nccl_nodes(spec.communicator, t);
  const int nodes = static_cast<int>(std::set<int>(nn.begin(), nn.end()).size());
  const std::string where = nodes == hosts ? std::to_string(hosts) + " hosts"
                                           : std::to_string(nodes) + " NCCL nodes (NVLink domains, e.g. NVL72 racks) of " +
                                                 std::to_string(hosts) + " trays";
  std::ostringstream o;
  o << "# fabricsim coll: " << opname << " on " << t.name() << " (" << n << " GPUs on " << where << "), engine "
    << req.engine << ", calibration: " << sys.calibration_label();
  if (req.gpus_per_thread > 0)
    o << ", host launch floor " << fmt("%.2f", models::host_launch_floor_s(calib, req.gpus_per_thread) * 1e6)
      << " us at one channel + " << fmt("%.3f", models::host_channel_launch_s(calib, req.gpus_per_thread) * 1e6)
      << " us per extra channel (" << req.gpus_per_thread << " GPUs per thread)";
  if (req.iters > 0)
    o << ", time per call of " << req.iters << " back-to-back calls"
      << (models::calls_overlap(spec.op) ? " (rank 0, calls overlapping)" : " (= one call: calls do not overlap)");
  o << "\n";
  for (const auto& note : fault_notes) o << "# " << note << "\n";
  o << "#\n";
  o << "#       size         count      type   redop    root     time   algbw   busbw  algo          proto   fidelity\n";
  o << "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n";
  double bus_sum = 0;
  Json jrows = Json::array();
  for (const auto& r : rows) {
    const double algbw = r.time_s > 0 ? static_cast<double>(r.bytes) / r.time_s / kGB : 0.0;
    const double busbw = algbw * models::busbw_factor(spec.op, n);
    bus_sum += busbw;
    const std::uint64_t count = models::nccl_tests_count(spec.op, r.bytes, n, spec.elem_bytes);
    char line[256];
    std::snprintf(line, sizeof line, "%12llu  %12llu  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %-12s  %-6s  %s\n",
                  static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(count),
                  req.datatype.c_str(), redop_out.c_str(), rooted ? spec.root : -1,
                  fmt(r.time_s * 1e6 < 10000 ? "%.2f" : "%.1f", r.time_s * 1e6).c_str(), algbw, busbw,
                  r.algo.c_str(), r.proto.c_str(), r.fidelity.c_str());
    o << line;
    jrows.push_back({{"size_bytes", r.bytes},
                     {"count", count},
                     {"time_us", r.time_s * 1e6},
                     {"algbw_GBps", algbw},
                     {"busbw_GBps", busbw},
                     {"algorithm", r.algo},
                     {"protocol", r.proto},
                     {"fidelity", r.fidelity},
                     {"predicted_time_us", r.predicted_s * 1e6},
                     {"transfers", r.transfers}});
  }
  const double avg = rows.empty() ? 0 : bus_sum / static_cast<double>(rows.size());
  if (req.ep > 0 && !rows.empty() && n > 1) {
    // DeepEP-style figures: bytes each rank sends per second of the call, split by where they go (peers in
    // its own NCCL node over NVLink, peers in other nodes over RDMA); rank 0's view, uniform all_to_all. The
    // NCCL node (nn above) is the server, or the whole NVLink domain where one spans several trays (a GB200 /
    // GB300 NVL72 rack): there every peer in the rack is reached over NVLink, whatever its tray.
    int local = 0;
    for (std::size_t i = 1; i < nn.size(); ++i)
      if (nn[i] == nn[0]) ++local;
    const int remote = n - 1 - local;
    o << "# EP " << n << " (" << req.ep_span << " span: " << local + 1
      << (nodes == hosts ? " GPUs per server, " + std::to_string(hosts) + " servers"
                         : " GPUs per NVLink domain, " + std::to_string(nodes) + (nodes == 1 ? " NVLink domain of " : " NVLink domains of ") +
                               std::to_string(hosts) + " trays")
      << "), dispatch/combine bandwidth per rank (DeepEP-style: bytes sent / call time):\n";
    o << "#       size     time(us)   total(GB/s)   NVLink(GB/s)   RDMA(GB/s)\n";
    for (const auto& r : rows) {
      const double per_peer = static_cast<double>(r.bytes) / n;
      const double nvl = r.time_s > 0 ? per_peer * local / r.time_s / kGB : 0.0;
      const double rdma = r.time_s > 0 ? per_peer * remote / r.time_s / kGB : 0.0;
      char line[160];
      std::snprintf(line, sizeof line, "# %10llu  %11.2f  %12.2f  %13.2f  %11.2f\n", static_cast<unsigned long long>(r.bytes),
                    r.time_s * 1e6, nvl + rdma, nvl, rdma);
      o << line;
    }
  }
  o << "# Out of bounds values : 0 OK\n";
  o << "# Avg bus bandwidth    : " << fmt("%.4f", avg) << "\n";
  o << "#\n";
  out.text = o.str();

  Json params = Json::object();
  for (const auto& [k, v] : req.params) params[k] = v;
  Json comm = Json::array();
  for (auto g : spec.communicator) comm.push_back(t.node(g).id);
  out.doc = {{"schema", "fabricsim.collective_results/1"},
             {"source", "simulation"},
             {"system",
              {{"topology", req.topology},
               {"params", params},
               {"gpus", n},
               {"hosts", hosts},
               {"gpu_model", t.node(spec.communicator[0]).model}}},
             {"collective", opname},
             {"datatype", req.datatype},
             {"redop", redop_out},
             {"root", rooted ? spec.root : -1},
             {"nranks", n},
             {"communicator", comm},
             {"engine", req.engine},
             {"calibration", sys.calibration_label()},
             {"requested_algorithm", spec.algorithm ? models::to_string(*spec.algorithm) : "auto"},
             {"requested_protocol", spec.protocol ? models::to_string(*spec.protocol) : "auto"},
             {"rows", jrows},
             {"avg_busbw_GBps", avg}};
  if (req.gpus_per_thread > 0) out.doc["system"]["gpus_per_thread"] = req.gpus_per_thread;
  if (req.iters > 0) out.doc["system"]["iters"] = req.iters;
  // What --fault changed, as the table's "# fault:" lines say it.
  if (!fault_notes.empty()) out.doc["system"]["faults"] = fault_notes;
  return out;
}

}  // namespace fabricsim::sim
