// `fabricsim plan`: the printed configurations are the cheapest (fewest GPUs, then fastest) among the
// candidates it simulated that meet the target, checked against its own per-candidate CSV; the search stops
// at the first cluster size that yields enough configurations.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "replay/outputs_sweep.hpp"

namespace fs = std::filesystem;

namespace {

namespace cli_test = fabricsim::cli_test;
using cli_test::slurp;
using Proc = cli_test::Run;

Proc sh(const std::string& cmd, const fs::path& dir) { return cli_test::run_in(dir, cmd); }

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> f;
  std::string cell;
  std::stringstream ss(line);
  while (std::getline(ss, cell, sep)) f.push_back(cell);
  return f;
}

// The table rows after the header line ("# ..."), split on blanks; `header` receives the header's words.
std::vector<std::vector<std::string>> table_rows(const std::string& out, std::vector<std::string>* header = nullptr) {
  std::istringstream in(out);
  std::string line;
  std::vector<std::vector<std::string>> rows;
  bool table = false;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<std::string> f;
    std::string w;
    while (ls >> w) f.push_back(w);
    if (!f.empty() && f[0] == "#") {
      table = true;
      if (header) *header = f;
      continue;
    }
    if (table && !f.empty()) rows.push_back(f);
  }
  return rows;
}

}  // namespace

TEST_CASE("fabricsim plan picks the cheapest configurations that meet the target") {
  const fs::path dir = cli_test::scratch_dir("plan_test");
  std::ofstream(dir / "base.json") << cli_test::small_gpt_scenario(1, 64, 1, 1);
  const std::string bin = cli_test::quoted(FABRICSIM_BINARY);
  // First: every candidate at every size, to know the ground truth.
  Proc all = sh(bin + " plan base.json --nodes 1,2,4 --tp 1,2,8 --pp 1,2 --target-step-time 1000s --top 100 -o all.csv -q", dir);
  REQUIRE_MESSAGE(all.rc == 0, all.err);
  struct Row {
    int nodes, tp, pp, gpus;
    double step;
  };
  std::vector<Row> rows;
  {
    std::istringstream in(slurp(dir / "all.csv"));
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      auto f = split(line, ',');
      if (f[5] != "ok") continue;
      rows.push_back({std::stoi(f[1]), std::stoi(f[2]), std::stoi(f[3]), std::stoi(f[7]), std::stod(f[8])});
    }
  }
  REQUIRE(rows.size() >= 10);
  // A target between the fastest one-node and the fastest two-node step: one node cannot meet it.
  double best1 = 1e9, best2 = 1e9;
  for (const auto& r : rows) {
    if (r.nodes == 1) best1 = std::min(best1, r.step);
    if (r.nodes == 2) best2 = std::min(best2, r.step);
  }
  REQUIRE(best2 < best1);
  double target = (best1 + best2) / 2;
  std::vector<Row> meet;
  for (const auto& r : rows)
    if (r.step <= target) meet.push_back(r);
  std::sort(meet.begin(), meet.end(), [](const Row& a, const Row& b) {
    return std::tie(a.gpus, a.step) < std::tie(b.gpus, b.step);
  });
  REQUIRE(!meet.empty());
  CHECK(meet[0].nodes == 2);
  int at_two = static_cast<int>(std::count_if(meet.begin(), meet.end(), [](const Row& r) { return r.nodes == 2; }));
  REQUIRE(at_two >= 1);

  char t[64];
  std::snprintf(t, sizeof t, "%.9f", target);
  Proc plan = sh(bin + " plan base.json --nodes 1,2,4 --tp 1,2,8 --pp 1,2 --target-step-time " + t + " --top " +
                     std::to_string(at_two) + " -o some.csv -q",
                 dir);
  REQUIRE_MESSAGE(plan.rc == 0, plan.err);
  // Printed rows: "#  nodes GPUs TP PP DP MBS step ..." after the header line.
  const auto printed = table_rows(plan.out);
  REQUIRE(static_cast<int>(printed.size()) == at_two);
  for (std::size_t i = 0; i < printed.size(); ++i) {
    CHECK(std::stoi(printed[i][1]) == meet[i].nodes);
    CHECK(std::stoi(printed[i][3]) == meet[i].tp);
    CHECK(std::stoi(printed[i][4]) == meet[i].pp);
  }
  // It stopped after two nodes: no four-node candidate was simulated.
  std::string some = slurp(dir / "some.csv");
  CHECK(some.find("\n12,4,") == std::string::npos);
  CHECK(some.find("\n6,2,") != std::string::npos);

  Proc none = sh(bin + " plan base.json --nodes 1 --tp 1 --pp 1 --target-step-time 1us -q", dir);
  CHECK(none.rc == 1);
  CHECK(none.out.find("no configuration meets the target") != std::string::npos);
  Proc bad = sh(bin + " plan base.json --target-step-time 1s --target-tokens-per-day 5", dir);
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("exactly one of") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("fabricsim gen --compute-preset: the Megatron fit lengthens compute; a bad name writes nothing") {
  fs::path dir = cli_test::scratch_dir("gen_preset");
  const std::string p =
      "gen gpt -p num_layers=2 -p hidden_size=1024 -p num_attention_heads=16 -p world_size=8"
      " -p tensor_model_parallel_size=8 -p pipeline_model_parallel_size=1 -p global_batch_size=8";
  REQUIRE(sh(cli_test::fabricsim(p + " -o d.json"), dir).rc == 0);
  REQUIRE(sh(cli_test::fabricsim(p + " --compute-preset megatron-sc21 -o m.json"), dir).rc == 0);
  // Same ops in the same order; the preset's GEMM and attention efficiencies (0.69, 0.80) are below the
  // defaults (0.81 both) and nothing else changes, so no compute op gets shorter and the total grows (by
  // 4.7 % on this small model, where memory-bound elementwise ops are a large share).
  auto d = nlohmann::json::parse(slurp(dir / "d.json")).at("ranks").at(0).at("ops");
  auto m = nlohmann::json::parse(slurp(dir / "m.json")).at("ranks").at(0).at("ops");
  REQUIRE(d.size() == m.size());
  double td = 0, tm = 0;
  int shorter = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (d[i].at("type") != "compute") continue;
    const double a = d[i].at("duration_ns").get<double>(), b = m[i].at("duration_ns").get<double>();
    td += a;
    tm += b;
    if (b < a) ++shorter;
  }
  CHECK(shorter == 0);
  CHECK(td > 0);
  CHECK(tm > td * 1.03);
  Proc bad = sh(cli_test::fabricsim(p + " --compute-preset fast -o x.json"), dir);
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("--compute-preset") != std::string::npos);
  CHECK(bad.err.find("megatron-sc21") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "x.json"));
}

TEST_CASE("fabricsim run --compute-preset replaces the flagship's Megatron preset; compute time alone changes") {
  fs::path dir = cli_test::scratch_dir("run_preset");
  REQUIRE(sh(cli_test::fabricsim("run -q --json m.json"), dir).rc == 0);
  REQUIRE(sh(cli_test::fabricsim("run -q --compute-preset default --json d.json"), dir).rc == 0);
  auto m = nlohmann::json::parse(slurp(dir / "m.json"));
  auto d = nlohmann::json::parse(slurp(dir / "d.json"));
  // The flagship runs megatron-sc21 (GEMM 0.69 of peak); the hardware-ceiling default (0.81) is faster.
  CHECK(d.at("iteration_s").get<double>() < m.at("iteration_s").get<double>());
  CHECK(d.at("tflops_per_gpu").get<double>() > m.at("tflops_per_gpu").get<double>());
  // Communication is priced the same way under both presets, and in this schedule neither the tensor-parallel
  // all-reduces nor the data-parallel one (after the backward pass) overlap compute, so their exposed times
  // are the same (to rounding: the sums run over differently timed events).
  for (const std::string k : {"tp", "dp"}) {
    CAPTURE(k);
    const double a = m.at("breakdown").at("exposed_comm_s").at(k).get<double>();
    CHECK(a > 0);
    CHECK(a == doctest::Approx(d.at("breakdown").at("exposed_comm_s").at(k).get<double>()).epsilon(1e-9));
  }
  CHECK(m.at("breakdown").at("compute_s").get<double>() > d.at("breakdown").at("compute_s").get<double>());
  Proc bad = sh(cli_test::fabricsim("run -q --compute-preset fast --json x.json"), dir);
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("--compute-preset") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "x.json"));
}

TEST_CASE("bad output paths fail before any simulation: exit 2, one line naming the flag, nothing on stdout") {
  fs::path dir = cli_test::scratch_dir("out_paths");
  const std::string nodir = (dir / "missing" / "x.out").string();
  const std::string log = std::string(FABRICSIM_SOURCE_DIR) +
                          "/tests/data/nccl-tests/together_h100_1node_8gpu_all_gather_ring.meta.json";
  struct Case {
    std::string args, flag;
  };
  for (const auto& c : std::vector<Case>{
           {"run -q --timeline " + nodir, "--timeline"},
           {"run -q --json " + dir.string(), "--json"},  // a directory, not a file
           {"coll -t dgx-h100 --report " + nodir, "--report"},
           {"coll -t dgx-h100 --link-stats " + nodir, "--link-stats"},
           {"calibrate " + log + " -o " + nodir, "--output"},
           {"calibrate " + log + " -o c.json --json " + nodir, "--json"},
           {"validate --loo " + log + " --svg " + nodir, "--svg"},
           {"plan --target-tokens-per-day 1e9 -o " + nodir, "--output"},
           {"topo dgx-h100 --dot " + nodir, "--dot"},
       }) {
    CAPTURE(c.args);
    Proc p = sh(cli_test::fabricsim(c.args), dir);
    CHECK(p.rc == 2);
    CHECK(p.out.empty());
    CHECK(p.err.find("error: " + c.flag) != std::string::npos);
    CHECK(std::count(p.err.begin(), p.err.end(), '\n') == 1);
  }
  CHECK_FALSE(fs::exists(dir / "c.json"));  // the calibration was not written either
  CHECK_FALSE(fs::exists(dir / "missing"));
}

TEST_CASE("fabricsim plan --cp/--vp/--recompute at the scenario's own values prints and writes what plan without them does") {
  const fs::path dir = cli_test::scratch_dir("plan_same");
  // Interleaved (2 layers per virtual stage) so that the PP = 1 rule and --vp both touch it.
  std::ofstream(dir / "base.json") << cli_test::small_gpt_scenario(1, 64, 1, 1);
  {
    auto j = nlohmann::json::parse(slurp(dir / "base.json"));
    j["workload"]["params"]["recompute_granularity"] = "selective";
    j["workload"]["params"]["num_layers"] = 8;
    j["workload"]["params"]["num_layers_per_virtual_pipeline_stage"] = 2;
    std::ofstream(dir / "base.json") << j.dump(1);
  }
  const std::string bin = cli_test::quoted(FABRICSIM_BINARY);
  const std::string common = bin + " plan base.json --nodes 1,2 --tp 1,2,8 --pp 1,2 --target-step-time 1000s --top 100 -q";
  Proc plain = sh(common + " -o plain.csv", dir);
  REQUIRE_MESSAGE(plain.rc == 0, plain.err);
  // The scenario's values given explicitly: not a search, so nothing changes, byte for byte.
  Proc same = sh(common + " --cp 1 --recompute selective --ep 1 -o same.csv", dir);
  // --ep on this dense model is an error even at 1 (below); without it:
  CHECK(same.rc == 2);
  CHECK(same.err.find("--ep") != std::string::npos);
  CHECK(same.err.find("dense") != std::string::npos);
  CHECK(same.out.empty());
  same = sh(common + " --cp 1 --recompute selective -o same.csv", dir);
  REQUIRE_MESSAGE(same.rc == 0, same.err);
  CHECK(same.out == plain.out);
  CHECK(slurp(dir / "same.csv") == slurp(dir / "plain.csv"));
  CHECK(plain.out.find("peak_GiB") == std::string::npos);
  CHECK(table_rows(plain.out).size() >= 6);
  // Searching a second value adds the column and the memory figures, and keeps every earlier row's figures.
  Proc more = sh(common + " --recompute selective,full -o more.csv", dir);
  REQUIRE_MESSAGE(more.rc == 0, more.err);
  std::vector<std::string> h;
  auto rows = table_rows(more.out, &h);
  REQUIRE(h.size() == 14);
  CHECK(h[5] == "recompute");
  CHECK(h[13] == "peak_GiB");
  const auto plain_rows = table_rows(plain.out);
  CHECK(rows.size() == 2 * plain_rows.size());
  for (const auto& r : plain_rows) {  // nodes GPUs TP PP DP MBS step_s ...: the same step under "selective"
    CAPTURE(r[6]);
    CHECK(std::count_if(rows.begin(), rows.end(), [&](const std::vector<std::string>& m) {
            return m[1] == r[1] && m[3] == r[3] && m[4] == r[4] && m[5] == "selective" && m[8] == r[7];
          }) == 1);
  }
  fs::remove_all(dir);
}

TEST_CASE("fabricsim plan picks context parallelism when only it fits a 32k sequence; the CSV says why the rest lost") {
  const fs::path dir = cli_test::scratch_dir("plan_cp");
  // 32 layers of hidden 6144, 32768 tokens per sequence, no recompute, TP 4 on one DGX H100 (80 GB): one
  // micro-batch's activations (about 100 GiB per GPU) do not fit unless the sequence is split over 2 CP ranks;
  // CP 4 needs 16 GPUs (TP 4 x CP 4) and so a second node, which the search does not reach.
  nlohmann::json j = nlohmann::json::parse(cli_test::small_gpt_scenario(1, 8, 4, 1));
  auto& p = j["workload"]["params"];
  p["num_layers"] = 32;
  p["hidden_size"] = 6144;
  p["num_attention_heads"] = 48;
  p["seq_length"] = 32768;
  p["recompute_granularity"] = "none";
  p["sequence_parallel"] = true;
  p["use_distributed_optimizer"] = true;
  std::ofstream(dir / "base.json") << j.dump(1);
  const std::string bin = cli_test::quoted(FABRICSIM_BINARY);
  Proc plan = sh(bin + " plan base.json --nodes 1,2 --tp 4 --pp 1 --cp 1,2,4 --target-step-time 1000s --top 1 -o c.csv -q", dir);
  REQUIRE_MESSAGE(plan.rc == 0, plan.err);
  std::vector<std::string> h;
  auto rows = table_rows(plan.out, &h);
  REQUIRE(rows.size() == 1);
  REQUIRE(h[5] == "CP");
  CHECK(rows[0][1] == "1");  // one node
  CHECK(rows[0][5] == "2");
  // The CSV: CP 1 refused for memory (activations the largest term), CP 2 ok, CP 4 refused for its layout.
  std::istringstream in(slurp(dir / "c.csv"));
  std::string line;
  std::getline(in, line);
  auto head = fabricsim::sim::parse_csv_line(line);
  auto col = [&](const std::string& name) {
    auto it = std::find(head.begin(), head.end(), name);
    REQUIRE(it != head.end());
    return static_cast<std::size_t>(it - head.begin());
  };
  const std::size_t cp = col("cp"), status = col("status"), peak = col("peak_memory_GiB"),
                    term = col("memory_largest_term"), why = col("refused_for");
  std::map<std::string, std::vector<std::string>> by_cp;
  while (std::getline(in, line)) {
    auto f = fabricsim::sim::parse_csv_line(line);
    REQUIRE(f.size() == head.size());
    by_cp[f[cp]] = f;
  }
  REQUIRE(by_cp.size() == 3);  // one node was enough: 3 candidates
  CHECK(by_cp["1"][status] == "does_not_fit");
  CHECK(by_cp["1"][why] == "memory");
  CHECK(by_cp["1"][term] == "activations");
  CHECK(std::stod(by_cp["1"][peak]) > 80.0);
  CHECK(by_cp["2"][status] == "ok");
  CHECK(by_cp["2"][why] == "");
  CHECK(by_cp["2"][term] == "");
  CHECK(std::stod(by_cp["2"][peak]) < 80.0);
  CHECK(std::stod(by_cp["2"][peak]) == doctest::Approx(std::stod(rows[0].back())));
  CHECK(by_cp["4"][status] == "failed");
  CHECK(by_cp["4"][why] == "layout");
  CHECK(by_cp["4"][peak] == "");
  CHECK(plan.out.find("1 for memory (largest term: activations 1)") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("fabricsim plan --vp: a virtual pipeline size that does not divide the stage's layers is refused before simulating") {
  const fs::path dir = cli_test::scratch_dir("plan_vp");
  std::ofstream(dir / "base.json") << cli_test::small_gpt_scenario(1, 64, 1, 2);  // 4 layers: 2 per stage at PP 2
  const std::string bin = cli_test::quoted(FABRICSIM_BINARY);
  Proc plan = sh(bin + " plan base.json --nodes 1 --tp 1 --pp 2 --vp 1,2,3 --target-step-time 1000s -o v.csv -q", dir);
  REQUIRE_MESSAGE(plan.rc == 0, plan.err);
  // VP 3 does not divide 2 layers: the generator's message, counted, and not simulated.
  CHECK(plan.out.find("3 candidates, 2 simulated: 2 meet the target; refused: 1 for layout") != std::string::npos);
  const std::string csv = slurp(dir / "v.csv");
  CHECK(csv.find("virtual_pipeline_model_parallel_size: must divide the layers of pipeline stage 0 (2)") != std::string::npos);
  CHECK(csv.find(",layout\n") != std::string::npos);
  auto rows = table_rows(plan.out);
  REQUIRE(rows.size() == 2);
  for (const auto& r : rows) CHECK((r[5] == "1" || r[5] == "2"));
  Proc bad = sh(bin + " plan base.json --vp 0 --target-step-time 1s", dir);
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("--vp") != std::string::npos);
  Proc badr = sh(bin + " plan base.json --recompute some --target-step-time 1s", dir);
  CHECK(badr.rc == 2);
  CHECK(badr.err.find("--recompute") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("fabricsim plan: a workload key the generator does not read is the scenario's error, not every candidate refused") {
  const fs::path dir = cli_test::scratch_dir("plan_unknown_key");
  std::string base = cli_test::small_gpt_scenario(1, 64, 1, 2);
  const std::string at = "\"micro_batch_size\"";
  REQUIRE(base.find(at) != std::string::npos);
  base.insert(base.find(at), "\"zz_unknown_key\": 1, ");
  std::ofstream(dir / "base.json") << base;
  const std::string bin = cli_test::quoted(FABRICSIM_BINARY);
  // Found by a fuzzing campaign (2026-11-29): each candidate was refused for the key and plan ended with exit
  // status 1, "no configuration meets the target", the cause shown nowhere under --quiet.
  Proc plan = sh(bin + " plan base.json --nodes 1 --tp 1 --pp 1,2 --target-step-time 1000s -q", dir);
  CHECK(plan.rc == 2);
  CHECK(plan.out.empty());
  CHECK_MESSAGE(plan.err.find("base.json: /workload/params: unknown parameter(s): zz_unknown_key") != std::string::npos,
                plan.err);
  CHECK(std::count(plan.err.begin(), plan.err.end(), '\n') == 1);
  // A string where a number goes: the JSON library's type error ("internal error") before.
  std::string quoted = cli_test::small_gpt_scenario(1, 64, 1, 2);
  const std::string mbs = "\"micro_batch_size\": 1";
  REQUIRE(quoted.find(mbs) != std::string::npos);
  quoted.replace(quoted.find(mbs), mbs.size(), "\"micro_batch_size\": \"abc\"");
  std::ofstream(dir / "quoted.json") << quoted;
  Proc q = sh(bin + " plan quoted.json --nodes 1 --tp 1 --pp 1,2 --target-step-time 1000s -q", dir);
  CHECK(q.rc == 2);
  CHECK_MESSAGE(q.err.find("quoted.json: /workload/params/micro_batch_size: expected a number, found the string \"abc\"") !=
                    std::string::npos,
                q.err);
  CHECK(q.err.find("internal error") == std::string::npos);
  // A value the generator refuses whatever the layout (second fuzzing pass): every candidate refused, and the
  // summary says why instead of only "no configuration meets the target".
  std::string bogus = cli_test::small_gpt_scenario(1, 64, 1, 2);
  bogus.insert(bogus.find(mbs), "\"recompute_granularity\": \"bogus\", ");
  std::ofstream(dir / "bogus.json") << bogus;
  Proc b = sh(bin + " plan bogus.json --nodes 1 --tp 1 --pp 1,2 --target-step-time 1000s -q", dir);
  CHECK(b.rc == 1);
  CHECK_MESSAGE(b.out.find("every candidate was refused, for 1 reason (count, the first such candidate, its error):\n"
                           "  2 x, first nodes 1 TP 1 PP 1: bogus.json: /workload/params recompute_granularity: "
                           "expected one of full, selective, none, got 'bogus'\n") != std::string::npos,
                b.out);
  // Refusals that differ only in their numbers are one reason; other texts are reasons of their own.
  std::ofstream(dir / "layers4.json") << cli_test::small_gpt_scenario(1, 64, 1, 2);  // 4 layers on 8 GPUs
  Proc m = sh(bin + " plan layers4.json --nodes 1 --tp 1 --pp 3,8 --target-step-time 1000s -q", dir);
  CHECK(m.rc == 1);
  CHECK_MESSAGE(m.out.find("every candidate was refused, for 2 reasons") != std::string::npos, m.out);
  CHECK(m.out.find("  1 x, first nodes 1 TP 1 PP 3: layers4.json: ") != std::string::npos);
  CHECK(m.out.find("  1 x, first nodes 1 TP 1 PP 8: layers4.json: /workload/params num_layers: must be a multiple of "
                   "pipeline_model_parallel_size (8)") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("fabricsim plan on GB200 NVL72 racks: a global batch of 1024 runs on the largest world size it allows, ranked by the racks paid for") {
  // Every world size on NVL72 racks is a multiple of 72, which 1024 / (micro-batch x DP) never divides: on all
  // GPUs each layout is refused; plan runs it on the largest TP x PP x DP <= the racks' GPUs with DP dividing 1024.
  const fs::path dir = cli_test::scratch_dir("plan_nvl72");
  auto scenario = [](const std::string& layout) {
    return R"({
  "topology": {"preset": "superpod", "params": {"nodes": 2, "node": "gb200-nvl72", "gpu": "gb200"}},
  "workload": {"generator": "gpt", "params": {
    "num_layers": 4, "hidden_size": 1024, "num_attention_heads": 16, "seq_length": 1024, "padded_vocab_size": 51200,
    "micro_batch_size": 1, "global_batch_size": 1024, "recompute_granularity": "none", )" + layout + "}}\n}";
  };
  std::ofstream(dir / "gb.json") << scenario(R"("tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1)");
  const std::string bin = cli_test::quoted(FABRICSIM_BINARY);
  const std::string search = " plan gb.json --target-tokens-per-day 1e9 --nodes 2,4 --tp 1,2 --pp 1,2 --top 4 -q";
  // Requiring every GPU: nothing fits, each refusal for the global batch.
  Proc all = sh(bin + search + " --all-gpus", dir);
  CHECK(all.rc == 1);
  CHECK(all.out.find("every candidate was refused") != std::string::npos);
  CHECK(all.out.find("global_batch_size: must be a multiple of micro_batch_size x data-parallel size (1 x 144)") != std::string::npos);
  // By default: configurations on 2 racks, 128 of their 144 GPUs.
  Proc plan = sh(bin + search + " -o gb.csv", dir);
  REQUIRE_MESSAGE(plan.rc == 0, (plan.out + plan.err));
  CHECK(plan.out.find("4 candidates ran on fewer GPUs than their nodes hold") != std::string::npos);
  std::vector<std::string> header;
  auto rows = table_rows(plan.out, &header);
  REQUIRE(header.size() > 3);
  CHECK(header[2] == "used/paid");
  std::erase_if(rows, [](const std::vector<std::string>& r) { return r[0].rfind("#", 0) == 0; });  // the note below
  REQUIRE(rows.size() == 4);
  for (const auto& r : rows) {
    const int nodes = std::stoi(r[1]), tp = std::stoi(r[3]), pp = std::stoi(r[4]);
    const auto used_paid = split(r[2], '/');
    REQUIRE(used_paid.size() == 2);
    const int used = std::stoi(used_paid[0]), paid = std::stoi(used_paid[1]);
    CHECK(nodes == 2);
    CHECK(paid == 72 * nodes);
    // The largest data-parallel size that divides the global batch and fits the racks.
    int dp = paid / (tp * pp);
    while (1024 % dp != 0) --dp;
    CHECK(used == dp * tp * pp);
    CHECK(std::stoi(r[5]) == dp);
  }
  CHECK(plan.out.find("#1 uses 128 of 144 GPUs: global_batch_size 1024 is not a multiple of micro_batch_size x "
                      "data-parallel size on all of them (1 x ") != std::string::npos);
  // The CSV's gpus column holds the world size run, and the first row's step is what `run` gives for the same
  // scenario with that world_size (the path a scenario on part of a topology takes).
  const std::string csv = slurp(dir / "gb.csv");
  CHECK(csv.find(",ok,,128,") != std::string::npos);
  const auto& best = rows[0];
  std::ofstream(dir / "one.json") << scenario(R"("world_size": 128, "tensor_model_parallel_size": )" + best[3] +
                                              R"(, "pipeline_model_parallel_size": )" + best[4]);
  Proc run = sh(bin + " run one.json --json one.result.json", dir);
  REQUIRE_MESSAGE(run.rc == 0, run.err);
  const auto j = nlohmann::json::parse(slurp(dir / "one.result.json"));
  char step[32];
  std::snprintf(step, sizeof step, "%.4f", j["iteration_s"].get<double>());
  CHECK(best[7] == std::string(step));
  CHECK(j["gpus"].get<int>() == 128);
}
