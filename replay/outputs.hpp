#pragma once
// Output writers for one simulation (docs/outputs.md describes every format and docs/result.schema.json
// the result JSON). All of them read only a sim::RunResult, never the engine, and all are deterministic:
// same RunResult -> byte-identical files (ordered containers, fixed float formatting; wall_s is never
// written). Times in seconds, sizes in bytes, rates in bytes/s unless a name says otherwise.
//
// How a subcommand uses this (apps/cmd_run.cpp, apps/cmd_coll.cpp):
//   for (const auto& f : sim::output_flags()) args.flag({f.name, "", f.value_name, f.help, "", false});
//   ...
//   sim::OutputOptions out = sim::output_options_from_json(scenario_outputs_json, path);  // optional
//   sim::merge_output_flags(out, [&](const std::string& n) -> std::optional<std::string> {
//     if (!args.has(n)) return std::nullopt; return args.get(n); });
//   ... run, fill a RunResult ...
//   std::cout << sim::summary_text(result, out.top_links);
//   sim::write_outputs(result, out);   // writes each requested file atomically
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sim/base/json_reader.hpp"
#include "replay/result.hpp"

namespace fabricsim::sim {

// Which files to write. Empty path = not written. Relative paths are relative to the current directory.
struct OutputOptions {
  std::string timeline_path;    // Chrome trace event JSON (Perfetto / chrome://tracing)
  std::string link_stats_path;  // per-link statistics: CSV, or JSON when the name ends in ".json"
  std::string json_path;        // result JSON (docs/result.schema.json)
  std::string report_path;      // self-contained HTML report
  int top_links = 10;           // hottest link directions in the summary / result JSON / report
  int timeline_links = 16;      // link directions given a utilisation counter track in the timeline
  bool quiet = false;           // no progress bar
};

// The command-line flags every simulating subcommand accepts, declared once here.
struct OutputFlag {
  std::string name;        // "--timeline"
  std::string value_name;  // "FILE"; empty for a switch
  std::string help;
};
std::vector<OutputFlag> output_flags();

// Reads a scenario's "outputs" object: keys timeline, link_stats, json, report (file names), top_links,
// timeline_links (integers >= 0 / >= 1), quiet (bool). Unknown keys are InputErrors naming the path.
OutputOptions output_options_from_json(const Json& outputs, const JsonPath& at);
// Overrides `opts` with the flags given on the command line. `lookup(name)` returns the flag's value
// (for a switch any value) or nullopt when the flag was not given. Bad integers -> InputError naming it.
void merge_output_flags(OutputOptions& opts,
                        const std::function<std::optional<std::string>(const std::string&)>& lookup);

// ---- derived statistics ------------------------------------------------------------------------------

// One direction of one link, with the figures the outputs print.
struct LinkDirSummary {
  std::uint32_t link = 0;
  int dir = 0;               // 0: a->b, 1: b->a
  std::string from, to, kind;
  int tier = 0;
  double capacity_Bps = 0;
  double bytes = 0;
  double busy_s = 0;
  double util_avg_busy = 0;  // bytes / (capacity * busy_s): how hard it ran while it ran
  double util_avg_run = 0;   // bytes / (capacity * span_s): its share of the whole run
  double util_peak = 0;      // max of peak_util and the series maximum
};

// The simulated span the run averages use: max(iteration_s, latest op end, latest series point).
double run_span_s(const RunResult& r);
// Every link direction that carried bytes (or has a series), ordered by (link id, direction).
std::vector<LinkDirSummary> link_dir_stats(const RunResult& r);
// The `n` hottest directions: by util_avg_run descending, then bytes descending, then (link, dir).
std::vector<LinkDirSummary> hottest_links(const RunResult& r, int n);

// What a planner calls a link: "NVLink", "PCIe" (inside a host, tier 0), "NIC - leaf" (tier 1),
// "leaf - spine uplink" (tier 2), "spine - core uplink" (tier 3).
std::string link_class(const std::string& kind, int tier);
// link_class in lower case with runs of other characters as one '_' ("NIC - leaf" -> "nic_leaf"): metric names.
std::string link_class_slug(const std::string& kind, int tier);

// Ranks grouped by role: ranks that ran the same ops (stream, kind, category, name, in stream order) share
// one; roles in order of their lowest rank; `representative` is that rank.
struct RankRole {
  int representative = 0;
  std::vector<int> ranks;  // ascending
};
std::vector<RankRole> rank_roles(const RunResult& r);

// ---- writers (strings; write_outputs puts them in files) ----------------------------------------------

std::string timeline_json(const RunResult& r, int counter_links);
std::string link_stats_csv(const RunResult& r);
std::string link_stats_json(const RunResult& r);
Json result_json(const RunResult& r, int top_links);  // schema_version 1
std::string report_html(const RunResult& r, int top_links);
// Human-readable summary for stdout: step time, throughput, breakdown, top-N hottest link directions.
// Cluster scenarios (RunResult::jobs): the per-job table of the summary (step together vs alone, slowdown,
// shared links), the report's bar chart (SVG: each job's step alone and together) and its HTML section.
std::string jobs_text(const RunResult& r);
std::string svg_jobs(const RunResult& r);
std::string jobs_html(const RunResult& r);
std::string summary_text(const RunResult& r, int top_links);
std::string hottest_links_text(const RunResult& r, int top_links);

// Writes every file named in `opts` (atomically; a failure throws InputError naming the file).
void write_outputs(const RunResult& r, const OutputOptions& opts);
// check_output_path for every file named in `opts` (call before simulating).
void check_output_paths(const OutputOptions& opts);

}  // namespace fabricsim::sim
