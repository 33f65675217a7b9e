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
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "models/gpu.hpp"
#include "replay/outputs.hpp"
#include "sim/base/units.hpp"

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

// Screenshots `html` (a file) at 1200 x `height`; returns the PNG bytes and the browser's stderr.
Render render(const std::string& chromium, const fs::path& html, const fs::path& dir, int height = 900) {
  fs::path png = dir / (html.stem().string() + ".png");
  fs::path log = dir / (html.stem().string() + ".log");
  fs::path profile = dir / (html.stem().string() + ".profile");
  fs::create_directories(profile);
  std::string cmd = "timeout 120 " + chromium +
                    " --headless --no-sandbox --disable-gpu --disable-background-networking"
                    " --disable-component-update --disable-sync --no-first-run --enable-logging=stderr --v=0"
                    " --user-data-dir='" + profile.string() + "' --screenshot='" + png.string() +
                    "' --window-size=1200," + std::to_string(height) + " 'file://" + fs::absolute(html).string() + "' >/dev/null 2>'" +
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

TEST_CASE("report roles: ranks with the same ops share a role, shown by the lowest rank") {
  sim::RunResult r = report_result();
  auto roles = sim::rank_roles(r);
  REQUIRE(roles.size() == 1);  // 16 ranks, the same ops (start times differ by 10 us per rank: not part of a role)
  CHECK(roles[0].representative == 0);
  CHECK(roles[0].ranks.size() == 16);
  for (auto& o : r.ops)
    if (o.rank >= 8 && o.name == "layer3") o.name = "layer3b";  // the second host's ranks run other work
  roles = sim::rank_roles(r);
  REQUIRE(roles.size() == 2);
  CHECK(roles[1].representative == 8);
  CHECK(roles[1].ranks == std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15});
  const std::string html = sim::report_html(r, 10);
  CHECK(html.find("<td>8-15</td><td class=\"n\">8 ranks</td>") != std::string::npos);
  CHECK(html.find("2 roles among 16 recorded ranks.") != std::string::npos);
}

namespace {

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
  std::ofstream(dir / "s.json") << cli_test::small_gpt_scenario(2, 16, 4, 2, ",\n  \"outputs\": {\"report\": \"r.html\"}");
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

namespace {

// Every <td class="n">...</td> cell's text.
std::vector<std::string> number_cells(const std::string& html) {
  std::vector<std::string> out;
  const std::string open = "<td class=\"n\">";
  for (std::size_t p = html.find(open); p != std::string::npos; p = html.find(open, p + 1)) {
    std::size_t a = p + open.size(), b = html.find("</td>", a);
    out.push_back(html.substr(a, b - a));
  }
  return out;
}

std::string section_of(const std::string& html, const std::string& id) {
  std::size_t a = html.find("<section id=\"" + id + "\">");
  if (a == std::string::npos) return "";
  std::size_t b = html.find("</section>", a);
  return html.substr(a, b - a + 10);
}

std::size_t count_of(const std::string& s, const std::string& needle) {
  std::size_t c = 0;
  for (std::size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++c;
  return c;
}

// IHDR height of a PNG.
unsigned png_height(const std::string& png) {
  if (png.size() < 24) return 0;
  unsigned v = 0;
  for (int i = 20; i < 24; ++i) v = (v << 8) | static_cast<unsigned char>(png[static_cast<std::size_t>(i)]);
  return v;
}

}  // namespace

// The report's elements (issue 26) on a real run under every communication model, and a screenshot of each
// section (written to docs/img/ when FABRICSIM_UPDATE_DOCS_IMG=1; docs/outputs.md shows them).
TEST_CASE("report: header, roles timeline, link classes under every comm model, hottest by class, units") {
  const fs::path dir = cli_test::scratch_dir("report_sections");
  std::ofstream(dir / "s.json") << cli_test::small_gpt_scenario(2, 16, 4, 2);
  std::string engine_html;
  for (const std::string cm : {"engine", "shared", "analytic"}) {
    CAPTURE(cm);
    const cli_test::Run run = cli_test::run_in(
        dir, cli_test::fabricsim("run s.json --quiet --comm-model " + cm + " --report " + cm + ".html --json " + cm + ".json"));
    REQUIRE_MESSAGE(run.rc == 0, run.err);
    const std::string html = slurp(dir / (cm + ".html"));
    const Json j = Json::parse(slurp(dir / (cm + ".json")));
    // Header: the question answered, each figure with its unit.
    const std::string head = section_of(html, "header");
    REQUIRE(!head.empty());
    char step[64];
    std::snprintf(step, sizeof step, "%.3f ms", j["iteration_s"].get<double>() * 1e3);
    CHECK(head.find(std::string("<h1>gpt on superpod: ") + step + " per step</h1>") != std::string::npos);
    for (const char* k : {">model<", ">cluster<", "16 GPUs", ">step time<", " tokens/s<", ">MFU<", ">memory per GPU<"})
      CHECK_MESSAGE(head.find(k) != std::string::npos, k);
    const std::string mem = format_bytes(j["metrics"]["memory_per_gpu_bytes.max"].get<double>()) + " (largest over the GPUs)";
    CHECK(mem.find(" MiB") != std::string::npos);  // 489 MiB: the unit is part of the figure
    CHECK_MESSAGE(head.find(mem) != std::string::npos, mem);
    // Every number carries its unit: no bare decimal number in a numeric cell (integers are counts).
    for (const auto& cell : number_cells(html)) {
      CAPTURE(cell);
      CHECK(!std::regex_match(cell, std::regex("[-+]?[0-9]*\\.[0-9]+")));
      if (std::regex_match(cell, std::regex("[0-9]+"))) continue;
      CHECK(std::regex_search(cell, std::regex(" (ms|us|ns|s|%|B|KiB|MiB|GiB|TiB|Gb/s|TFLOP/s|TFLOP|ranks?|\\(count\\))$")));
    }
    // Notes at the end.
    CHECK(html.find("<section id=\"notes\">") > html.find("<section id=\"hottest\">"));
    const std::string links = section_of(html, "links");
    const std::string hot = section_of(html, "hottest");
    // Link classes: NVLink, PCIe and NIC - leaf carry traffic, with the result JSON's figures (under analytic
    // too: each call's schedule bytes, busy for the analytic time; replay/engine_comm_model.hpp).
    REQUIRE(j["links"]["by_class"].size() >= 2);
    int nonzero = 0;
    for (const auto& c : j["links"]["by_class"]) {
      const std::string cls = c["class"].get<std::string>();
      char util[64];
      std::snprintf(util, sizeof util, "%.1f %%", c["util_avg_run_mean"].get<double>() * 100);
      const std::size_t row = links.find("<tr class=\"linkclass\"><td>" + cls + "</td>");
      REQUIRE_MESSAGE(row != std::string::npos, cls);
      CHECK_MESSAGE(links.find(util, row) < links.find("</tr>", row), cls << " " << util);
      nonzero += c["util_avg_run_mean"].get<double>() >= 0.001;  // >= 0.1 %: a visible figure
    }
    CHECK(nonzero >= 3);
    CHECK(count_of(links, "<tr class=\"linkclass\">") == j["links"]["by_class"].size());
    // Hottest links: grouped by class, at most top_links (10) rows per class; ties folded into one row.
    for (const auto& c : j["links"]["by_class"])
      CHECK(hot.find("<tr><td>" + c["class"].get<std::string>() + "</td>") != std::string::npos);
    CHECK(count_of(hot, "<tr><td>") <= 10 * j["links"]["by_class"].size());
    if (cm == "engine") engine_html = html;
  }
  // Timeline: the replay simulates one rank per pipeline stage (gpu0, gpu8); PP 2 makes them two roles, each
  // shown by its lowest rank; every recorded rank behind <details>.
  const std::string tl = section_of(engine_html, "timeline");
  CHECK(tl.find("2 roles among 2 recorded ranks (of 16 GPUs") != std::string::npos);
  CHECK(tl.find(">role 1: gpu0 compute<") != std::string::npos);
  CHECK(tl.find(">role 2: gpu8 compute<") != std::string::npos);
  CHECK(tl.find("<details><summary>All 2 recorded ranks</summary>") != std::string::npos);
  CHECK(tl.find("time (ms) from the start of the step") != std::string::npos);
  CHECK(count_of(tl, " ms</text>") >= 5);  // axis ticks with their unit
  CHECK(tl.find("<div class=\"legend\">") != std::string::npos);
  CHECK(tl.find(">compute</span>") != std::string::npos);

  std::string chromium = find_chromium();
  if (chromium.empty()) {
    MESSAGE("SKIPPED: no chromium binary on PATH; the sections were not rendered");
    fs::remove_all(dir);
    return;
  }
  // docs/outputs.md shows a screenshot of each section, and the files are in the repository.
  const std::pair<const char*, int> sections[] = {{"header", 500},   {"breakdown", 260}, {"timeline", 560},
                                                   {"links", 400},    {"hottest", 300},   {"notes", 520}};
  const fs::path img = fs::path(FABRICSIM_SOURCE_DIR) / "docs" / "img";
  const std::string outputs_md = slurp(fs::path(FABRICSIM_SOURCE_DIR) / "docs" / "outputs.md");
  for (const auto& [id_c, height] : sections) {
    const std::string id = id_c;
    CAPTURE(id);
    CHECK(outputs_md.find(std::string("img/report-") + id + ".png") != std::string::npos);
  }
  // The whole report renders without console errors (one browser start: ~5 s on a loaded 2-core machine).
  // FABRICSIM_UPDATE_DOCS_IMG=1 also renders each section alone (the report's own <head>, so its styles, and
  // that <section>) and writes docs/img/report-<section>.png.
  const Render whole = render(chromium, dir / "engine.html", dir, 2600);
  CHECK(whole.rc == 0);
  CHECK(png_height(whole.png) == 2600u);
  CHECK(whole.png.size() > 100000);  // charts and tables; a blank 1200x2600 page is ~10 KB
  CHECK_MESSAGE(!has_console_error(whole.log), whole.log);
  const char* update = std::getenv("FABRICSIM_UPDATE_DOCS_IMG");
  const bool write_imgs = update && std::string(update) == "1";
  const std::string head_html = engine_html.substr(0, engine_html.find("<body>") + 6);
  std::string blank_png;
  if (write_imgs) {
    std::ofstream(dir / "blank.html") << head_html << "</body></html>\n";
    blank_png = render(chromium, dir / "blank.html", dir, 400).png;
    REQUIRE(!blank_png.empty());
  }
  for (const auto& [id_c, height] : sections) {
    const std::string id = id_c;
    CAPTURE(id);
    if (write_imgs) {
      fs::path page = dir / (std::string("report-") + id + ".html");
      std::ofstream(page) << head_html << section_of(engine_html, id) << "</body></html>\n";
      const Render r = render(chromium, page, dir, height);
      CHECK(r.rc == 0);
      CHECK(png_height(r.png) == static_cast<unsigned>(height));
      CHECK(r.png.size() > 2 * blank_png.size());  // the section draws something
      CHECK_MESSAGE(!has_console_error(r.log), r.log);
      fs::create_directories(img);
      std::ofstream(img / (std::string("report-") + id + ".png"), std::ios::binary) << r.png;
    }
    const std::string png = slurp(img / (std::string("report-") + id + ".png"));
    CHECK(png.size() > 5000);
    CHECK(png.compare(1, 3, "PNG") == 0);
  }
  fs::remove_all(dir);
}

// The text summary states the peak memory per GPU beside the GPU's HBM, as the report's header does.
TEST_CASE("run summary: the peak memory per GPU and the HBM of the GPU priced") {
  const fs::path dir = cli_test::scratch_dir("summary_memory");
  std::ofstream(dir / "s.json") << cli_test::small_gpt_scenario(2, 16, 4, 2);
  const cli_test::Run run = cli_test::run_in(dir, cli_test::fabricsim("run s.json --quiet --json r.json"));
  REQUIRE_MESSAGE(run.rc == 0, run.err);
  const Json j = Json::parse(slurp(dir / "r.json"));
  const std::string gpu = j["workload_params"]["gpu"].get<std::string>();
  const std::string line = "\nmemory       " + format_bytes(j["metrics"]["memory_per_gpu_bytes.max"].get<double>()) +
                           " per GPU at the peak, of " + format_bytes(fabricsim::models::gpu_spec(gpu).hbm_capacity_bytes) +
                           " on " + gpu + " (the largest over the GPUs";
  CHECK_MESSAGE(run.out.find(line) != std::string::npos, line);
  CHECK(run.out.find(line) > run.out.find("\nthroughput   "));
  CHECK(run.out.find(line) < run.out.find("\nbreakdown "));
}
