#pragma once
// Sweeps: many scenario runs, one CSV row each (docs/outputs.md, "fabricsim sweep").
//
// A sweep file names a base scenario and the values to vary. Each varied value is written into a copy of
// the scenario JSON at a JSON pointer (so a sweep can vary anything a scenario has: topology preset and its
// parameters, workload parameters, calibration), the copy's "outputs" section is dropped, and the point is
// run by a ScenarioRunner (the `fabricsim run` path). Points run in parallel threads, one simulation per
// thread; failures become rows with status "failed" and the error text (a layout that needs more GPU memory
// than the GPU has: status "does_not_fit", an answer rather than a failure); rows come out ordered by point
// index whatever the thread count (or MPI rank count, apps/cmd_sweep.cpp), so the CSV is byte-identical.
//
//   {"scenario": "base.json" | {...inline scenario...},
//    "mode": "grid" | "list",                       // grid: cartesian product of axes, first axis slowest
//    "axes": [ {"name": "nodes", "path": "/topology/params/nodes", "values": [1, 2, 4]},
//              {"name": "layout", "values": [ {"label": "tp8pp1", "set": {"/workload/params/tp": 8, ...}},
//                                             ...]} ],
//    "points": [ {"label": "a", "set": {"/topology/params/nodes": 2, ...}}, ... ],   // list mode
//    "metrics": ["memory_per_gpu_bytes.max"],      // RunResult::metrics to add as columns (optional)
//    "output": "results.csv", "threads": 0}         // output relative to the current directory; 0 = all cores
#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sim/base/json_reader.hpp"
#include "replay/result.hpp"

namespace fabricsim::sim {

struct SweepPoint {
  std::size_t index = 0;
  std::vector<std::string> inputs;                   // one text per input column (axis / "label")
  std::vector<std::pair<std::string, Json>> set;     // JSON pointer -> value, applied in order
};

struct SweepSpec {
  std::string file;                    // the sweep file (for messages)
  Json base;                           // base scenario JSON
  std::string base_source;             // where the base came from (file path, or "<sweep>#/scenario")
  std::vector<std::string> input_columns;
  std::vector<SweepPoint> points;
  std::vector<std::string> metric_columns;
  std::string output;                  // CSV path ("" = stdout)
  int threads = 0;                     // 0 = hardware concurrency
  // Settings outside the scenario that change every point's result (the CLI's --comm-model override);
  // part of each row's input_hash, so a resumed sweep does not reuse rows computed under other settings.
  std::string run_options;
};

// Parses a sweep file (unknown keys, empty axes, bad pointers are InputErrors naming the JSON path).
SweepSpec parse_sweep(const Json& j, const std::string& file);
SweepSpec load_sweep(const std::string& path);

// The scenario JSON for one point (base with the point's values set; "outputs" removed). Throws
// InputError when a pointer cannot be set (e.g. it goes through a non-object).
Json point_scenario(const SweepSpec& s, const SweepPoint& p);

// Runs one scenario; `source` is the base scenario's file name (relative names inside the scenario resolve
// against its directory). Must be safe to call from several threads at once (no shared mutable state).
using ScenarioRunner = std::function<RunResult(const Json& scenario, const std::string& source)>;

// CSV layout: point, <inputs...>, status, error, gpus, iteration_s, samples_per_s, tokens_per_s,
// tflops_per_gpu, gpu_seconds_per_step, compute_s, exposed_{tp,pp,dp,ep,all_to_all,other}_s,
// exposed_comm_total_s, bubble_s, idle_s, <metrics...>, input_hash
std::string sweep_csv_header(const SweepSpec& s);
// One line of such a CSV split into fields (RFC 4180 quoting: "a,b" and "" inside quotes).
std::vector<std::string> parse_csv_line(const std::string& line);
std::string sweep_csv_row_ok(const SweepSpec& s, const SweepPoint& p, const RunResult& r);
std::string sweep_csv_row_failed(const SweepSpec& s, const SweepPoint& p, const std::string& error,
                                 const std::string& status = "failed");

// A point's input fingerprint: 16 hex digits of FNV-1a 64 over the base scenario's JSON (not its path, so
// running from another directory keeps the rows), the point's (pointer, value) list and s.run_options.
// Equal inputs give equal hashes on every machine. Files the scenario names (calibration, DLRM configs) are
// not read, and the fabricsim build is not part of it: after changing those, write to a new output.
std::string point_input_hash(const SweepSpec& s, const SweepPoint& p);

// Rows already present in an existing output CSV, by point index (for resume). Checks the header and that
// each row's inputs match the point of that index; a mismatch is an InputError (the axes changed). A row
// whose input_hash differs from the point's (the base scenario or the run options changed) is not
// returned, so the point runs again; `stale` (optional) counts them.
std::map<std::size_t, std::string> read_done_rows(const SweepSpec& s, const std::string& csv_text,
                                                  const std::string& csv_name, std::size_t* stale = nullptr);

struct SweepRunOptions {
  int threads = 1;
  // Called (under a lock, in completion order) with each finished row; e.g. append it to the CSV so an
  // interrupted sweep can resume. May be empty.
  std::function<void(std::size_t index, const std::string& row, bool ok, const std::string& error)> on_row;
  // Called (under the same lock) with each successful point's full result, before on_row. May be empty.
  std::function<void(std::size_t index, const RunResult& result)> on_result;
  bool progress = false;  // progress bar on stderr (only drawn when stderr is a TTY)
};

// Runs `todo` (indices into s.points) on `opt.threads` threads; returns index -> CSV row (with '\n').
std::map<std::size_t, std::string> run_sweep_points(const SweepSpec& s, const std::vector<std::size_t>& todo,
                                                    const ScenarioRunner& run, const SweepRunOptions& opt);

// A CSV row's (as produced above) status: "ok", "failed" or "does_not_fit".
std::string sweep_row_status(const SweepSpec& s, const std::string& row);

// The complete CSV text: header + rows ordered by index.
std::string sweep_csv(const SweepSpec& s, const std::map<std::size_t, std::string>& rows);

}  // namespace fabricsim::sim
