// The HTML report renders in headless Chromium: the screenshot is a real (non-blank) PNG and the page logs
// no console errors. A deliberately broken page proves the console check can fail. SKIPs (and says so)
// where no chromium binary is installed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "cli_test_util.hpp"
#include "replay/outputs.hpp"

using namespace fabricsim;
namespace fs = std::filesystem;

namespace {

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    std::string cmd = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return name;
  }
  return "";
}

namespace cli_test = fabricsim::cli_test;
using cli_test::slurp;

struct Render {
  int rc = -1;
  std::string png;
  std::string log;
};

// Screenshots `html` (a file) at 1200x900; returns the PNG bytes and the browser's stderr.
Render render(const std::string& chromium, const fs::path& html, const fs::path& dir) {
  fs::path png = dir / (html.stem().string() + ".png");
  fs::path log = dir / (html.stem().string() + ".log");
  fs::path profile = dir / (html.stem().string() + ".profile");
  fs::create_directories(profile);
  std::string cmd = "timeout 120 " + chromium +
                    " --headless --no-sandbox --disable-gpu --disable-background-networking"
                    " --disable-component-update --disable-sync --no-first-run --enable-logging=stderr --v=0"
                    " --user-data-dir='" + profile.string() + "' --screenshot='" + png.string() +
                    "' --window-size=1200,900 'file://" + fs::absolute(html).string() + "' >/dev/null 2>'" +
                    log.string() + "'";
  Render r;
  r.rc = std::system(cmd.c_str());
  r.png = slurp(png);
  r.log = slurp(log);
  return r;
}

bool has_console_error(const std::string& log) {
  // Chromium prints page console messages (errors, uncaught exceptions) as "...:CONSOLE(...)" lines.
  return log.find(":CONSOLE") != std::string::npos;
}

sim::RunResult report_result() {
  sim::RunResult r;
  r.topology = "dgx-h100 x2";
  r.workload = "gpt <test>";
  r.gpus = 16;
  r.iteration_s = 0.020;
  r.breakdown.compute_s = 0.012;
  r.breakdown.exposed_comm_s = {{"tp", 0.004}, {"dp", 0.002}};
  r.breakdown.bubble_s = 0.0015;
  r.breakdown.idle_s = 0.0005;
  for (int rank = 0; rank < 16; ++rank)
    for (int i = 0; i < 20; ++i) {
      sim::OpRecord o;
      o.rank = rank;
      o.host = rank / 8;
      bool comm = i % 3 == 2;
      o.stream = comm ? "comm.tp" : "compute";
      o.kind = comm ? "collective" : "compute";
      o.category = comm ? "tp" : "compute";
      o.name = "layer" + std::to_string(i);
      o.start_s = i * 0.001 + rank * 1e-5;
      o.end_s = o.start_s + 0.0008;
      r.ops.push_back(o);
    }
  for (std::uint32_t id = 0; id < 12; ++id) {
    sim::LinkRecord l;
    l.link = id;
    l.a = "n" + std::to_string(id);
    l.b = "sw" + std::to_string(id % 3);
    l.kind = id < 8 ? "nvlink" : "infiniband";
    l.tier = id < 8 ? 0 : 1;
    l.capacity_Bps = id < 8 ? 450e9 : 50e9;
    l.bytes[0] = l.capacity_Bps * 0.02 * (0.1 + 0.07 * id);
    l.busy_s[0] = 0.015;
    l.util_series[0] = {{0, 0}, {0.002 + 0.0005 * id, 0.9}, {0.012, 0.3}, {0.018, 0}};
    r.links.push_back(l);
  }
  r.notes = {"rendered by the report test"};
  return r;
}

}  // namespace

TEST_CASE("HTML report renders in headless Chromium without console errors") {
  std::string chromium = find_chromium();
  if (chromium.empty()) {
    MESSAGE("SKIPPED: no chromium binary on PATH (install the Debian package `chromium`); report not rendered");
    return;
  }
  const fs::path dir = cli_test::scratch_dir("report_test");
  fs::path html = dir / "report.html";
  sim::OutputOptions o;
  o.report_path = html.string();
  sim::write_outputs(report_result(), o);

  Render good = render(chromium, html, dir);
  CHECK(good.rc == 0);
  REQUIRE(good.png.size() > 24);
  CHECK(good.png.compare(1, 3, "PNG") == 0);
  // IHDR width/height (big-endian at bytes 16..23) are the window size.
  auto be32 = [&](std::size_t at) {
    return (static_cast<unsigned>(static_cast<unsigned char>(good.png[at])) << 24) |
           (static_cast<unsigned>(static_cast<unsigned char>(good.png[at + 1])) << 16) |
           (static_cast<unsigned>(static_cast<unsigned char>(good.png[at + 2])) << 8) |
           static_cast<unsigned>(static_cast<unsigned char>(good.png[at + 3]));
  };
  CHECK(be32(16) == 1200);
  CHECK(be32(20) == 900);
  // A blank page at this size compresses to about 5 KB; the charts make it many times larger.
  fs::path blank = dir / "blank.html";
  std::ofstream(blank) << "<!DOCTYPE html><html><body></body></html>\n";
  Render empty = render(chromium, blank, dir);
  REQUIRE(!empty.png.empty());
  CHECK(good.png.size() > 4 * empty.png.size());
  CHECK_MESSAGE(!has_console_error(good.log), good.log);

  // Negative control: a page with a script error is caught by the same check.
  fs::path bad = dir / "bad.html";
  std::ofstream(bad) << "<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>\n";
  Render broken = render(chromium, bad, dir);
  CHECK(has_console_error(broken.log));
  fs::remove_all(dir);
}

TEST_CASE("fabricsim run writes timeline, link stats, result JSON and report that agree, deterministically") {
  const fs::path dir = cli_test::scratch_dir("run_outputs_test");
  std::ofstream(dir / "s.json") << R"({
  "topology": {"preset": "superpod", "params": {"nodes": 2, "node": "dgx-h100"}},
  "workload": {"generator": "gpt", "params": {
    "num_layers": 4, "hidden_size": 1024, "num_attention_heads": 16, "seq_length": 1024,
    "padded_vocab_size": 51200, "micro_batch_size": 1, "global_batch_size": 16,
    "tensor_model_parallel_size": 4, "pipeline_model_parallel_size": 2}},
  "outputs": {"report": "r.html"}
})";
  auto run = [&](const std::string& tag) {
    return cli_test::run_in(dir, cli_test::fabricsim("run s.json --quiet --timeline t" + tag + ".json --link-stats l" +
                                                     tag + ".csv --json r" + tag + ".json"));
  };
  const cli_test::Run run1 = run("1");
  REQUIRE_MESSAGE(run1.rc == 0, run1.err);
  const cli_test::Run run2 = run("2");
  REQUIRE_MESSAGE(run2.rc == 0, run2.err);
  for (const char* f : {"t", "l", "r"}) {
    std::string ext = std::string(f) == "l" ? ".csv" : ".json";
    CHECK_MESSAGE(slurp(dir / (std::string(f) + "1" + ext)) == slurp(dir / (std::string(f) + "2" + ext)), f);
  }
  CHECK(run1.out == run2.out);
  CHECK(fs::exists(dir / "r.html"));  // from the scenario's outputs section, relative to the scenario

  Json t = Json::parse(slurp(dir / "t1.json"));
  Json r = Json::parse(slurp(dir / "r1.json"));
  CHECK(r["schema_version"] == 1);
  CHECK(r["gpus"] == 16);
  std::map<std::string, long long> slices_by_cat;
  long long slices = 0;
  double last_end_us = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++slices;
    slices_by_cat[e["cat"].get<std::string>()] += 1;
    last_end_us = std::max(last_end_us, e["ts"].get<double>() + e["dur"].get<double>());
  }
  CHECK(slices == r["ops"]["count"].get<long long>());
  REQUIRE(slices > 0);
  for (const auto& [cat, v] : r["ops"]["by_category"].items()) CHECK(slices_by_cat[cat] == v["count"].get<long long>());
  // The slices end within the simulated span.
  CHECK(last_end_us <= r["span_s"].get<double>() * 1e6 + 1e-3);
  CHECK(slurp(dir / "l1.csv").rfind("link_id,direction,from,to,kind,tier,capacity_Bps,", 0) == 0);
  // The summary on stdout prints the same step time as the JSON.
  char ms[64];
  std::snprintf(ms, sizeof ms, "step time    %.3f ms", r["iteration_s"].get<double>() * 1e3);
  CHECK(run1.out.find(ms) != std::string::npos);

  std::string chromium = find_chromium();
  if (chromium.empty()) {
    MESSAGE("SKIPPED: no chromium binary on PATH; the real run's report was not rendered");
  } else {
    Render rr = render(chromium, dir / "r.html", dir);
    CHECK(rr.rc == 0);
    CHECK(rr.png.size() > 20000);
    CHECK_MESSAGE(!has_console_error(rr.log), rr.log);
  }
  fs::remove_all(dir);
}
