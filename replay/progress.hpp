#pragma once
// Progress with ETA for long simulations, sweeps and fits, on stderr unless the user asked for --quiet;
// stdout is never touched. On a terminal: a bar redrawn in place at most every 100 ms. Off a terminal (piped,
// a log file, CI): one full line (label, done/total, elapsed, ETA) every few seconds (line_interval_s, 5 s by
// default) and a last line at finish, so a long run piped to a file still shows it is alive. Thread-safe:
// sweep worker threads may call advance() concurrently.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>

namespace fabricsim::sim {

class Progress {
 public:
  // `total` units of work (events, points, simulated seconds...). `enabled` false draws nothing.
  Progress(std::string label, double total, bool enabled, std::ostream& out);
  // Line mode (no '\r', one line per update) with at most one line per `line_interval_s` of wall time.
  enum class Mode { bar, lines };
  Progress(std::string label, double total, bool enabled, std::ostream& out, Mode mode, double line_interval_s);
  // Convenience: enabled when !quiet; draws on std::cerr, as a bar on a TTY and as lines every 5 s otherwise.
  Progress(std::string label, double total, bool quiet);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void set(double done);      // absolute progress
  void advance(double by = 1);  // relative progress
  void finish();              // draws 100 % and ends the line (idempotent)
  // Clears the bar's line so the caller can print a message on stderr; the bar redraws on the next update.
  void interrupt();
  bool enabled() const { return enabled_; }

  static bool stderr_is_tty();
  // The line drawn for `done` of `total` after `elapsed_s` (without the leading '\r'); for tests.
  static std::string render(const std::string& label, double done, double total, double elapsed_s,
                            int width = 30);

 private:
  void draw_locked(bool force);
  std::string label_;
  double total_ = 0, done_ = 0;
  bool enabled_ = false, finished_ = false;
  Mode mode_ = Mode::bar;
  double line_interval_s_ = 5;
  std::ostream& out_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace fabricsim::sim
