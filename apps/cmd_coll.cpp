// fabricsim coll: simulate one NCCL collective over a size sweep and print the nccl-tests table
// (docs/collectives.md). Flags follow nccl-tests where it has them (-b -e -f -g -d -o -r).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <set>
#include <sstream>

#include "apps/cli.hpp"
#include "models/benchmark_loop.hpp"
#include "models/calibration.hpp"
#include "models/calibration_presets.hpp"
#include "models/collectives.hpp"
#include "models/ring_stream.hpp"
#include "models/tuner.hpp"
#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"
#include "sim/base/units.hpp"
#include "sim/engine/ring_stream.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "sim/replay/outputs.hpp"
#include "sim/replay/outputs_links.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"

namespace fabricsim::cli {

namespace {

struct DType {
  const char* name;
  int bytes;
};
constexpr DType kTypes[] = {{"int8", 1},  {"uint8", 1}, {"int32", 4}, {"uint32", 4},   {"int64", 8},
                            {"uint64", 8}, {"half", 2}, {"float", 4}, {"double", 8}, {"bfloat16", 2}};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

bool is_reduction(models::Op op) {
  return op == models::Op::AllReduce || op == models::Op::ReduceScatter || op == models::Op::Reduce;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

int cmd_coll(int argc, char** argv) {
  Args args("coll", "--topology PRESET|FILE --op OP [options]",
            "Simulate an NCCL collective on a topology over a size sweep and print the nccl-tests table\n"
            "(size, count, type, redop, root, time, algbw, busbw) plus the algorithm, protocol and fidelity\n"
            "used for each row. Sizes follow nccl-tests' semantics (docs/collectives.md).");
  args.topology_flags();
  args.flag({"--op", "", "OP",
             "all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, all_to_allv, send_recv",
             "all_reduce"});
  args.flag({"--minbytes", "-b", "SIZE", "smallest size (nccl-tests -b)", "32M"});
  args.flag({"--maxbytes", "-e", "SIZE", "largest size (nccl-tests -e)", "32M, or -b when only -b is given"});
  args.flag({"--stepfactor", "-f", "N", "multiply the size by N between rows (nccl-tests -f)", "2"});
  args.flag({"--ngpus", "-g", "N", "use the first N GPUs of the topology (rank order)", "all"});
  args.flag({"--gpus-per-thread", "", "N",
             "model an nccl-tests -g N run: one host thread launches on N GPUs, so each call takes at least N x "
             "kernel_launch_s (docs/validation.md, host launch floor)",
             "no floor"});
  args.flag({"--iters", "-n", "N",
             "time N back-to-back calls per size and print rank 0's time per call, as nccl-tests -n does: broadcast "
             "and reduce calls overlap (their period, not one call's latency; docs/validation.md, back-to-back calls), "
             "other operations' calls do not (one call's time)",
             "one call"});
  args.flag({"--comm", "", "R,R,...", "communicator as cluster GPU ranks (indices in the topology's GPU order)", ""});
  args.flag({"--root", "-r", "RANK", "root rank for broadcast/reduce (nccl-tests -r)", "0"});
  args.flag({"--algo", "", "ALGO", "ring, tree, nvls, collnet, pat, direct, pairwise, hierarchical (NCCL_ALGO)", "tuner"});
  args.flag({"--proto", "", "PROTO", "simple, ll, ll128 (NCCL_PROTO)", "tuner"});
  args.flag({"--channels", "", "N", "ring/tree channels", "NICs per host, 1 on one host"});
  args.flag({"--engine", "", "NAME", "fabricsim or simgrid", "fabricsim"});
  args.flag({"--fidelity", "", "LEVEL", "auto, step, phase or symmetry", "auto"});
  args.flag({"--calibration", "", "auto|default|shipped:NAME|FILE",
             "network calibration: auto = the shipped file fitted on matching hardware (validate/calibrations/), "
             "default = built-in cited defaults, or a JSON file (docs/calibration.md)", "auto"});
  args.flag({"--json", "", "FILE", "also write the results as JSON (schema in docs/collectives.md)", ""});
  args.flag({"--datatype", "-d", "TYPE", "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16", "float"});
  args.flag({"--redop", "-o", "OP", "sum, prod, min, max, avg (reductions only; printed)", "sum"});
  args.flag({"--batch-tolerance", "", "TIME",
             "engine completion batching window (flows finishing within it complete together)",
             "auto: exact below 20000 transfers, else 1us"});
  args.flag({"--timeline", "", "FILE", "Chrome trace of the largest size's transfers (docs/outputs.md)", ""});
  args.flag({"--link-stats", "", "FILE", "per-link statistics of the largest size; CSV, or JSON for *.json", ""});
  args.flag({"--report", "", "FILE", "HTML report of the largest size (docs/outputs.md)", ""});
  args.flag({"--pxn", "", "auto|on|off",
             "route cross-rail traffic through the peer GPU on the destination's rail (NCCL PXN); auto = on for "
             "all_to_all(v) and send_recv (NCCL's default on rail-optimised systems), off otherwise", "auto"});
  if (!args.parse(argc, argv)) return 0;
  // Output paths are checked before simulating, so a bad one fails at once and nothing is written.
  args.check_output_flags({"--json", "--timeline", "--link-stats", "--report"});
  if (!args.positional().empty()) throw InputError(args.positional()[0], "unexpected argument");
  if (!args.has("--topology")) throw InputError("--topology", "a topology preset or JSON file is required");

  models::CollectiveSpec spec;
  if (!models::parse_op(args.get("--op", "all_reduce"), spec.op))
    throw InputError("--op " + args.get("--op"),
                     "one of all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, all_to_allv, "
                     "send_recv");
  std::string dtype = args.get("--datatype", "float");
  spec.elem_bytes = 0;
  for (const auto& t : kTypes)
    if (dtype == t.name) spec.elem_bytes = t.bytes;
  if (!spec.elem_bytes)
    throw InputError("--datatype " + dtype, "one of int8 uint8 int32 uint32 int64 uint64 half float double bfloat16");
  std::string redop = args.get("--redop", "sum");
  if (redop != "sum" && redop != "prod" && redop != "min" && redop != "max" && redop != "avg")
    throw InputError("--redop " + redop, "one of sum, prod, min, max, avg");
  if (args.has("--algo")) {
    models::Algorithm a;
    if (!models::parse_algorithm(args.get("--algo"), a))
      throw InputError("--algo " + args.get("--algo"),
                       "one of ring, tree, nvls, collnet, pat, direct, pairwise, hierarchical");
    spec.algorithm = a;
  }
  if (args.has("--proto")) {
    models::Protocol p;
    if (!models::parse_protocol(args.get("--proto"), p))
      throw InputError("--proto " + args.get("--proto"), "one of simple, ll, ll128");
    spec.protocol = p;
  }
  if (!models::parse_fidelity(args.get("--fidelity", "auto"), spec.fidelity))
    throw InputError("--fidelity " + args.get("--fidelity"), "one of auto, step, phase, symmetry");
  if (args.has("--channels")) {
    long long c = parse_int(args.get("--channels"), "--channels");
    if (c < 1 || c > 64) throw InputError("--channels", "an integer in 1..64");
    spec.channels = static_cast<int>(c);
  }
  int gpus_per_thread = 0;
  if (args.has("--gpus-per-thread")) {
    long long g = parse_int(args.get("--gpus-per-thread"), "--gpus-per-thread");
    if (g < 1 || g > 4096) throw InputError("--gpus-per-thread", "an integer in 1..4096 (GPUs one host thread drives)");
    gpus_per_thread = static_cast<int>(g);
  }
  int iters = 0;
  if (args.has("--iters")) {
    long long v = parse_int(args.get("--iters"), "--iters");
    if (v < 1 || v > 1000000) throw InputError("--iters", "an integer in 1..1000000 (calls per size)");
    iters = static_cast<int>(v);
  }
  const std::uint64_t minb = parse_size(args.get("--minbytes", "32M"), "-b");
  // Like nccl-tests, -e defaults to 32M; given -b alone, the sweep is that one size.
  const std::uint64_t maxb =
      parse_size(args.get("--maxbytes", args.has("--minbytes") && !args.has("--maxbytes") ? args.get("--minbytes") : "32M"), "-e");
  if (minb == 0) throw InputError("-b", "a size of at least 1 byte");
  if (maxb < minb) throw InputError("-e", "a size >= -b");
  const long long factor = parse_int(args.get("--stepfactor", "2"), "-f");
  if (factor < 1 || (factor < 2 && minb != maxb))
    throw InputError("-f", "an integer >= 2 (1 only when -b equals -e), got " + std::to_string(factor));
  sim::RunOptions ropt;
  ropt.engine = args.get("--engine", "fabricsim");
  const bool auto_batch = !args.has("--batch-tolerance");
  if (!auto_batch) ropt.batch_tolerance_s = parse_time(args.get("--batch-tolerance"), "--batch-tolerance");
  {
    bool known = false;
    std::string names;
    for (const auto& n : sim::engine_names()) {
      known |= n == ropt.engine;
      names += (names.empty() ? "" : ", ") + n;
    }
    if (!known) throw InputError("--engine " + ropt.engine, "one of the engines built in: " + names);
  }
  // NVLink traffic is striped over all NVSwitch planes in hardware; merge them for the flow model.
  const topo::Topology t =
      models::merge_nvswitch_planes(topo::load_topology(args.get("--topology"), args.params()));
  // Default: the shipped calibration fitted on the matching hardware's logs (models/calibration_presets.hpp).
  models::Calibration calib = models::resolve_calibration(args.get("--calibration", "auto"), t);
  const std::string pxn = args.get("--pxn", "auto");
  bool use_pxn = false;
  if (pxn == "on" || pxn == "1") use_pxn = true;
  else if (pxn == "off" || pxn == "0") use_pxn = false;
  else if (pxn == "auto")
    use_pxn = spec.op == models::Op::AllToAll || spec.op == models::Op::AllToAllv || spec.op == models::Op::SendRecv;
  else throw InputError("--pxn " + pxn, "one of auto, on, off");
  topo::RoutingOptions ropts;
  ropts.pxn = use_pxn;
  topo::Routing routing(t, ropts);
  const auto& gpus = t.gpus();
  if (gpus.empty()) throw InputError("--topology", "a topology with GPUs");
  if (args.has("--comm") && args.has("--ngpus")) throw InputError("--comm", "either --comm or -g, not both");
  if (args.has("--comm")) {
    spec.where = "--comm";
    for (const auto& tok : split(args.get("--comm"), ',')) {
      long long r = parse_int(tok, "--comm");
      if (r < 0 || r >= static_cast<long long>(gpus.size()))
        throw InputError("--comm " + args.get("--comm"), "GPU rank " + tok + " does not exist (the topology has " +
                                                             std::to_string(gpus.size()) + " GPUs: 0.." +
                                                             std::to_string(gpus.size() - 1) + ")");
      spec.communicator.push_back(gpus[static_cast<std::size_t>(r)]);
    }
  } else {
    long long g = static_cast<long long>(gpus.size());
    if (args.has("--ngpus")) {
      g = parse_int(args.get("--ngpus"), "-g");
      if (g < 1 || g > static_cast<long long>(gpus.size()))
        throw InputError("-g", "1.." + std::to_string(gpus.size()) + " GPUs (the topology has " +
                                   std::to_string(gpus.size()) + ")");
    }
    spec.communicator.assign(gpus.begin(), gpus.begin() + g);
  }
  const int n = static_cast<int>(spec.communicator.size());
  spec.root = static_cast<int>(parse_int(args.get("--root", "0"), "--root"));
  const bool rooted = spec.op == models::Op::Broadcast || spec.op == models::Op::Reduce;
  if (rooted && (spec.root < 0 || spec.root >= n))
    throw InputError("--root", "a rank of the communicator, 0.." + std::to_string(n - 1) + " (got " +
                                   std::to_string(spec.root) + ")");

  // Sizes; validate every row before printing anything so that a bad size gives no partial table.
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t b = minb; b <= maxb;) {
    sizes.push_back(b);
    if (minb == maxb) break;
    if (b > maxb / static_cast<std::uint64_t>(factor)) break;
    b *= static_cast<std::uint64_t>(factor);
  }
  struct Row {
    std::uint64_t bytes;
    double time_s, predicted_s;
    std::string algo, proto, fidelity;
    std::size_t transfers;
  };
  std::vector<Row> rows;
  std::vector<models::CollectiveSpec> specs;
  for (auto b : sizes) {
    models::CollectiveSpec s = spec;
    s.bytes = b;
    if (s.where == "collective") s.where = "-b/-e";
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
    models::validate_spec(s, t, routing);
    specs.push_back(std::move(s));
  }
  const bool want_outputs = args.has("--timeline") || args.has("--link-stats") || args.has("--report");
  sim::RunResult last_result;
  for (std::size_t si = 0; si < specs.size(); ++si) {
    const auto& s = specs[si];
    const bool last = si + 1 == specs.size();
    models::TunerChoice tc = models::tune(s, t, routing, calib);
    models::CollectiveSpec fixed = s;
    fixed.algorithm = tc.algorithm;
    fixed.protocol = tc.protocol;
    // A step-level ring runs streamed, without materialising its transfers: same times (docs/engine.md,
    // "Streamed step-level rings"). Not when the outputs need per-transfer timings.
    const bool ring_op = s.op == models::Op::AllReduce || s.op == models::Op::AllGather || s.op == models::Op::ReduceScatter;
    if (ropt.engine == "fabricsim" && tc.algorithm == models::Algorithm::Ring && ring_op && !(want_outputs && last)) {
      if (const auto rs = models::build_ring_stream(fixed, t, routing, calib)) {
        sim::RingStreamOptions so;
        so.batch_tolerance_s = auto_batch && rs->transfers() > 20000 ? 1e-6 : ropt.batch_tolerance_s;
        double time_s = sim::run_ring_stream(*rs, t, routing, calib, so).makespan_s;
        if (gpus_per_thread > 0)
          time_s = std::max(time_s, models::host_launch_floor_s(calib, gpus_per_thread, models::nccl_call_channels(fixed, t)));
        rows.push_back({s.bytes, time_s, tc.predicted_s, rs->algorithm, rs->protocol, "step",
                        static_cast<std::size_t>(rs->transfers())});
        continue;
      }
    }
    models::Schedule sch = models::build_schedule(fixed, t, routing, calib);
    sim::RunOptions o = ropt;
    // Large schedules: batch completions within 1 us (architecture.md: 10x fewer engine steps for
    // < 0.05 % error; measured here: 256-GPU all_to_all 64 MiB 1530.96 vs 1531.29 us exact, 0.47 vs 48 s).
    if (auto_batch && sch.transfers.size() > 20000) o.batch_tolerance_s = 1e-6;
    o.collect_link_stats = want_outputs && last;
    sim::ScheduleResult res = sim::run_schedule(sch, t, routing, calib, o);
    if (want_outputs && last) {
      sim::CollectiveRunInfo info;
      info.topology = args.get("--topology");
      info.topology_params = args.params();
      info.op = models::to_string(s.op);
      info.bytes = static_cast<double>(s.bytes);
      info.communicator = s.communicator;
      last_result = sim::collective_run_result(t, sch, res, info);
    }
    double time_s = res.makespan_s;
    if (iters > 0 && models::calls_overlap(s.op)) {
      // The loop of a rooted pipeline (timeline, link statistics and report still show one call).
      models::CollectiveSpec looped = fixed;
      models::prepare_loop_spec(looped, t, routing);
      sim::RunOptions lo = o;
      lo.collect_link_stats = false;  // the outputs describe the single call
      time_s = sim::run_benchmark_loop(models::build_schedule(looped, t, routing, calib), iters,
                                       looped.communicator.front(), t, routing, calib, lo);
    }
    if (gpus_per_thread > 0)
      time_s = std::max(time_s, models::host_launch_floor_s(calib, gpus_per_thread, models::nccl_call_channels(fixed, t)));
    rows.push_back({s.bytes, time_s, tc.predicted_s, sch.algorithm, sch.protocol, sch.fidelity,
                    sch.transfers.size()});
  }

  const char* opname = models::to_string(spec.op);
  const std::string redop_out = is_reduction(spec.op) ? redop : "none";
  int hosts = 0;
  {
    std::set<int> hs;
    for (auto g : spec.communicator) hs.insert(t.node(g).host);
    hosts = static_cast<int>(hs.size());
  }
  std::ostringstream o;
  o << "# fabricsim coll: " << opname << " on " << t.name() << " (" << n << " GPUs on " << hosts << " hosts), engine "
    << ropt.engine << ", calibration " << calib.name;
  if (gpus_per_thread > 0)
    o << ", host launch floor " << fmt("%.2f", models::host_launch_floor_s(calib, gpus_per_thread) * 1e6)
      << " us at one channel + " << fmt("%.3f", models::host_channel_launch_s(calib, gpus_per_thread) * 1e6)
      << " us per extra channel (" << gpus_per_thread << " GPUs per thread)";
  if (iters > 0)
    o << ", time per call of " << iters << " back-to-back calls"
      << (models::calls_overlap(spec.op) ? " (rank 0, calls overlapping)" : " (= one call: calls do not overlap)");
  o << "\n";
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
                  static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(count), dtype.c_str(),
                  redop_out.c_str(), rooted ? spec.root : -1,
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
  o << "# Out of bounds values : 0 OK\n";
  o << "# Avg bus bandwidth    : " << fmt("%.4f", avg) << "\n";
  o << "#\n";

  if (args.has("--json")) {
    Json params = Json::object();
    for (const auto& [k, v] : args.params()) params[k] = v;
    Json comm = Json::array();
    for (auto g : spec.communicator) comm.push_back(t.node(g).id);
    Json doc = {{"schema", "fabricsim.collective_results/1"},
                {"source", "simulation"},
                {"system",
                 {{"topology", args.get("--topology")},
                  {"params", params},
                  {"gpus", n},
                  {"hosts", hosts},
                  {"gpu_model", t.node(spec.communicator[0]).model}}},
                {"collective", opname},
                {"datatype", dtype},
                {"redop", redop_out},
                {"root", rooted ? spec.root : -1},
                {"nranks", n},
                {"communicator", comm},
                {"engine", ropt.engine},
                {"calibration", calib.name},
                {"requested_algorithm", spec.algorithm ? models::to_string(*spec.algorithm) : "auto"},
                {"requested_protocol", spec.protocol ? models::to_string(*spec.protocol) : "auto"},
                {"rows", jrows},
                {"avg_busbw_GBps", avg}};
    if (gpus_per_thread > 0) doc["system"]["gpus_per_thread"] = gpus_per_thread;
    if (iters > 0) doc["system"]["iters"] = iters;
    write_file_atomic(args.get("--json"), doc.dump(1) + "\n");
  }
  if (want_outputs) {
    sim::OutputOptions out;
    out.timeline_path = args.get("--timeline");
    out.link_stats_path = args.get("--link-stats");
    out.report_path = args.get("--report");
    out.quiet = true;
    sim::write_outputs(last_result, out);
  }
  std::cout << o.str();
  return 0;
}

}  // namespace fabricsim::cli
