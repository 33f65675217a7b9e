// fabricsim plan [scenario.json] --target-tokens-per-day N | --target-step-time T: search GPT parallelism
// layouts (TP x PP, micro-batch) and cluster sizes (the topology's "nodes" parameter) and print the cheapest
// configurations that meet the target: fewest GPUs first, then the fastest step. Every candidate is a real
// simulation (the sweep machinery, threads on all cores); layouts that do not fit (divisibility, memory,
// batch) fail in the generator and count as infeasible; one refused on all of a cluster's GPUs runs on the
// largest world size below that the generator accepts (GPUs idle, cost still the nodes'). Cluster sizes are tried smallest first and the
// search stops after the first size at which enough (--top) configurations meet the target, since any
// larger cluster costs more GPUs.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <thread>
#include <optional>
#include <tuple>

#include "apps/cli.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "models/system.hpp"
#include "replay/outputs_sweep.hpp"
#include "replay/run_scenario.hpp"
#include "workloads/cluster.hpp"
#include "workloads/gpt.hpp"
#include "workloads/moe.hpp"
#include "workloads/params.hpp"
#include "workloads/scenario.hpp"

namespace fabricsim::cli {

namespace {

std::vector<long long> int_list(const std::string& text, const std::string& flag) {
  std::vector<long long> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    long long v = parse_int(item, flag);
    if (v < 1) throw InputError(flag, "values must be >= 1, got " + item);
    out.push_back(v);
  }
  if (out.empty()) throw InputError(flag, "expected a comma-separated list of integers");
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// One more searched workload parameter (--cp, --vp, --ep, --etp, --recompute). Absent or given as the
// scenario's own single value, it is not searched: no input column, no value set, so the output is the
// one a search without the flag prints.
struct Dim {
  std::string flag, column, param;
  std::vector<Json> values;
  bool searched = false;
};

std::vector<Json> string_list(const std::string& text, const std::string& flag, const std::vector<std::string>& allowed) {
  std::vector<Json> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (std::find(allowed.begin(), allowed.end(), item) == allowed.end())
      throw InputError(flag, "expected a comma-separated list of none, selective, full; got '" + item + "'");
    else if (std::find(out.begin(), out.end(), Json(item)) == out.end())
      out.push_back(item);
  if (out.empty()) throw InputError(flag, "expected a comma-separated list of none, selective, full");
  return out;
}

// Why a candidate is out: it cannot be laid out (divisibility, batch, pipeline split; found before
// simulating where the generator's own checks find it), it needs more memory than the GPU has, or it
// misses the target.
enum class Refused { None, Layout, Memory, Target };

struct Candidate {
  long long nodes = 0, tp = 0, pp = 0, mbs = 0;
  std::vector<Json> extra;  // values of the searched Dims, in their order
  long long cp = 1;         // for the DP column
  long long paid = 0;       // the cluster's GPUs (0: not known before simulating)
  long long world = 0;      // > 0: the layout runs on this many of them, the rest idle
  long long full_dp = 0;    // the data-parallel size on every GPU, and the global and micro batch, when the
  long long gbs = 0;        // global batch is what keeps it from every GPU
  bool ok = false;
  std::string error;
  sim::RunResult r;
  Refused refused = Refused::None;
  double peak_bytes = -1;   // memory per GPU (peak stage); < 0: not known (layout refused)
  std::string largest_term; // when refused for memory
};

std::string json_text(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

double exposed_total(const sim::RunResult& r) {
  double t = 0;
  for (const auto& [k, v] : r.breakdown.exposed_comm_s) t += v;
  return t;
}

// Placement mode: every job without explicit "gpus" gets the same policy; each policy is one cluster run
// (jobs together on the shared fabric, and alone); ranked by the jobs' summed tokens/s (samples/s when the
// jobs have no tokens).
int plan_placements(Args& args, const Json& base) {
  const std::string source = args.positional()[0];
  if (args.has("--target-tokens-per-day") || args.has("--target-step-time"))
    throw InputError("fabricsim plan", "a cluster scenario (with \"jobs\") compares placements; no target");
  std::vector<std::string> policies;
  {
    std::stringstream ss(args.get("--placements", "packed,spread,fill-racks,rail-aligned,random(1)"));
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty()) {
        if (!workloads::is_placement(item))
          throw InputError("--placements", std::string("policies among ") + workloads::placement_help() + " (got " + item + ")");
        policies.push_back(item);
      }
    if (policies.empty()) throw InputError("--placements", "at least one policy");
  }
  std::string comm_model = args.get("--comm-model");
  workloads::scenario_from_json(base, source);  // validates the base once
  struct Row {
    std::string policy, error;
    sim::RunResult r;
    double total = 0;
  };
  std::vector<Row> rows;
  bool tokens = true;
  for (const auto& pol : policies) {
    Json doc = base;
    doc.erase("outputs");
    for (auto& j : doc["jobs"])
      if (!j.contains("gpus")) j["placement"] = pol;
    Row row;
    row.policy = pol;
    try {
      workloads::Scenario sc = workloads::scenario_from_json(doc, source);
      sim::ScenarioRunOptions o;
      o.comm_model = comm_model;
      o.replay.record_ops = false;
      row.r = sim::run_scenario(sc, o).result;
      if (row.r.tokens_per_s <= 0) tokens = false;
    } catch (const InputError& e) {
      row.error = e.what();
    }
    if (!args.has("--quiet")) std::cerr << "plan: placement " << pol << (row.error.empty() ? " done" : " infeasible") << "\n";
    rows.push_back(std::move(row));
  }
  for (auto& row : rows) row.total = tokens ? row.r.tokens_per_s : row.r.samples_per_s;
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (a.error.empty() != b.error.empty()) return a.error.empty();
    return a.total > b.total;
  });
  std::ostringstream o;
  o << "plan: " << source << ": " << base["jobs"].size() << " jobs, placements ranked by total "
    << (tokens ? "tokens/s" : "samples/s") << " (jobs together on the shared fabric)\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-4s %-14s %16s", "#", "placement", tokens ? "total tokens/s" : "total samples/s");
  o << buf;
  for (const auto& j : base["jobs"]) {
    const std::string n = j.value("name", std::string("?"));
    std::snprintf(buf, sizeof buf, " %16s %10s", (n + " step").c_str(), "slowdown");
    o << buf;
  }
  o << "\n";
  int i = 0;
  for (const auto& row : rows) {
    std::snprintf(buf, sizeof buf, "%-4d %-14s", ++i, row.policy.c_str());
    o << buf;
    if (!row.error.empty()) {
      o << " infeasible: " << row.error << "\n";
      continue;
    }
    std::snprintf(buf, sizeof buf, " %16.6g", row.total);
    o << buf;
    for (const auto& j : row.r.jobs) {
      std::snprintf(buf, sizeof buf, " %14.4f s %10.4f", j.iteration_s, j.slowdown);
      o << buf;
    }
    o << "\n";
  }
  std::cout << o.str();
  return 0;
}

}  // namespace

int cmd_plan(int argc, char** argv) {
  Args args("plan", "[scenario.json] (--target-tokens-per-day N | --target-step-time T) [options]",
            "Find the cheapest cluster and parallelism layout for a GPT scenario that meets a target. The scenario\n"
            "(default: the built-in GPT-3 175B on a DGX A100 SuperPOD, see `fabricsim run --print-default`) gives\n"
            "the model, the topology family (its preset and params) and the batch; plan varies the topology's\n"
            "\"nodes\" and the workload's tensor_model_parallel_size, pipeline_model_parallel_size and\n"
            "micro_batch_size, simulates every candidate, and prints the configurations meeting the target\n"
            "ordered by GPU count, then step time. Interleaving (num_layers_per_virtual_pipeline_stage) is kept\n"
            "where PP > 1 and dropped at PP = 1. --cp, --vp, --ep, --etp and --recompute search context,\n"
            "virtual pipeline, expert and expert-tensor parallelism and activation recomputation as well; the\n"
            "table then shows them with each configuration's peak memory per GPU, and the counts say how many\n"
            "candidates were refused for their layout, for memory and for the target. Candidates whose layout\n"
            "the generator rejects (divisibility, global batch, pipeline split) or that need more GPU memory than\n"
            "the GPU has are refused before simulating. A layout refused on all of a cluster's GPUs runs on the\n"
            "largest world size the generator accepts (world_size), the rest idle; the table then shows GPUs\n"
            "used/paid and ranks by the GPUs paid for (--all-gpus refuses it instead).");
  args.flag({"--target-tokens-per-day", "", "N", "required training throughput, tokens per day", ""});
  args.flag({"--target-step-time", "", "TIME", "required step time, e.g. 10s or 800ms", ""});
  args.flag({"--nodes", "", "LIST", "cluster sizes to try (topology param nodes)", "1,2,4,8,16,32,64,128,256"});
  args.flag({"--tp", "", "LIST", "tensor-parallel sizes", "1,2,4,8"});
  args.flag({"--pp", "", "LIST", "pipeline-parallel sizes", "1,2,4,8,16"});
  args.flag({"--mbs", "", "LIST", "micro-batch sizes (default: the scenario's)", ""});
  args.flag({"--cp", "", "LIST", "context-parallel sizes (context_parallel_size; default: the scenario's)", ""});
  args.flag({"--vp", "", "LIST",
             "virtual pipeline sizes (virtual_pipeline_model_parallel_size, replaces "
             "num_layers_per_virtual_pipeline_stage; 1 = not interleaved; default: the scenario's)",
             ""});
  args.flag({"--ep", "", "LIST", "expert-parallel sizes, MoE scenarios (expert_model_parallel_size)", ""});
  args.flag({"--etp", "", "LIST", "expert tensor-parallel sizes, MoE scenarios (expert_tensor_parallel_size)", ""});
  args.flag({"--recompute", "", "LIST", "recompute_granularity values: none, selective, full", ""});
  args.flag({"--memory", "", "", "print the peak-memory column and the refusal counts (and write the memory CSV "
                                 "columns) also when no --cp/--vp/--ep/--etp/--recompute value is searched",
             ""});
  args.flag({"--all-gpus", "", "",
             "refuse a layout that cannot use every GPU of the cluster (by default such a layout runs on the largest "
             "world size it allows, the rest of the nodes' GPUs idle, and is ranked by the GPUs paid for)",
             ""});
  args.flag({"--top", "", "N", "configurations to print", "5"});
  args.flag({"--threads", "-j", "N", "worker threads (0 = all cores)", "0"});
  args.flag({"--comm-model", "", "MODEL", "shared (default), engine or analytic (overrides the scenario's comm_model)", ""});
  args.flag({"--compute-preset", "", "NAME",
             "compute efficiencies to start from, replacing the scenario's preset: default or megatron-sc21 "
             "(docs/workloads.md)",
             ""});
  args.flag({"--output", "-o", "FILE", "also write every candidate as a sweep CSV", ""});
  args.flag({"--quiet", "-q", "", "no progress on stderr", ""});
  args.flag({"--placements", "", "LIST",
             "cluster scenario (with \"jobs\"): placement policies to compare by total throughput, e.g. "
             "packed,spread,fill-racks,random(1),rail-aligned",
             "packed,spread,fill-racks,rail-aligned,random(1)"});
  args.list_flag(Args::kTopologies | Args::kCompute | Args::kModels);
  if (!args.parse(argc, argv)) return 0;
  if (args.positional().size() == 1) {
    Json doc = load_json_file(args.positional()[0]);
    if (doc.is_object() && doc.contains("jobs")) return plan_placements(args, doc);
  }
  // The candidate CSV path is checked before the search, so a bad one fails at once.
  args.check_output_flags({"--output"});
  if (args.positional().size() > 1) throw InputError("fabricsim plan", "expected at most one scenario file");
  bool by_tokens = args.has("--target-tokens-per-day"), by_time = args.has("--target-step-time");
  if (by_tokens == by_time)
    throw InputError("fabricsim plan", "give exactly one of --target-tokens-per-day and --target-step-time");
  double target_tokens_per_day = 0, target_step_s = 0;
  if (by_tokens) {
    target_tokens_per_day = parse_double(args.get("--target-tokens-per-day"), "--target-tokens-per-day");
    if (!(target_tokens_per_day > 0)) throw InputError("--target-tokens-per-day", "expected a number > 0");
  } else {
    target_step_s = parse_time(args.get("--target-step-time"), "--target-step-time");
    if (!(target_step_s > 0)) throw InputError("--target-step-time", "expected a time > 0");
  }
  auto nodes = int_list(args.get("--nodes", "1,2,4,8,16,32,64,128,256"), "--nodes");
  auto tps = int_list(args.get("--tp", "1,2,4,8"), "--tp");
  auto pps = int_list(args.get("--pp", "1,2,4,8,16"), "--pp");
  long long top = parse_int(args.get("--top", "5"), "--top");
  if (top < 1) throw InputError("--top", "expected an integer >= 1");
  long long threads = parse_int(args.get("--threads", "0"), "--threads");
  if (threads < 0 || threads > 4096) throw InputError("--threads", "expected 0..4096");
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  std::string comm_model = args.comm_model();
  bool quiet = args.has("--quiet");
  const bool all_gpus = args.has("--all-gpus");

  std::string source = args.positional().empty() ? "<built-in>" : args.positional()[0];
  Json base = args.positional().empty() ? workloads::default_scenario_json() : load_json_file(source);
  if (args.has("--compute-preset"))
    workloads::set_compute_preset(base, args.get("--compute-preset"), "--compute-preset");
  workloads::Scenario parsed = workloads::scenario_from_json(base, source);  // validates the base once
  if (parsed.workload.kind != "generator" || parsed.workload.generator != "gpt")
    throw InputError(source + ": /workload/generator", "plan searches GPT layouts: expected generator \"gpt\"");
  if (!base["topology"].contains("preset"))
    throw InputError(source + ": /topology", "plan varies the preset's \"nodes\": expected a topology preset");
  // The workload's parameters, each of the type the generator reads: a misspelt key or a string where a number
  // goes is the scenario's error, reported once here, not as every candidate refused (found by fuzzing).
  if (!base["workload"].contains("params") || base["workload"]["params"].is_null()) base["workload"]["params"] = Json::object();
  workloads::check_gpt_params_read(workloads::params_from_json(base["workload"]["params"], JsonPath{source, "/workload/params"}),
                                   parsed.workload.where);
  const Json& wp = base["workload"]["params"];
  std::vector<long long> mbss;
  if (args.has("--mbs")) mbss = int_list(args.get("--mbs"), "--mbs");
  else mbss = {wp.contains("micro_batch_size") ? wp["micro_batch_size"].get<long long>() : 1};
  // Derived GPT quantities decide the world size; the scenario must not pin it.
  base.erase("outputs");
  if (base["workload"]["params"].contains("world_size")) base["workload"]["params"].erase("world_size");

  // The further dimensions. A scenario value absent from the scenario is the generator's default (null:
  // no default that a value could equal, so any given value is searched).
  const workloads::GptConfig defaults;
  // MoE: num_experts > 0, given or from the catalogue model ("model": "qwen3-30b-a3b").
  bool moe = wp.value("num_experts", 0LL) > 0;
  if (!wp.contains("num_experts") && wp.contains("model") && wp["model"].is_string()) {
    workloads::MoeConfig m;
    moe = workloads::moe_catalogue_defaults(wp["model"].get<std::string>(), m) && m.num_experts > 0;
  }
  std::vector<Dim> dims = {
      {"--cp", "cp", "context_parallel_size", {}, false},
      {"--vp", "vp", "virtual_pipeline_model_parallel_size", {}, false},
      {"--ep", "ep", "expert_model_parallel_size", {}, false},
      {"--etp", "etp", "expert_tensor_parallel_size", {}, false},
      {"--recompute", "recompute", "recompute_granularity", {}, false}};
  for (auto& d : dims) {
    if (!args.has(d.flag)) continue;
    if ((d.flag == "--ep" || d.flag == "--etp") && !moe)
      throw InputError(d.flag, d.param + " applies to MoE scenarios; " + source +
                                   " is dense (its workload has no num_experts > 0)");
    if (d.flag == "--recompute") {
      d.values = string_list(args.get(d.flag), d.flag, {"none", "selective", "full"});
    } else {
      for (long long v : int_list(args.get(d.flag), d.flag)) d.values.push_back(v);
    }
    Json current;
    if (wp.contains(d.param)) current = wp[d.param];
    else if (d.flag == "--cp" || d.flag == "--ep") current = 1;
    else if (d.flag == "--recompute") current = defaults.recompute_granularity;
    if (d.flag == "--vp" && wp.contains("num_layers_per_virtual_pipeline_stage")) current = Json();
    d.searched = !(d.values.size() == 1 && d.values[0] == current);
  }
  std::erase_if(dims, [](const Dim& d) { return !d.searched; });
  const bool extended = !dims.empty() || args.has("--memory");
  const long long scenario_cp = wp.value("context_parallel_size", 1LL);

  sim::SweepSpec spec;
  spec.file = source;
  spec.base = base;
  spec.base_source = source;
  if (!comm_model.empty()) spec.run_options = std::string("comm_model=") + comm_model;  // as fabricsim sweep
  spec.input_columns = {"nodes", "tp", "pp", "mbs"};
  for (const auto& d : dims) spec.input_columns.push_back(d.column);
  std::vector<Candidate> cands;
  // Every combination of the searched dimensions' values, first dimension slowest.
  std::vector<std::vector<Json>> combos = {{}};
  for (const auto& d : dims) {
    std::vector<std::vector<Json>> next;
    for (const auto& c : combos)
      for (const auto& v : d.values) {
        next.push_back(c);
        next.back().push_back(v);
      }
    combos = std::move(next);
  }
  for (long long n : nodes)
    for (long long tp : tps)
      for (long long pp : pps)
        for (long long m : mbss)
          for (const auto& combo : combos) {
            sim::SweepPoint p;
            p.index = spec.points.size();
            p.inputs = {std::to_string(n), std::to_string(tp), std::to_string(pp), std::to_string(m)};
            p.set = {{"/topology/params/nodes", n},
                     {"/workload/params/tensor_model_parallel_size", tp},
                     {"/workload/params/pipeline_model_parallel_size", pp},
                     {"/workload/params/micro_batch_size", m}};
            Candidate c;
            c.nodes = n;
            c.tp = tp;
            c.pp = pp;
            c.mbs = m;
            c.cp = scenario_cp;
            c.extra = combo;
            for (std::size_t k = 0; k < dims.size(); ++k) {
              p.inputs.push_back(json_text(combo[k]));
              p.set.push_back({"/workload/params/" + dims[k].param, combo[k]});
              if (dims[k].flag == "--cp") c.cp = combo[k].get<long long>();
              if (dims[k].flag == "--vp" && wp.contains("num_layers_per_virtual_pipeline_stage"))
                p.set.push_back({"/workload/params/num_layers_per_virtual_pipeline_stage", 0});
            }
            spec.points.push_back(p);
            cands.push_back(std::move(c));
          }
  for (auto& p : spec.points) {  // interleaving needs PP > 1
    if (cands[p.index].pp == 1 && wp.contains("num_layers_per_virtual_pipeline_stage"))
      p.set.push_back({"/workload/params/num_layers_per_virtual_pipeline_stage", 0});
    sim::point_scenario(spec, p);
  }

  auto meets = [&](const sim::RunResult& r) {
    return by_tokens ? r.tokens_per_s * 86400.0 >= target_tokens_per_day : r.iteration_s <= target_step_s;
  };
  // Before simulating a cluster size: the generator's own checks on every candidate of that size (one System
  // per size); a refused candidate gets the row the simulation would have written.
  auto precheck = [&](const std::vector<std::size_t>& todo, std::map<std::size_t, std::string>& rows) {
    std::vector<std::size_t> run;
    if (todo.empty()) return run;
    std::optional<models::System> sys;
    try {
      sys.emplace(sim::scenario_system(workloads::scenario_from_json(sim::point_scenario(spec, spec.points[todo[0]]), source)));
    } catch (const InputError&) {
      return todo;  // the simulation reports it, candidate by candidate
    }
    const long long cluster_gpus = static_cast<long long>(sys->topology().gpus().size());
    for (std::size_t i : todo) {
      const sim::SweepPoint& p = spec.points[i];
      Candidate& c = cands[i];
      c.paid = cluster_gpus;
      try {
        workloads::Scenario sc = workloads::scenario_from_json(sim::point_scenario(spec, p), source);
        const models::ComputeModel cm =
            workloads::scenario_compute_model(sc, sys->topology(), sys->calibration().named_factors());
        workloads::ParamMap pm = workloads::generator_params(sc, sys->topology(), cm);
        // The generator's checks at the world size in pm: the layout (InputError), then the memory per GPU
        // (DoesNotFitError, with the peak and its largest term kept for the CSV).
        auto check = [&](workloads::GptConfig& g) {
          g = workloads::gpt_config_from_params(pm, sc.workload.where);
          try {
            c.peak_bytes = workloads::check_gpt_layout_and_memory(g, sc.workload.where).total_bytes();
          } catch (const DoesNotFitError&) {
            const workloads::GptMemory mem = workloads::gpt_memory_per_gpu(g);
            c.peak_bytes = mem.total_bytes();
            c.largest_term = mem.largest_term();
            throw;
          }
        };
        workloads::GptConfig g;
        try {
          check(g);
        } catch (const DoesNotFitError&) {
          throw;
        } catch (const InputError&) {
          // Refused on every GPU of the cluster: Megatron's world is TP x PP x CP x DP, so the job may run on
          // fewer GPUs than the nodes hold (as a scenario's world_size below the topology's GPUs does), the
          // rest idle. The largest world size the generator accepts, if any; else the refusal stands.
          if (all_gpus) throw;
          const long long mp = c.tp * c.pp * c.cp;
          for (long long k = (cluster_gpus - 1) / mp; k >= 1 && c.world == 0; --k) {
            pm["world_size"] = std::to_string(k * mp);
            try {
              check(g);
              c.world = k * mp;
            } catch (const DoesNotFitError& e) {
              throw DoesNotFitError("on " + std::to_string(k * mp) + " of the " + std::to_string(cluster_gpus) +
                                    " GPUs (the largest world size the layout allows): " + e.what());
            } catch (const InputError&) {
            }
          }
          if (c.world == 0) throw;
          spec.points[i].set.push_back({"/workload/params/world_size", c.world});
          // Whether the global batch is what keeps the layout off the idle GPUs: the data-parallel size on
          // every GPU does not divide it.
          if (cluster_gpus % mp == 0 && g.global_batch_size % (g.micro_batch_size * (cluster_gpus / mp)) != 0) {
            c.full_dp = cluster_gpus / mp;
            c.gbs = g.global_batch_size;
          }
        }
        run.push_back(i);
      } catch (const DoesNotFitError& e) {
        c.error = e.what();
        c.refused = Refused::Memory;
        rows[i] = sim::sweep_csv_row_failed(spec, p, c.error, "does_not_fit");
      } catch (const InputError& e) {
        c.error = e.what();
        c.refused = Refused::Layout;
        rows[i] = sim::sweep_csv_row_failed(spec, p, c.error);
      }
    }
    return run;
  };
  std::map<std::size_t, std::string> rows;
  std::size_t feasible = 0, infeasible = 0, run_count = 0, simulated = 0;
  for (std::size_t ni = 0; ni < nodes.size(); ++ni) {
    std::vector<std::size_t> todo;
    for (const auto& p : spec.points)
      if (cands[p.index].nodes == nodes[ni]) todo.push_back(p.index);
    run_count += todo.size();
    todo = precheck(todo, rows);
    simulated += todo.size();
    sim::SweepRunOptions ro;
    ro.threads = static_cast<int>(threads);
    ro.progress = !quiet;
    sim::ScenarioRunner runner = [&](const Json& scen, const std::string& src) {
      workloads::Scenario sc = workloads::scenario_from_json(scen, src);
      sim::ScenarioRunOptions o;
      o.comm_model = comm_model;
      o.replay.record_ops = false;  // plan reads the figures only
      return sim::run_scenario(sc, o).result;
    };
    ro.on_result = [&](std::size_t index, const sim::RunResult& r) {
      cands[index].ok = true;
      cands[index].r = r;
      std::vector<sim::OpRecord>().swap(cands[index].r.ops);  // keep only the figures (and free the rest)
      std::vector<sim::LinkRecord>().swap(cands[index].r.links);
      if (auto it = r.metrics.find("memory_per_gpu_bytes.max"); it != r.metrics.end()) cands[index].peak_bytes = it->second;
    };
    ro.on_row = [&](std::size_t index, const std::string& row, bool ok, const std::string& error) {
      if (ok) return;
      cands[index].error = error;
      cands[index].refused = sim::sweep_row_status(spec, row) == "does_not_fit" ? Refused::Memory : Refused::Layout;
    };
    auto got = sim::run_sweep_points(spec, todo, runner, ro);
    for (const auto& [i, row] : got) rows[i] = row;
    feasible = infeasible = 0;
    for (const auto& [i, row] : rows) {
      Candidate& c = cands[i];
      if (!c.ok) ++infeasible;
      else if (meets(c.r)) ++feasible;
      else c.refused = Refused::Target;
    }
    if (feasible >= static_cast<std::size_t>(top)) break;
  }
  if (args.has("--output")) {
    std::string csv = sim::sweep_csv(spec, rows);
    if (extended) {  // per candidate: peak memory per GPU, the largest term when it does not fit, why refused
      std::ostringstream out;
      std::istringstream in(csv);
      std::string line;
      std::getline(in, line);
      out << line << ",peak_memory_GiB,memory_largest_term,refused_for\n";
      for (const auto& [i, row] : rows) {
        std::getline(in, line);
        const Candidate& c = cands[i];
        char buf[32] = "";
        if (c.peak_bytes >= 0) std::snprintf(buf, sizeof buf, "%.2f", c.peak_bytes / 1073741824.0);
        static const char* why[] = {"", "layout", "memory", "target"};
        out << line << "," << buf << "," << (c.refused == Refused::Memory ? c.largest_term : "") << ","
            << why[static_cast<int>(c.refused)] << "\n";
      }
      csv = out.str();
    }
    write_file_atomic(args.get("--output"), csv);
  }

  std::vector<const Candidate*> good;
  for (const auto& c : cands)
    if (c.ok && meets(c.r)) good.push_back(&c);
  // Cost is the GPUs paid for: the cluster's, also where a layout leaves some of them idle.
  auto paid = [](const Candidate* c) { return c->paid > 0 ? c->paid : static_cast<long long>(c->r.gpus); };
  std::sort(good.begin(), good.end(), [&](const Candidate* a, const Candidate* b) {
    if (paid(a) != paid(b)) return paid(a) < paid(b);
    if (a->r.iteration_s != b->r.iteration_s) return a->r.iteration_s < b->r.iteration_s;
    return a < b;  // enumeration order: nodes, tp, pp, mbs, then the further dimensions
  });
  std::ostringstream o;
  o << "plan: " << source << " (" << parsed.topology << "), target "
    << (by_tokens ? std::to_string(static_cast<long long>(target_tokens_per_day)) + " tokens/day"
                  : format_time(target_step_s) + " per step")
    << "\n";
  if (!extended) {
    // (candidates the generator's checks refuse are not simulated: they count as infeasible)
    o << "evaluated " << run_count << " candidates: " << feasible << " meet the target, "
      << run_count - feasible - infeasible << " too slow, " << infeasible
      << " infeasible (layout, batch or memory does not fit)\n";
  } else {
    std::size_t layout = 0, memory = 0;
    std::map<std::string, std::size_t> terms;
    for (const auto& [i, row] : rows) {
      if (cands[i].refused == Refused::Layout) ++layout;
      if (cands[i].refused == Refused::Memory) {
        ++memory;
        ++terms[cands[i].largest_term];
      }
    }
    o << run_count << " candidates, " << simulated << " simulated: " << feasible << " meet the target; refused: "
      << layout << " for layout (divisibility, batch, pipeline split), " << memory << " for memory";
    if (!terms.empty()) {
      o << " (largest term:";
      const char* sep = " ";
      for (const auto& [t, n] : terms) {
        o << sep << t << " " << n;
        sep = ", ";
      }
      o << ")";
    }
    o << ", " << run_count - feasible - infeasible << " for the target (too slow)\n";
  }
  {
    std::size_t fewer = 0;
    for (const auto& [i, row] : rows) fewer += cands[i].ok && cands[i].world > 0;
    if (fewer > 0)
      o << fewer << (fewer == 1 ? " candidate" : " candidates")
        << " ran on fewer GPUs than their nodes hold (refused on all of them: each on the largest world size "
           "TP x PP x CP x DP its layout and the global batch allow, the rest idle)\n";
  }
  if (good.empty()) {
    o << "no configuration meets the target within the searched range\n";
    // Nothing was simulated: say why the first candidate was refused (a value of the scenario the generator
    // refuses whatever the layout reads as every candidate refused otherwise: found by fuzzing).
    if (run_count > 0 && infeasible == run_count) {
      // By reason: the refusals' texts with their numbers masked, each with its count and first candidate.
      std::vector<std::pair<std::string, std::pair<int, const Candidate*>>> reasons;
      for (const auto& c : cands) {
        if (c.ok || c.error.empty()) continue;
        std::string key;
        for (char ch : c.error)
          if (!std::isdigit(static_cast<unsigned char>(ch))) key += ch;
          else if (key.empty() || key.back() != '#') key += '#';
        auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& x) { return x.first == key; });
        if (it == reasons.end()) reasons.push_back({key, {1, &c}});
        else ++it->second.first;
      }
      o << "every candidate was refused, for " << reasons.size() << (reasons.size() == 1 ? " reason" : " reasons")
        << " (count, the first such candidate, its error):\n";
      for (const auto& [key, n] : reasons) {
        const Candidate& c = *n.second;
        o << "  " << n.first << " x, first nodes " << c.nodes << " TP " << c.tp << " PP " << c.pp << ": " << c.error << "\n";
      }
    }
    std::cout << o.str();
    return 1;
  }
  char buf[256];
  auto dim_header = [&]() {
    std::string h;
    for (const auto& d : dims) {
      std::snprintf(buf, sizeof buf, d.flag == "--recompute" ? " %-9s" : " %4s",
                    d.flag == "--recompute" ? "recompute" : d.column == "etp" ? "ETP" : d.column == "cp" ? "CP"
                                                                           : d.column == "vp" ? "VP" : "EP");
      h += buf;
    }
    return h;
  };
  bool idle = false;  // a printed configuration leaves GPUs idle: the GPU column says used/paid
  for (std::size_t i = 0; i < good.size() && i < static_cast<std::size_t>(top); ++i) idle = idle || good[i]->world > 0;
  std::snprintf(buf, sizeof buf, idle ? "%-4s %6s %9s %4s %4s" : "%-4s %6s %6s %4s %4s", "#", "nodes",
                idle ? "used/paid" : "GPUs", "TP", "PP");
  o << buf << dim_header();
  std::snprintf(buf, sizeof buf, " %5s %4s %12s %14s %10s %12s %10s", "DP", "MBS", "step_s", "tokens/day", "TFLOP/s",
                "exposed_s", "bubble_s");
  o << buf << (extended ? "    peak_GiB\n" : "\n");
  for (std::size_t i = 0; i < good.size() && i < static_cast<std::size_t>(top); ++i) {
    const Candidate& c = *good[i];
    if (idle)
      std::snprintf(buf, sizeof buf, "%-4zu %6lld %9s %4lld %4lld", i + 1, c.nodes,
                    (std::to_string(c.r.gpus) + "/" + std::to_string(paid(&c))).c_str(), c.tp, c.pp);
    else
      std::snprintf(buf, sizeof buf, "%-4zu %6lld %6d %4lld %4lld", i + 1, c.nodes, c.r.gpus, c.tp, c.pp);
    o << buf;
    for (std::size_t k = 0; k < dims.size(); ++k) {
      std::snprintf(buf, sizeof buf, dims[k].flag == "--recompute" ? " %-9s" : " %4s", json_text(c.extra[k]).c_str());
      o << buf;
    }
    long long dp = c.r.gpus / (c.tp * c.pp * (extended ? c.cp : 1));
    std::snprintf(buf, sizeof buf, " %5lld %4lld %12.4f %14.4g %10.1f %12.4f %10.4f", dp, c.mbs, c.r.iteration_s,
                  c.r.tokens_per_s * 86400.0, c.r.tflops_per_gpu, exposed_total(c.r), c.r.breakdown.bubble_s);
    o << buf;
    if (extended) {
      std::snprintf(buf, sizeof buf, " %11.2f\n", c.peak_bytes / 1073741824.0);
      o << buf;
    } else {
      o << "\n";
    }
  }
  // Why a printed configuration leaves GPUs idle, where the global batch is the reason, and the global batch
  // sizes near the scenario's that would use them all.
  for (std::size_t i = 0; i < good.size() && i < static_cast<std::size_t>(top); ++i) {
    const Candidate& c = *good[i];
    if (c.world == 0 || c.full_dp == 0) continue;
    const long long q = c.mbs * c.full_dp, below = c.gbs / q * q;
    o << "#" << i + 1 << " uses " << c.r.gpus << " of " << c.paid << " GPUs: global_batch_size " << c.gbs
      << " is not a multiple of micro_batch_size x data-parallel size on all of them (" << c.mbs << " x " << c.full_dp
      << "); " << (below > 0 ? std::to_string(below) + " or " : std::string()) << below + q << " would be\n";
    break;
  }
  std::cout << o.str();
  return 0;
}

}  // namespace fabricsim::cli
