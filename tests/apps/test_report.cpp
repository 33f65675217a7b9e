// The HTML report renders in headless Chromium: the screenshot is a real (non-blank) PNG and the page logs
// no console errors. A deliberately broken page proves the console check can fail. SKIPs (and says so)
// where no chromium binary is installed.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "sim/replay/outputs.hpp"

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

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

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
  fs::path dir = fs::temp_directory_path() / ("fabricsim_report_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
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
