// Output writers: the timeline is valid Chrome trace JSON whose slices match the RunResult's ops; link
// statistics, result JSON and report are computed from the records; everything is deterministic.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <unistd.h>

#include "sim/base/error.hpp"
#include "sim/base/json_schema.hpp"
#include "replay/outputs.hpp"
#include "replay/outputs_compare.hpp"
#include "replay/progress.hpp"

using namespace fabricsim;
using fabricsim::sim::RunResult;

namespace {

// 2 hosts x 2 GPUs, a compute stream and a comm stream each; 3 links, one with a time series.
RunResult sample_result() {
  RunResult r;
  r.topology = "test-topo";
  r.topology_params = {{"nodes", "2"}};
  r.workload = "test-workload";
  r.workload_params = {{"tp", "2"}};
  r.gpus = 4;
  r.iteration_s = 0.010;
  r.samples_per_s = 100;
  r.tflops_per_gpu = 123.4;
  r.breakdown.compute_s = 0.006;
  r.breakdown.exposed_comm_s = {{"tp", 0.002}, {"dp", 0.001}};
  r.breakdown.bubble_s = 0.0005;
  r.breakdown.idle_s = 0.0005;
  for (int rank = 0; rank < 4; ++rank) {
    int host = rank / 2;
    for (int layer = 0; layer < 3; ++layer) {
      sim::OpRecord c;
      c.rank = rank;
      c.host = host;
      c.stream = "compute";
      c.name = "layer" + std::to_string(layer) + ".fwd";
      c.kind = "compute";
      c.category = "compute";
      c.start_s = layer * 0.003 + rank * 1e-6;
      c.end_s = c.start_s + 0.002;
      c.flops = 1e12;
      r.ops.push_back(c);
      sim::OpRecord a;
      a.rank = rank;
      a.host = host;
      a.stream = "comm.tp";
      a.name = "layer" + std::to_string(layer) + ".tp.allreduce \"q\"";
      a.kind = "collective";
      a.category = "tp";
      a.start_s = c.end_s;
      a.end_s = a.start_s + 0.0007;
      a.bytes = 16 << 20;
      a.algorithm = "ring";
      a.protocol = "simple";
      r.ops.push_back(a);
    }
  }
  sim::LinkRecord l0;
  l0.link = 7;
  l0.a = "h0.gpu0";
  l0.b = "h0.nvswitch0";
  l0.kind = "nvlink";
  l0.tier = 0;
  l0.capacity_Bps = 100e9;
  l0.bytes[0] = 400e6;  // util_avg_run = 400e6/(100e9*0.01) = 0.4
  l0.bytes[1] = 100e6;
  l0.busy_s[0] = 0.005;  // util_avg_busy = 0.8
  l0.busy_s[1] = 0.004;
  l0.peak_util[0] = 0.9;
  l0.peak_util[1] = 0.3;
  l0.util_series[0] = {{0.0, 0.0}, {0.002, 0.9}, {0.004, 0.7}, {0.008, 0.0}};
  sim::LinkRecord l1;
  l1.link = 3;
  l1.a = "h0.nic0";
  l1.b = "leaf0";
  l1.kind = "infiniband";
  l1.tier = 1;
  l1.capacity_Bps = 25e9;
  l1.bytes[0] = 150e6;  // 0.6 of the run
  l1.busy_s[0] = 0.0075;
  l1.peak_util[0] = 1.0;
  sim::LinkRecord l2;  // carried nothing: not listed
  l2.link = 9;
  l2.a = "x";
  l2.b = "y";
  l2.kind = "pcie";
  l2.capacity_Bps = 32e9;
  r.links = {l0, l1, l2};
  r.metrics = {{"memory_per_gpu_bytes.max", 1.5e10}};
  r.notes = {"a note with <html> & \"quotes\""};
  r.wall_s = 1.234;
  return r;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("timeline is Chrome trace JSON whose slices are exactly the ops") {
  RunResult r = sample_result();
  std::string text = sim::timeline_json(r, 16);
  Json j = Json::parse(text);  // throws on invalid JSON
  REQUIRE(j.contains("traceEvents"));
  REQUIRE(j["traceEvents"].is_array());
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<int, std::string> process_names;
  std::vector<Json> slices, counters;
  for (const auto& e : j["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    REQUIRE(e.contains("name"));
    std::string ph = e["ph"];
    CHECK((ph == "M" || ph == "X" || ph == "C"));
    if (ph == "M") {
      if (e["name"] == "thread_name") thread_names[{e["pid"], e["tid"]}] = e["args"]["name"];
      if (e["name"] == "process_name") process_names[e["pid"]] = e["args"]["name"];
    } else {
      REQUIRE(e.contains("ts"));
      CHECK(e["ts"].get<double>() >= 0);
      if (ph == "X") {
        REQUIRE(e.contains("dur"));
        REQUIRE(e.contains("tid"));
        slices.push_back(e);
      } else {
        counters.push_back(e);
      }
    }
  }
  CHECK(process_names.at(1) == "host 0");
  CHECK(process_names.at(2) == "host 1");
  CHECK(thread_names.size() == 8);  // 4 ranks x 2 streams
  REQUIRE(slices.size() == r.ops.size());
  // Every op appears once with its name, time, thread and args.
  std::multiset<std::string> expected, got;
  for (const auto& op : r.ops) {
    char key[512];
    std::snprintf(key, sizeof key, "%d|gpu%d %s|%s|%.3f|%.3f|%.0f|%s", op.host + 1, op.rank, op.stream.c_str(),
                  op.name.c_str(), op.start_s * 1e6, (op.end_s - op.start_s) * 1e6, op.bytes, op.algorithm.c_str());
    expected.insert(key);
  }
  for (const auto& e : slices) {
    int pid = e["pid"], tid = e["tid"];
    const auto& a = e["args"];
    char key[512];
    std::snprintf(key, sizeof key, "%d|%s|%s|%.3f|%.3f|%.0f|%s", pid, thread_names.at({pid, tid}).c_str(),
                  e["name"].get<std::string>().c_str(), e["ts"].get<double>(), e["dur"].get<double>(),
                  a.contains("bytes") ? a["bytes"].get<double>() : 0.0,
                  a.contains("algorithm") ? a["algorithm"].get<std::string>().c_str() : "");
    got.insert(key);
    if (a["kind"] == "collective") CHECK(a["protocol"] == "simple");
  }
  CHECK(got == expected);
  // Counter tracks: both links that carried traffic, in their own process; link 7's follows its series.
  std::set<std::string> tracks;
  int n7 = 0;
  for (const auto& c : counters) {
    tracks.insert(c["name"]);
    CHECK(c["pid"] == 3);  // hosts 0,1 are pids 1,2; the links process comes next
    if (c["name"].get<std::string>().find("link 7 ") == 0) ++n7;
  }
  CHECK(tracks.size() == 3);  // link 7 both directions, link 3 a->b
  CHECK(n7 == 4 + 2);         // 4 series points for a->b, 2 (avg, 0) for b->a which has no series
}

TEST_CASE("timeline is deterministic and independent of op order; counter limit respected") {
  RunResult r = sample_result();
  std::string a = sim::timeline_json(r, 16);
  RunResult s = r;
  std::mt19937 rng(42);
  std::shuffle(s.ops.begin(), s.ops.end(), rng);
  s.wall_s = 99;  // never written
  CHECK(sim::timeline_json(s, 16) == a);
  Json j = Json::parse(sim::timeline_json(r, 1));
  std::set<std::string> tracks;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "C") tracks.insert(e["name"]);
  REQUIRE(tracks.size() == 1);
  CHECK(tracks.begin()->find("link 3 h0.nic0->leaf0") == 0);  // hottest: 0.6 of the run
  Json none = Json::parse(sim::timeline_json(r, 0));
  for (const auto& e : none["traceEvents"]) CHECK(e["ph"] != "C");
}

TEST_CASE("timeline without time series says so") {
  RunResult r = sample_result();
  for (auto& l : r.links) l.util_series[0].clear(), l.util_series[1].clear();
  Json j = Json::parse(sim::timeline_json(r, 16));
  CHECK(j["otherData"]["link_counters"].get<std::string>().find("no per-link time series") != std::string::npos);
  // Each track: the run average (link 3 a->b carried 0.6 of its capacity over the run, at 0.8 while busy),
  // then 0 at the end of the run.
  int seen = 0;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "C" && e["name"].get<std::string>().find("link 3 ") == 0) {
      ++seen;
      CHECK(e["name"].get<std::string>().find("run average") != std::string::npos);
      double ts = e["ts"];
      if (ts == 0) CHECK(e["args"]["util"].get<double>() == doctest::Approx(0.6));
      else CHECK(ts == doctest::Approx(10000.0));
    }
  CHECK(seen == 2);
}

// Without time series, the time average of every link counter track over the run equals the utilisation
// the link statistics report (util_avg_run); tests/apps/test_timeline_counters.cpp checks real runs, with
// series too (sample_result's hand-made series are not consistent with its byte counts).
TEST_CASE("timeline link counters average to the link statistics' run utilisation") {
  for (bool series : {false}) {
    RunResult r = sample_result();
    if (!series)
      for (auto& l : r.links) l.util_series[0].clear(), l.util_series[1].clear();
    std::map<std::string, double> expected;
    for (const auto& s : sim::link_dir_stats(r))
      expected["link " + std::to_string(s.link) + " " + s.from + "->" + s.to] = s.util_avg_run;
    Json j = Json::parse(sim::timeline_json(r, 16));
    std::map<std::string, std::vector<std::pair<double, double>>> tracks;  // name prefix -> (ts us, util)
    for (const auto& e : j["traceEvents"])
      if (e["ph"] == "C") {
        std::string name = e["name"];
        name = name.substr(0, name.find(" ("));
        tracks[name].push_back({e["ts"].get<double>(), e["args"]["util"].get<double>()});
      }
    REQUIRE(tracks.size() == 3);
    const double span_us = 10000.0;  // sample_result's run span
    for (auto& [name, pts] : tracks) {
      CAPTURE(name);
      CAPTURE(series);
      std::sort(pts.begin(), pts.end());
      double area = 0;
      for (std::size_t i = 0; i < pts.size(); ++i) {
        const double end = i + 1 < pts.size() ? pts[i + 1].first : span_us;
        area += pts[i].second * (end - pts[i].first);
      }
      REQUIRE(expected.count(name));
      CHECK(area / span_us == doctest::Approx(expected[name]).epsilon(1e-3));
    }
  }
}

TEST_CASE("link statistics from the records") {
  RunResult r = sample_result();
  auto st = sim::link_dir_stats(r);
  REQUIRE(st.size() == 3);  // link 3 a->b, link 7 both; link 9 carried nothing
  CHECK(st[0].link == 3);
  CHECK(st[1].link == 7);
  CHECK(st[1].dir == 0);
  CHECK(st[2].dir == 1);
  CHECK(st[1].util_avg_busy == doctest::Approx(0.8));
  CHECK(st[1].util_avg_run == doctest::Approx(0.4));
  CHECK(st[1].util_peak == doctest::Approx(0.9));
  CHECK(st[2].from == "h0.nvswitch0");
  CHECK(st[0].util_avg_run == doctest::Approx(0.6));
  auto hot = sim::hottest_links(r, 2);
  REQUIRE(hot.size() == 2);
  CHECK(hot[0].link == 3);
  CHECK(hot[1].link == 7);
  CHECK(hot[1].dir == 0);

  std::string csv = sim::link_stats_csv(r);
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  CHECK(line == "link_id,direction,from,to,kind,tier,capacity_Bps,bytes,busy_s,util_avg_busy,util_avg_run,util_peak");
  std::getline(in, line);
  CHECK(line == "3,a->b,h0.nic0,leaf0,infiniband,1,2.5e+10,150000000,0.0075,0.800000,0.600000,1.000000");
  int rows = 1;
  while (std::getline(in, line)) ++rows;
  CHECK(rows == 3);

  Json lj = Json::parse(sim::link_stats_json(r));
  REQUIRE(lj["links"].size() == 3);
  CHECK(lj["links"][1]["util_avg_busy"].get<double>() == doctest::Approx(0.8));
  CHECK(lj["span_s"].get<double>() == doctest::Approx(0.010));

  std::string txt = sim::hottest_links_text(r, 2);
  CHECK(txt.find("h0.nic0 -> leaf0") != std::string::npos);
  CHECK(txt.find("h0.nvswitch0 -> h0.gpu0") == std::string::npos);  // only 2 listed
}

TEST_CASE("result JSON carries the summary figures") {
  RunResult r = sample_result();
  Json j = sim::result_json(r, 5);
  CHECK(j["schema_version"] == 1);
  CHECK(j["gpus"] == 4);
  CHECK(j["iteration_s"].get<double>() == doctest::Approx(0.010));
  CHECK(j["breakdown"]["exposed_comm_total_s"].get<double>() == doctest::Approx(0.003));
  CHECK(j["breakdown"]["exposed_comm_s"]["tp"].get<double>() == doctest::Approx(0.002));
  CHECK(j["ops"]["count"] == 24);
  CHECK(j["ops"]["ranks_recorded"] == 4);
  CHECK(j["ops"]["by_category"]["tp"]["count"] == 12);
  CHECK(j["ops"]["by_category"]["tp"]["bytes"].get<double>() == doctest::Approx(12.0 * (16 << 20)));
  CHECK(j["links"]["hottest"].size() == 3);
  CHECK(j["links"]["time_series"] == true);
  CHECK(j["metrics"]["memory_per_gpu_bytes.max"].get<double>() == doctest::Approx(1.5e10));
  CHECK(!j.contains("wall_s"));
  CHECK(sim::result_json(r, 5).dump() == j.dump());
}

TEST_CASE("summary and report contain the figures, escaped") {
  RunResult r = sample_result();
  std::string s = sim::summary_text(r, 3);
  CHECK(s.find("step time    10.000 ms") != std::string::npos);
  CHECK(s.find("exposed tp") != std::string::npos);
  CHECK(s.find("hottest links") != std::string::npos);
  std::string h = sim::report_html(r, 3);
  CHECK(h.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(h.find("<script") == std::string::npos);
  CHECK(h.find("http://") == h.find("http://www.w3.org/2000/svg"));  // no external assets, only the SVG ns
  int svgs = 0;
  for (std::size_t p = h.find("<svg"); p != std::string::npos; p = h.find("<svg", p + 1)) ++svgs;
  // breakdown, timeline of the representative ranks and of all ranks (in <details>), one utilisation histogram
  // per link class (nvlink, infiniband), the heatmap over time (the sample has a time series)
  CHECK(svgs == 6);
  CHECK(h.find("a note with &lt;html&gt; &amp; &quot;quotes&quot;") != std::string::npos);
  CHECK(h.find("<html> &") == std::string::npos);
  CHECK(sim::report_html(r, 3) == h);
}

TEST_CASE("outputs section and flags") {
  Json j = Json::parse(R"({"timeline":"t.json","link_stats":"l.csv","json":"r.json","report":"r.html","top_links":4})");
  auto o = sim::output_options_from_json(j, {"scn.json", "/outputs"});
  CHECK(o.timeline_path == "t.json");
  CHECK(o.report_path == "r.html");
  CHECK(o.top_links == 4);
  Json bad = Json::parse(R"({"timelime":"t.json"})");
  try {
    sim::output_options_from_json(bad, {"scn.json", "/outputs"});
    FAIL("expected InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("scn.json") != std::string::npos);
    CHECK(std::string(e.what()).find("timelime") != std::string::npos);
  }
  CHECK_THROWS_AS(sim::output_options_from_json(Json::parse(R"({"top_links":-1})"), {"s", "/outputs"}), InputError);
  std::map<std::string, std::string> given = {{"--timeline", "x.json"}, {"--quiet", "1"}, {"--top-links", "7"}};
  sim::merge_output_flags(o, [&](const std::string& n) -> std::optional<std::string> {
    auto it = given.find(n);
    if (it == given.end()) return std::nullopt;
    return it->second;
  });
  CHECK(o.timeline_path == "x.json");
  CHECK(o.json_path == "r.json");
  CHECK(o.quiet);
  CHECK(o.top_links == 7);
  given = {{"--top-links", "many"}};
  CHECK_THROWS_AS(sim::merge_output_flags(o, [&](const std::string& n) -> std::optional<std::string> {
                    auto it = given.find(n);
                    if (it == given.end()) return std::nullopt;
                    return it->second;
                  }),
                  InputError);
  CHECK(sim::output_flags().size() == 7);
}

TEST_CASE("write_outputs writes every requested file and fails cleanly") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("fabricsim_outputs_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  RunResult r = sample_result();
  sim::OutputOptions o;
  o.timeline_path = (dir / "t.json").string();
  o.link_stats_path = (dir / "l.json").string();
  o.json_path = (dir / "r.json").string();
  o.report_path = (dir / "r.html").string();
  sim::write_outputs(r, o);
  CHECK(slurp(o.timeline_path) == sim::timeline_json(r, o.timeline_links));
  CHECK(slurp(o.link_stats_path) == sim::link_stats_json(r));
  CHECK(Json::parse(slurp(o.json_path)) == sim::result_json(r, o.top_links));
  CHECK(slurp(o.report_path) == sim::report_html(r, o.top_links));
  o.link_stats_path = (dir / "l.csv").string();
  sim::write_outputs(r, o);
  CHECK(slurp(o.link_stats_path) == sim::link_stats_csv(r));
  sim::OutputOptions bad;
  bad.json_path = (dir / "no_such_dir" / "r.json").string();
  CHECK_THROWS_AS(sim::write_outputs(r, bad), InputError);
  CHECK(!fs::exists(dir / "no_such_dir"));
  fs::remove_all(dir);
}

TEST_CASE("progress bar text and silence") {
  std::string line = sim::Progress::render("sweep", 25, 100, 10.0, 20);
  CHECK(line.find("[#####...............]") != std::string::npos);
  CHECK(line.find(" 25.0%") != std::string::npos);
  CHECK(line.find("ETA 00:30") != std::string::npos);  // 10 s for 25 -> 30 s for the other 75
  std::ostringstream out;
  {
    sim::Progress p("x", 10, false, out);
    p.advance(3);
    p.finish();
  }
  CHECK(out.str().empty());
  std::ostringstream out2;
  {
    sim::Progress p("x", 10, true, out2);
    p.advance(3);
    p.finish();
  }
  CHECK(out2.str().find("100.0%") != std::string::npos);
  CHECK(out2.str().back() == '\n');
  std::ostringstream out3;
  {
    sim::Progress p("x", 10, true, out3);
    p.advance(1);
    p.interrupt();
    CHECK(out3.str().substr(out3.str().size() - 4) == "\r\033[K");
    p.advance(1);  // redraws at once after an interrupt
    CHECK(out3.str().find("2/10") != std::string::npos);
  }
}

TEST_CASE("progress off a terminal: whole lines at the interval, and the final line") {
  std::ostringstream every;
  {
    sim::Progress p("fits", 4, true, every, sim::Progress::Mode::lines, 0.0);
    p.advance();
    p.advance();
    p.finish();
  }
  // interval 0: a line per update plus the finish line, no carriage returns.
  const std::string e = every.str();
  CHECK(e.find('\r') == std::string::npos);
  CHECK(std::count(e.begin(), e.end(), '\n') == 3);
  CHECK(e.find("fits [") == 0);
  CHECK(e.find("2/4") != std::string::npos);
  CHECK(e.find("4/4") != std::string::npos);
  std::ostringstream rare;
  {
    sim::Progress p("fits", 4, true, rare, sim::Progress::Mode::lines, 3600.0);
    for (int i = 0; i < 4; ++i) p.advance();
    p.finish();
  }
  // An hour's interval: only the finish line.
  const std::string ra = rare.str();
  CHECK(std::count(ra.begin(), ra.end(), '\n') == 1);
  CHECK(ra.find("100.0% 4/4") != std::string::npos);
}

TEST_CASE("result JSON keys match docs/result.schema.json") {
  Json schema = Json::parse(slurp(std::string(FABRICSIM_SOURCE_DIR) + "/docs/result.schema.json"));
  sim::RunResult with_mfu = sample_result();
  with_mfu.mfu = 0.4;  // mfu / mfu_convention: written only when the workload names its dense peak
  with_mfu.comm_model = "shared";  // comm_model: written when a replay named its model
  with_mfu.jobs.push_back(sim::JobResult{});  // jobs / shared_links: written only for cluster scenarios
  with_mfu.jobs[0].name = "a";
  with_mfu.shared_links.push_back(sim::SharedLinkRecord{});
  // samples_per_s / tflops_per_gpu: left out when the workload does not state them (a trace without them).
  sim::RunResult unknown = sample_result();
  unknown.samples_known = unknown.flops_known = false;
  Json j = sim::result_json(unknown, 5), jm = sim::result_json(with_mfu, 5);
  auto keys_of = [](const Json& o) {
    std::set<std::string> k;
    for (const auto& [key, v] : o.items()) k.insert(key);
    return k;
  };
  auto required = [](const Json& s) {
    std::set<std::string> k;
    for (const auto& v : s["required"]) k.insert(v.get<std::string>());
    return k;
  };
  CHECK(keys_of(j) == required(schema));
  CHECK(keys_of(jm) == keys_of(schema["properties"]));
  CHECK(keys_of(jm["jobs"][0]) == required(schema["properties"]["jobs"]["items"]));
  CHECK(keys_of(jm["shared_links"][0]) == keys_of(schema["properties"]["shared_links"]["items"]["properties"]));
  CHECK(keys_of(j["breakdown"]) == required(schema["properties"]["breakdown"]));
  CHECK(keys_of(j["ops"]) == required(schema["properties"]["ops"]));
  CHECK(keys_of(j["links"]) == required(schema["properties"]["links"]));
  CHECK(keys_of(j["links"]["hottest"][0]) == required(schema["$defs"]["link_direction"]));
  CHECK(keys_of(j["links"]["by_tier"][0]) == required(schema["properties"]["links"]["properties"]["by_tier"]["items"]));
  CHECK(keys_of(j["links"]["by_class"][0]) == required(schema["properties"]["links"]["properties"]["by_class"]["items"]));
  CHECK(keys_of(j["ops"]["by_category"]["tp"]) ==
        required(schema["properties"]["ops"]["properties"]["by_category"]["additionalProperties"]));
  Json lj = Json::parse(sim::link_stats_json(sample_result()));
  CHECK(keys_of(lj["links"][0]) == required(schema["$defs"]["link_direction"]));
  // What is written passes the check `compare` applies to what it reads, with the schema built into the binary.
  CHECK(Json::parse(sim::embedded_result_schema().at(0).second) == schema);
  CHECK_NOTHROW(check_json_schema(j, schema, JsonPath{"r.json", ""}, "docs/result.schema.json"));
  CHECK_NOTHROW(check_json_schema(jm, schema, JsonPath{"r.json", ""}, "docs/result.schema.json"));
}
