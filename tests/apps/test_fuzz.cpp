// Deterministic mutation fuzzing of every input parser (docs/reliability.md). Each target takes seed files
// from tests/data and examples, applies byte-level and JSON-level mutations drawn from a fixed-seed PRNG
// (bit flips, cut/duplicated ranges, splices between seeds, out-of-range numbers such as 1e400 and
// 4294967304, 100,000-deep nesting, duplicated keys, values replaced by wrong types), and calls the
// parser's public entry point. Success or an InputError is accepted; any other exception fails the test
// with the target, execution index and a reproducer written to the working directory (a crash ends the
// process and ctest reports it).
//
// The default suite runs FABRICSIM_FUZZ_EXECS (default 120) executions per target, a few seconds in all.
// Long runs:  FABRICSIM_FUZZ_EXECS=1000000 build/tests/test_apps -tc='fuzz*'   (FABRICSIM_FUZZ_SEED
// shifts the PRNG seed; FABRICSIM_FUZZ_TARGET=name runs one target; FABRICSIM_FUZZ_LAST=file writes each
// input there before running it, so a crash leaves its reproducer).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "models/calibration.hpp"
#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"
#include "replay/outputs_sweep.hpp"
#include "topologies/io.hpp"
#include "validate/nccl_log.hpp"
#include "workloads/dataparallel.hpp"
#include "workloads/importers.hpp"
#include "workloads/scenario.hpp"
#include "workloads/torchtitan_config.hpp"
#include "workloads/trace.hpp"

namespace fs = std::filesystem;
using fabricsim::InputError;
using fabricsim::Json;

namespace {

const fs::path kSrc = FABRICSIM_SOURCE_DIR;

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Rng {
  std::uint64_t s;
  std::uint64_t next() {  // xorshift64*
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ULL;
  }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
};

// Values that have broken parsers (issue 24) or sit on a boundary.
const char* const kTokens[] = {
    "1e400", "-1e999", "4294967304", "2147483647", "-2147483649", "9223372036854775808", "18446744073709551616",
    "1e-300", "0", "-1", "1e300", "-0", "0.5", "5e-324", "1.7976931348623157e308", "\"\"", "null", "true",
    "[]", "{}", "\"1e-300B/s\"", "\"400Gbps\"", "\"1.5us\"", "\"64M\"", "\"1e30G\"", "\"-5ms\"", "\"nan\"",
    "\"inf\"", "1", "2", "8", "1000000000000", "\"all_reduce\"", "\"all_gather\"", "\"gpu\"", "\"nvswitch\""};
const char kStructural[] = "{}[]\",:0123456789.-eE \n\\/~";

std::string deep(std::size_t d) { return std::string(d, '[') + "0" + std::string(d, ']'); }

void walk(Json& j, std::vector<Json*>& out, int depth) {
  out.push_back(&j);
  if (depth > 40) return;
  if (j.is_object() || j.is_array())
    for (auto& v : j) walk(v, out, depth + 1);
}

// One JSON-level mutation of `text` (which must parse); returns false if it does not parse.
bool mutate_json(std::string& text, Rng& rng) {
  Json j;
  try {
    j = fabricsim::parse_json_text(text, "seed");
  } catch (const InputError&) {
    return false;
  }
  std::vector<Json*> nodes;
  walk(j, nodes, 0);
  Json* n = nodes[rng.below(nodes.size())];
  switch (rng.below(6)) {
    case 0: {  // replace by a token (the out-of-range ones cannot live in a DOM: those go in as text below)
      std::string t = kTokens[rng.below(sizeof kTokens / sizeof *kTokens)];
      try {
        *n = Json::parse(t);
      } catch (...) {
        *n = t;
      }
      break;
    }
    case 1:  // an integer of random magnitude and sign
      *n = static_cast<std::int64_t>(rng.next() >> rng.below(64)) * (rng.below(2) ? 1 : -1);
      break;
    case 2:  // drop a member or element
      if (n->is_object() && !n->empty()) {
        auto it = n->begin();
        std::advance(it, static_cast<long>(rng.below(n->size())));
        n->erase(it);
      } else if (n->is_array() && !n->empty()) {
        n->erase(rng.below(n->size()));
      }
      break;
    case 3:  // copy another node here (wrong type, wrong shape, or a consistent duplicate)
      *n = Json(*nodes[rng.below(nodes.size())]);
      break;
    case 4:  // a long array (bounds on element counts)
      *n = Json::array();
      for (std::size_t k = 0, e = 1 + rng.below(3000); k < e; ++k) n->push_back(static_cast<int>(k % 7));
      break;
    default:  // an unknown key
      if (n->is_object()) (*n)["fuzz_unknown_key"] = 1;
      else *n = "x";
  }
  text = j.dump(rng.below(2) ? -1 : 1);
  return true;
}

void mutate_bytes(std::string& s, Rng& rng, const std::vector<std::string>& seeds) {
  const std::size_t pos = rng.below(s.size() + 1);
  switch (rng.below(11)) {
    case 0:
      if (!s.empty()) s[rng.below(s.size())] ^= static_cast<char>(1u << rng.below(8));
      break;
    case 1:
      if (!s.empty()) s[rng.below(s.size())] = kStructural[rng.below(sizeof kStructural - 1)];
      break;
    case 2:
      s.erase(pos, 1 + rng.below(16));
      break;
    case 3: {
      std::string chunk = s.substr(rng.below(s.size() + 1), 1 + rng.below(64));
      s.insert(rng.below(s.size() + 1), chunk);
      break;
    }
    case 4:
      s.insert(pos, kTokens[rng.below(sizeof kTokens / sizeof *kTokens)]);
      break;
    case 5: {  // replace a number with a token
      std::size_t i = s.find_first_of("0123456789", pos);
      if (i == std::string::npos) break;
      std::size_t e = s.find_first_not_of("0123456789.eE+-", i);
      s.replace(i, (e == std::string::npos ? s.size() : e) - i, kTokens[rng.below(sizeof kTokens / sizeof *kTokens)]);
      break;
    }
    case 6: {  // a deeply nested value after a ':' or ','
      std::size_t i = s.find_first_of(":,[", pos);
      if (i == std::string::npos) break;
      const std::size_t depths[] = {65, 1000, 100000};
      std::string d = deep(depths[rng.below(3)]);
      if (s[i] == ':' || s[i] == '[') {
        std::size_t e = s.find_first_of(",}]", i + 1);
        if (e == std::string::npos) break;
        s.replace(i + 1, e - i - 1, d);
      } else {
        s.insert(i + 1, d + ",");
      }
      break;
    }
    case 7: {  // duplicate a "key": value member
      std::size_t c = s.find("\":", pos);
      if (c == std::string::npos) break;
      std::size_t k = s.rfind('"', c == 0 ? 0 : c - 1);
      std::size_t e = s.find_first_of(",}\n", c);
      if (k == std::string::npos || e == std::string::npos) break;
      s.insert(k, s.substr(k, e - k) + ",");
      break;
    }
    case 8: {  // splice a piece of another seed
      const std::string& o = seeds[rng.below(seeds.size())];
      std::size_t a = rng.below(o.size() + 1);
      s.replace(pos, rng.below(64), o.substr(a, rng.below(256)));
      break;
    }
    case 9:
      s.resize(pos);
      break;
    default: {  // a very long line / string
      s.insert(pos, std::string(1 + rng.below(70000), rng.below(2) ? 'x' : '9'));
    }
  }
}

struct Target {
  std::string name;
  std::vector<std::string> seeds;
  bool json = true;  // JSON-level mutations apply
  std::function<void(const std::string&)> run;
  // Optional: a target whose input is one of several files (Chakra rank files) also gets the index of the
  // seed the input was mutated from.
  std::function<void(const std::string&, std::size_t)> run_from = nullptr;
  // Every parser must keep every message one short line (false: an overlong message is counted and reported,
  // not failed; no target needs it since the nccl-tests parser quotes excerpts).
  bool strict_messages = true;
};

std::size_t env_size(const char* name, std::size_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? static_cast<std::size_t>(std::strtoull(v, nullptr, 10)) : dflt;
}

// Runs `t` for FABRICSIM_FUZZ_EXECS inputs; returns a description of the first unexpected exception.
std::string fuzz(const Target& t) {
  const std::size_t execs = env_size("FABRICSIM_FUZZ_EXECS", 120);
  const std::uint64_t seed = env_size("FABRICSIM_FUZZ_SEED", 0);
  if (const char* only = std::getenv("FABRICSIM_FUZZ_TARGET"); only && *only && t.name != only) return "";
  REQUIRE(!t.seeds.empty());
  // The seeds themselves must reach the parser's success path (some are bad on purpose, not all).
  std::size_t good_seeds = 0;
  auto call = [&t](const std::string& in, std::size_t from) { t.run_from ? t.run_from(in, from) : t.run(in); };
  for (std::size_t k = 0; k < t.seeds.size(); ++k) {
    try {
      call(t.seeds[k], k);
      ++good_seeds;
    } catch (const InputError&) {
    }
  }
  REQUIRE_MESSAGE(good_seeds > 0, t.name << ": no seed is accepted");
  Rng rng{0x9E3779B97F4A7C15ULL ^ (std::hash<std::string>{}(t.name) + seed * 0x100000001B3ULL)};
  const char* last_input = std::getenv("FABRICSIM_FUZZ_LAST");
  if (last_input && !*last_input) last_input = nullptr;
  std::size_t ok = 0, refused = 0, long_messages = 0;
  std::string first_long;
  auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < execs; ++i) {
    const std::size_t from = rng.below(t.seeds.size());
    std::string in = t.seeds[from];
    for (std::size_t m = 0, nm = 1 + rng.below(3); m < nm; ++m) {
      if (t.json && rng.below(2) == 0 && in.size() < 200000) {
        if (mutate_json(in, rng)) continue;
      }
      mutate_bytes(in, rng, t.seeds);
    }
    if (last_input) {  // FABRICSIM_FUZZ_LAST: after a crash, this file holds the input that caused it
      std::ofstream f(last_input, std::ios::binary | std::ios::trunc);
      f << "exec " << i << "\n" << in;
    }
    try {
      call(in, from);
      ++ok;
    } catch (const InputError& e) {
      ++refused;
      const std::string msg = e.what();
      // A message is one line and never carries a large value whole.
      if ((msg.size() > 2000 || msg.find('\n') != std::string::npos) && !t.strict_messages) {
        if (long_messages++ == 0) first_long = msg.substr(0, 200);
      } else if (msg.size() > 2000 || msg.find('\n') != std::string::npos) {
        std::ofstream("fuzz-failure-" + t.name + ".bin", std::ios::binary) << in;
        return "exec " + std::to_string(i) + ": InputError message of " + std::to_string(msg.size()) +
               " chars or with a newline: " + msg.substr(0, 300);
      }
    } catch (const std::exception& e) {
      std::ofstream("fuzz-failure-" + t.name + ".bin", std::ios::binary) << in;
      return "exec " + std::to_string(i) + ": " + typeid(e).name() + ": " + std::string(e.what()).substr(0, 300);
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("fuzz " << t.name << ": " << execs << " execs (" << ok << " accepted, " << refused << " refused) in " << s
                  << " s");
  if (long_messages)
    MESSAGE("fuzz " << t.name << ": " << long_messages << " InputError messages over 2,000 characters or with a "
                    << "newline (parser owned elsewhere), first: " << first_long);
  if (execs >= 10000)
    std::cout << "fuzz " << t.name << ": " << execs << " execs, " << ok << " accepted, " << refused
              << " InputError (" << long_messages << " overlong), 0 other, " << s << " s\n";
  return "";
}

std::vector<std::string> files(const std::vector<fs::path>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::string s = read(kSrc / p);
    REQUIRE_MESSAGE(!s.empty(), p.string());
    out.push_back(s);
  }
  return out;
}

std::vector<std::string> glob(const fs::path& dir, const std::string& ext, std::size_t max) {
  std::vector<fs::path> ps;
  for (const auto& e : fs::directory_iterator(kSrc / dir))
    if (e.path().string().size() >= ext.size() && e.path().string().ends_with(ext)) ps.push_back(e.path());
  std::sort(ps.begin(), ps.end());
  if (ps.size() > max) ps.resize(max);
  std::vector<std::string> out;
  for (const auto& p : ps) out.push_back(read(p));
  return out;
}

}  // namespace

TEST_CASE("fuzz topology JSON") {
  // The files in tests/data/topologies (mostly bad on purpose) plus two valid preset exports.
  std::vector<std::string> seeds = glob("tests/data/topologies", ".json", 20);
  namespace topo = fabricsim::topo;
  seeds.push_back(topo::topology_to_json(topo::build_preset("dgx-h100", {})).dump(1));
  seeds.push_back(topo::topology_to_json(topo::build_preset("superpod", {{"nodes", "2"}, {"node", "dgx-a100"}})).dump(1));
  Target t{"topology", seeds, true, [](const std::string& s) {
             fabricsim::topo::topology_from_json(fabricsim::parse_json_text(s, "topo.json"), "topo.json");
           }};
  const std::string r = fuzz(t);
  CHECK_MESSAGE(r.empty(), r);
}

TEST_CASE("fuzz scenario JSON") {
  Target t{"scenario", files({"examples/workloads/gpt3-175b-1024gpu.json", "examples/workloads/dlrm-large-128gpu.json",
                              "examples/workloads/astra-data-parallel.json", "examples/workloads/chakra-pipeline.json"}),
           true, [](const std::string& s) {
             const std::string name = (kSrc / "examples/workloads/fuzz.json").string();
             fabricsim::workloads::scenario_from_json(fabricsim::parse_json_text(s, name), name);
           }};
  const std::string r = fuzz(t);
  CHECK_MESSAGE(r.empty(), r);
}

TEST_CASE("fuzz calibration JSON") {
  namespace m = fabricsim::models;
  Target t{"calibration", {m::calibration_to_json(m::default_calibration()).dump(1)}, true, [](const std::string& s) {
             m::calibration_from_json(fabricsim::parse_json_text(s, "cal.json"), "cal.json");
           }};
  // A calibration with NCCL eras too (the era code paths).
  m::Calibration c = m::default_calibration();
  c.nccl_eras = m::default_nccl_eras();
  t.seeds.push_back(m::calibration_to_json(c).dump(1));
  const std::string r = fuzz(t);
  CHECK_MESSAGE(r.empty(), r);
}

TEST_CASE("fuzz sweep JSON and sweep CSV (resume)") {
  namespace sim = fabricsim::sim;
  // Inline scenarios so a mutated sweep never reads a file it names.
  std::vector<std::string> seeds;
  for (const char* p : {"examples/sweeps/gpt_cluster_grid.json",
                        "examples/case-studies/gpt3_175b/sweep.json", "examples/case-studies/dlrm_14tb/sweep.json"}) {
    Json j = fabricsim::load_json_file((kSrc / p).string());
    if (j.contains("scenario") && j["scenario"].is_string())
      j["scenario"] = fabricsim::load_json_file((kSrc / fs::path(p).parent_path() / j["scenario"].get<std::string>()).string());
    seeds.push_back(j.dump(1));
  }
  Target t{"sweep", seeds, true, [](const std::string& s) {
             sim::parse_sweep(fabricsim::parse_json_text(s, "sweep.json"), "sweep.json");
           }};
  std::string r = fuzz(t);
  CHECK_MESSAGE(r.empty(), r);

  // The resume reader: an existing CSV (rows ok, failed, stale, cut short) against the gpt_small sweep.
  static const sim::SweepSpec spec = sim::parse_sweep(fabricsim::parse_json_text(seeds[0], "sweep.json"), "sweep.json");
  std::map<std::size_t, std::string> rows;
  for (const auto& p : spec.points) rows[p.index] = sim::sweep_csv_row_failed(spec, p, "boom, \"quoted\"");
  std::string csv = sim::sweep_csv(spec, rows);
  Target c{"sweep_csv", {csv, csv.substr(0, csv.size() / 2)}, false, [](const std::string& s) {
             sim::read_done_rows(spec, s, "out.csv");
           }};
  r = fuzz(c);
  CHECK_MESSAGE(r.empty(), r);
}

TEST_CASE("fuzz trace JSON") {
  namespace w = fabricsim::workloads;
  w::DataParallelConfig dc;
  dc.num_parameters = 1e8;
  dc.world_size = 4;
  dc.global_batch_size = 16;
  dc.bucket_size = 25000000;
  fabricsim::models::ComputeModel cm;
  cm.gpu = fabricsim::models::gpu_spec("a100-80gb", "gpu");
  Target t{"trace", {w::trace_to_json(w::generate_dataparallel(dc, cm, "dp")).dump(1)}, true,
           [](const std::string& s) { w::trace_from_json(fabricsim::parse_json_text(s, "trace.json"), "trace.json"); }};
  const std::string r = fuzz(t);
  CHECK_MESSAGE(r.empty(), r);
}

TEST_CASE("fuzz nccl-tests text") {
  Target t{"nccl_tests", glob("tests/data/nccl-tests/raw", ".txt", 6), false, [](const std::string& s) {
             fabricsim::validate::ParseHints h;
             fabricsim::validate::parse_nccl_tests_text(s, "log.txt", h);
           }};
  const std::string r = fuzz(t);
  CHECK_MESSAGE(r.empty(), r);
}

TEST_CASE("fuzz nccl-tests busbw markdown table") {
  // The busbw-only markdown table some vendors publish instead of the log (validate::parse_busbw_markdown);
  // a hand-written seed in that layout.
  const std::string seed =
      "# all_reduce, 8 GPUs\n\n| Message Size (Bytes) | Cluster A (GB/s) |\n| --- | --- |\n| 1K | 0.04 |\n"
      "| 65K | 2.5 |\n| 132K | 4.75 |\n| 1M | 30.1 |\n| 8G | 231.58 |\n\nNotes after the table.\n";
  Target t{"nccl_markdown", {seed}, false, [](const std::string& s) {
             fabricsim::validate::ParseHints h;
             h.op = "all_reduce";
             h.nranks = 8;
             fabricsim::validate::parse_busbw_markdown(s, "table.md", h);
           }};
  const std::string r = fuzz(t);
  CHECK_MESSAGE(r.empty(), r);
}

TEST_CASE("fuzz ASTRA-sim text") {
  Target t{"astra", files({"examples/workloads/astra-data-parallel.txt"}), false, [](const std::string& s) {
             fabricsim::workloads::import_astra_text(s, "astra.txt", {{"npus", "32"}, {"cycle_ns", "1"}}, "astra");
           }};
  const std::string r = fuzz(t);
  CHECK_MESSAGE(r.empty(), r);
}

TEST_CASE("fuzz torchtitan configs (TOML and JSON)") {
  fabricsim::workloads::TorchtitanOptions opt;
  opt.gpus = 64;
  auto run = [opt](const std::string& s) {
    fabricsim::workloads::scenario_for_torchtitan("titan.cfg", s, "dgx-h100", {}, opt);
  };
  Target toml{"torchtitan_toml",
              files({"tests/data/torchtitan-configs/llama3_70b-9dec370.toml", "tests/data/torchtitan-configs/llama3_8b-9dec370.toml",
                     "tests/data/torchtitan-configs/llama3_70b-820504e.toml", "tests/data/torchtitan-configs/llama3_8b-8a2686c4a.toml"}),
              false, run};
  std::string r = fuzz(toml);
  CHECK_MESSAGE(r.empty(), r);
  Target json{"torchtitan_json", files({"tests/data/torchtitan-configs/llama3_8b-trainer-config.json"}), true, run};
  r = fuzz(json);
  CHECK_MESSAGE(r.empty(), r);
}

TEST_CASE("fuzz Chakra traces") {
  // Three sets of rank files, one per encoding: the 4-rank pipeline example (Chakra JSON as ASTRA-sim's JSON
  // feeder reads it), ASTRA-sim's 4-NPU all_to_all microbenchmark as protobuf .et and as chakra_jsonizer output,
  // and a 1-rank JSON feeder test. Each input replaces the rank file its seed was, the other ranks keep theirs;
  // the files are handed over in memory (import_chakra_buffers), so an input costs no file writes.
  struct Set {
    std::string prefix;
    std::vector<fs::path> files;
  };
  const fs::path fw = "tests/data/foreign-workloads";
  std::vector<Set> sets;
  auto add = [&](const std::string& prefix, const fs::path& dir, const std::string& stem, const std::string& ext, int n) {
    Set st{prefix, {}};
    for (int r = 0; r < n; ++r) st.files.push_back(dir / (stem + "." + std::to_string(r) + ext));
    sets.push_back(st);
  };
  add("pipeline", "examples/workloads/chakra", "pipeline", ".json", 4);
  add("all_to_all", fw / "chakra-et/astra-sim-microbench-all_to_all-4npus_1MB", "all_to_all", ".et", 4);
  add("all_to_all", fw / "chakra-jsonizer/astra-sim-microbench-all_to_all-4npus_1MB", "all_to_all", ".json", 4);
  add("small_chakra", fw / "chakra-json/chakra-json-feeder-test-small", "small_chakra", ".json", 1);
  // seed k -> (set, rank); every set's original buffers.
  static std::vector<std::pair<std::size_t, std::size_t>> seed_of;
  static std::vector<std::vector<fabricsim::workloads::ChakraRankBuffer>> orig;
  seed_of.clear();
  orig.clear();
  std::vector<std::string> seeds;
  for (std::size_t k = 0; k < sets.size(); ++k) {
    orig.emplace_back();
    for (std::size_t r = 0; r < sets[k].files.size(); ++r) {
      const std::string data = files({sets[k].files[r]})[0];
      orig.back().push_back({sets[k].files[r].filename().string(), data});
      seeds.push_back(data);
      seed_of.emplace_back(k, r);
    }
  }
  Target t{"chakra", seeds, true, nullptr};
  t.run_from = [](const std::string& s, std::size_t from) {
    const auto [set, rank] = seed_of[from];
    auto ranks = orig[set];
    ranks[rank].data = s;
    fabricsim::workloads::ChakraOptions o;
    o.quiet = true;
    fabricsim::workloads::import_chakra_buffers(ranks, "chakra", o);
  };
  std::size_t et = 0;
  for (const auto& sd : seeds) et += !sd.empty() && sd[0] != '{';
  CHECK(et == 4);  // the protobuf reader has seeds of its own
  const std::string r = fuzz(t);
  CHECK_MESSAGE(r.empty(), r);
}

TEST_CASE("libFuzzer targets: fuzz/ builds one executable per driver target, and fuzz/run.sh seeds each") {
  // fuzz/fuzz_target.cpp calls, per target, the entry point the driver above fuzzes; this keeps the three lists
  // (fuzz/CMakeLists.txt's targets, fuzz/run.sh's corpus seeding, the driver's targets) the same.
  const std::string cmake = read(kSrc / "fuzz/CMakeLists.txt"), run_sh = read(kSrc / "fuzz/run.sh"),
                    entry = read(kSrc / "fuzz/fuzz_target.cpp"), driver = read(kSrc / "tests/apps/test_fuzz.cpp");
  const auto a = cmake.find("set(_targets "), b = cmake.find(')', a);
  REQUIRE(a != std::string::npos);
  std::istringstream names(cmake.substr(a + 13, b - a - 13));
  std::vector<std::string> targets;
  for (std::string n; names >> n;) targets.push_back(n);
  CHECK(targets.size() == 8);
  for (const auto& n : targets) {
    CAPTURE(n);
    CHECK(run_sh.find("    " + n + ")") != std::string::npos);
    std::string upper = n;
    for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    CHECK(entry.find("defined(FABRICSIM_FUZZ_" + upper + ")") != std::string::npos);
    CHECK(driver.find("{\"" + n + "\",") != std::string::npos);
  }
}
