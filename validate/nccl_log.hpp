#pragma once
// Reading collective measurements into typed structs, once, at the edge.
//
// Three inputs are understood:
//  1. nccl-tests text output (all_reduce_perf & co.), in both layouts seen in the shared data:
//     - the legacy layout (nccl-tests < 2.10, e.g. ABCI 2.0 logs): no root column, an `error` column with
//       the max numeric error, rank lines "Rank  0 Pid 123 on host device 0 [0x27] GPU name";
//     - the current layout: a `root` column, `#wrong` counts (or "N/A"), rank lines with "Group N", an
//       optional "# nccl-tests version ..." / "# Collective test starting: ..." preamble, and header keys
//       added by forks (the NVIDIA DGXC build adds "side_work: 0 work_sms: 0 direction: H2D").
//     A file may hold several runs (several headers + tables); each becomes one Measurement. Lines that are
//     not part of a run (UCX warnings, shell banners, markdown fences) are ignored; lines that look like a
//     table row but do not parse are errors naming the file and line.
//  2. A "busbw-only" markdown table (| Message Size (Bytes) | ... (GB/s) |), as published by the Azure
//     AI-benchmarking guide. It is a different format -- no times, no algbw, size labels such as "65K" or
//     "1G" -- so it has its own parser; its rows carry only the in-place busbw.
//  3. The collective-results JSON ("schema": "fabricsim.collective_results/1", docs/collectives.md and
//     docs/validation.md) written by `fabricsim coll --json` ("source": "simulation") and by
//     fabricsim-nccl-bench ("source": "measurement"; adds host names, NICs, NCCL version, env, in-place
//     results and #wrong).
//
// Units: sizes in bytes; times as printed (microseconds, field names say _us) and converted to seconds in
// helpers; bandwidths as printed by nccl-tests in GB/s (1 GB = 1e9 bytes, field names say _GBps).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/json_reader.hpp"

namespace fabricsim::validate {

// One "Rank N [Group G] Pid P on HOST device D [BUSID] GPU NAME" line.
struct RankInfo {
  int rank = -1;
  int group = -1;  // -1 when the layout has no Group field
  long long pid = -1;
  std::string host;
  int device = -1;
  std::string bus_id;  // "0x27" or "0000:19:00"
  std::string gpu_name;  // "A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"
  std::size_t line = 0;  // its line in the text log (0: not from one), for messages
};

// The "# nThread 1 nGpus 1 minBytes ... " line. Keys not listed here land in `extra` verbatim.
struct RunHeader {
  int nthread = 0;
  int ngpus = 0;
  std::uint64_t min_bytes = 0;
  std::uint64_t max_bytes = 0;
  std::string step;  // "2(factor)" or "1048576(bytes)", as printed
  int warmup_iters = 0;
  int iters = 0;
  int agg_iters = 0;        // 0 when absent (legacy)
  int validation = 0;
  int graph = 0;            // 0 when absent
  std::map<std::string, std::string> extra;  // e.g. side_work, work_sms, direction
};

// One placement (out-of-place or in-place) of a table row.
struct Side {
  bool present = false;        // false: the source did not report it (busbw-only tables)
  double time_us = 0;          // 0 when not present
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  std::optional<double> error;  // legacy layout: max numeric error
  std::optional<long long> wrong;  // current layout: #wrong; nullopt for "N/A" or legacy
};

struct Row {
  std::uint64_t size_bytes = 0;
  std::uint64_t count = 0;     // elements; 0 when not reported
  std::string type;            // "float"
  std::string redop;           // "sum", "none"
  std::optional<int> root;     // current layout only (-1 for rootless ops)
  Side oop, ip;
};

// What NCCL itself chose for one call size, from its NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING lines (NCCL >=
// 2.24 prints, on rank 0, "AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}" per call).
struct NcclChoice {
  std::string algorithm;  // NCCL's name, lower case: "ring", "tree", "nvls", "nvls_tree", "collnet_direct", ...
  std::string protocol;   // "ll", "ll128", "simple"
  int channels = 0;       // channelHi - channelLo + 1
  int calls = 0;          // how many logged calls of this size made this choice
};

// The comment line (after "# ") with which fabricsim-nccl-bench's text says its rows are the slowest rank's
// loop time; the parser keys on its first word.
inline constexpr const char* kBenchTimeLine =
    "fabricsim-nccl-bench: time = the slowest rank's loop time / iters (nccl-tests prints rank 0's)";

struct Measurement {
  std::string source;          // file the run came from (plus "#run N" when a file holds several)
  std::string format;          // "nccl-tests", "nccl-tests-legacy", "busbw-markdown", "fabricsim-json",
                               // "fabricsim-json-simulation"; "fabricsim-nccl-bench" while the bench builds it
  std::string op;              // fabricsim name: all_reduce, all_gather, reduce_scatter, broadcast, reduce,
                               // all_to_all, sendrecv (empty if unknown)
  int nranks = 0;              // ranks in the communicator (0 if the source does not say)
  int num_nodes = 0;           // distinct hosts (from the rank lines, else from hints; 0 if unknown)
  std::vector<std::string> hosts;  // distinct hosts in rank order of first appearance
  std::string gpu_model;       // GPU name as printed by the source ("" if unknown)
  std::string nccl_tests_version;  // "2.17.9" when printed
  std::string nccl_version;    // "22602", "2.29.7+cuda12.9" ... as printed ("" if unknown)
  std::optional<RunHeader> header;
  std::vector<RankInfo> ranks;
  std::vector<Row> rows;
  std::optional<double> avg_busbw_GBps;  // "# Avg bus bandwidth" summary
  std::optional<long long> out_of_bounds;  // "# Out of bounds values : 0 OK"
  std::map<std::string, std::string> env;  // NCCL_ALGO, NCCL_PROTO ... when the source records them
  std::vector<std::string> nics;           // NIC names when the source records them
  std::string algorithm, protocol;         // when known (fabricsim JSON), else ""
  // GPUs one host thread drives (nccl-tests -g / the header's nGpus; fabricsim-nccl-bench's single-process
  // mode drives all of them); 0 when the source does not say. Such a thread launches one kernel per GPU for
  // every call, which puts a floor under the measured time (models::host_launch_floor_s).
  int gpus_per_thread = 0;
  // Back-to-back calls timed per size (nccl-tests -n: the header's iters, JSON system.iters); 0 = not recorded.
  // A simulation (`fabricsim coll --json`) records it only when it simulated the loop (--iters).
  int loop_iters = 0;
  // Whose loop time the rows hold: false = rank 0's (nccl-tests prints process 0's), true = the slowest rank's
  // (fabricsim-nccl-bench: its text says so in a "# fabricsim-nccl-bench:" line after "Collective test
  // starting", its JSON in system.format). For calls that overlap (broadcast, reduce) the two differ.
  bool slowest_rank_time = false;
  // NCCL's own choice per size (nccl-tests size convention, bytes), when the log has its TUNING lines; the most
  // frequent one when calls of one size differ. Empty otherwise.
  std::map<std::uint64_t, NcclChoice> nccl_choices;
  // What a .meta.json sidecar states about where the run came from: its "system" text, and its "interconnect"
  // and "nic" texts joined. Empty for a bare log. validate maps a multi-host run to a topology only when these
  // state the system and its network (validate/simulate.cpp map_system).
  std::string stated_system, stated_network;
  // The scale-out fabric as the source describes it (.meta.json "interconnect" and "nic"); "" if unknown.
  std::string interconnect, nic;
};

// Parses one NCCL TUNING line ("... NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto LL
// channel{Lo..Hi}={0..23}"): the collective (fabricsim op name), the bytes NCCL logs (count x type size: per
// rank for all_gather / reduce_scatter), and the choice. Returns false for any other line.
bool parse_nccl_tuning_line(const std::string& line, std::string& op, std::uint64_t& logged_bytes, NcclChoice& c);

// Hints from outside the log (a .meta.json sidecar or CLI flags) for what the text does not say.
struct ParseHints {
  std::string op;      // fabricsim op name or nccl-tests binary name ("all_reduce_perf")
  int nranks = 0;
  int nodes = 0;
  std::string gpu_model;
  std::string nccl_version;
  std::string algorithm;  // NCCL_ALGO the run used, lower case ("ring"), when known
  int gpus_per_thread = 0;  // nccl-tests -g, when known
  std::string interconnect, nic;  // the sidecar's fabric description, when known
};

// The value of nccl-tests' "-g N" flag in a command line that names a test binary ("all_reduce_perf -b 8
// -e 8G -f 2 -g 8", "sendrecv_perf (float), -g 8"); 0 when there is none. Throws InputError naming `where`
// when the flag has no positive integer value.
int nccl_tests_gpus_flag(const std::string& text, const std::string& where);

// The NCCL_NAME=value settings a text quotes ("mpirun ... -x NCCL_MIN_CTAS=24 -x NCCL_ALGO=Ring ...", "Env:
// NCCL_NET_GDR_LEVEL=1, NCCL_P2P_LEVEL=NVL"); the first mention of a name wins. Names without "=" are skipped.
std::map<std::string, std::string> nccl_env_settings(const std::string& text);

// Maps "all_reduce_perf", "allreduce", "AllReduce", "sendrecv_perf", "alltoall" ... to fabricsim op names;
// returns "" when unknown.
std::string normalize_op(const std::string& name);

// nccl-tests bus-bandwidth factor: busbw = algbw * factor (all_reduce 2(n-1)/n, all_gather and
// reduce_scatter (n-1)/n, all_to_all (n-1)/n, broadcast/reduce/sendrecv 1). Source: nccl-tests
// doc/PERFORMANCE.md.
double busbw_factor(const std::string& op, int nranks);

// Removes the per-line prefixes job launchers add: `mpirun --tag-output` ("[1,0]<stdout>:", "[1,3]<stderr>:")
// and `srun --label` ("0: ", "12: "). Other lines are unchanged. parse_nccl_tests_text applies it.
std::string strip_launcher_prefixes(const std::string& text);

// Parses nccl-tests text (format 1) or a busbw markdown table (format 2), chosen by content. Throws
// InputError naming `source` and the line for malformed input, and when no run is found.
std::vector<Measurement> parse_nccl_tests_text(const std::string& text, const std::string& source,
                                               const ParseHints& hints = {});
std::vector<Measurement> parse_busbw_markdown(const std::string& text, const std::string& source,
                                              const ParseHints& hints = {});

// The collective-results JSON (format 3).
extern const char* kCollectiveResultsSchema;  // "fabricsim.collective_results/1"
Measurement measurement_from_json(const Json& doc, const std::string& source);
Json measurement_to_json(const Measurement& m);

// Reads one input path: *.json -> collective-results JSON; *.meta.json sidecar (as in
// tests/data/nccl-tests) -> the raw log it names, with the sidecar's collective/nranks/nodes/gpu as hints;
// anything else -> text (nccl-tests or busbw markdown). The result has op and nranks filled, or throws an
// InputError saying which hint (--op / --nranks or a sidecar) is missing.
std::vector<Measurement> load_measurements(const std::string& path, const ParseHints& hints = {});

// The time a comparison uses for a row, in seconds: the smaller of the out-of-place and in-place times
// when both are present (the less-perturbed of two back-to-back runs), else whichever is present; when
// only busbw is present (markdown tables), time is derived as size / (busbw / factor). Returns nullopt for
// zero-size rows or rows without any usable value.
std::optional<double> row_time_s(const Measurement& m, const Row& r);

}  // namespace fabricsim::validate
