#include "replay/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace fabricsim::sim {

namespace {
// Off a terminal: one progress line this often (wall seconds): often enough to show a minutes-long
// `validate --loo` is alive, rarely enough not to flood a log.
constexpr double kOffTtyLineInterval_s = 5.0;

std::string format_eta(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  long long t = static_cast<long long>(std::llround(s));
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, (t / 60) % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", t / 60, t % 60);
  return buf;
}
}  // namespace

Progress::Progress(std::string label, double total, bool enabled, std::ostream& out)
    : label_(std::move(label)), total_(total), enabled_(enabled), out_(out) {
  start_ = std::chrono::steady_clock::now();
  last_draw_ = start_ - std::chrono::seconds(1);
}

Progress::Progress(std::string label, double total, bool enabled, std::ostream& out, Mode mode,
                   double line_interval_s)
    : Progress(std::move(label), total, enabled, out) {
  mode_ = mode;
  line_interval_s_ = line_interval_s;
  // The first line comes after one interval: a run shorter than that prints only its final line.
  last_draw_ = start_;
}

Progress::Progress(std::string label, double total, bool quiet)
    : Progress(std::move(label), total, !quiet, std::cerr, stderr_is_tty() ? Mode::bar : Mode::lines,
               kOffTtyLineInterval_s) {}

Progress::~Progress() {
  if (enabled_ && !finished_ && mode_ == Mode::bar) {
    std::lock_guard<std::mutex> lock(mu_);
    out_ << "\n" << std::flush;  // leave the partial bar on its own line
  }
}

bool Progress::stderr_is_tty() { return ::isatty(STDERR_FILENO) == 1; }

std::string Progress::render(const std::string& label, double done, double total, double elapsed_s,
                             int width) {
  double frac = total > 0 ? std::clamp(done / total, 0.0, 1.0) : 0.0;
  int filled = static_cast<int>(frac * width);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar += std::string(static_cast<std::size_t>(width - filled), '.');
  double eta = (done > 0 && total > 0) ? elapsed_s * (total - done) / done : -1;
  char buf[160];
  std::snprintf(buf, sizeof buf, " [%s] %5.1f%% %.0f/%.0f elapsed %s ETA %s", bar.c_str(), frac * 100.0, done,
                total, format_eta(elapsed_s).c_str(), frac >= 1.0 ? "00:00" : format_eta(eta).c_str());
  return label + buf;
}

void Progress::draw_locked(bool force) {
  auto now = std::chrono::steady_clock::now();
  const auto min_gap = mode_ == Mode::bar ? std::chrono::duration<double>(0.1)
                                          : std::chrono::duration<double>(line_interval_s_);
  if (!force && now - last_draw_ < min_gap) return;
  last_draw_ = now;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  if (mode_ == Mode::lines && total_ <= 0) return;  // nothing to do (a resumed sweep with every row done)
  if (mode_ == Mode::bar)
    out_ << "\r" << render(label_, done_, total_, elapsed) << std::flush;
  else
    out_ << render(label_, done_, total_, elapsed) << "\n" << std::flush;
}

void Progress::set(double done) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  done_ = done;
  draw_locked(false);
}

void Progress::advance(double by) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  done_ += by;
  draw_locked(false);
}

void Progress::interrupt() {
  if (!enabled_ || mode_ == Mode::lines) return;  // lines never leave a partial line to clear
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  out_ << "\r\033[K" << std::flush;  // carriage return + erase to end of line (ANSI)
  last_draw_ = std::chrono::steady_clock::now() - std::chrono::seconds(1);
}

void Progress::finish() {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  done_ = total_;
  draw_locked(true);
  if (mode_ == Mode::bar) out_ << "\n" << std::flush;
  finished_ = true;
}

}  // namespace fabricsim::sim
