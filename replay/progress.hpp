#pragma once
// A progress bar with ETA for long simulations and sweeps. It draws on stderr only when stderr is a
// terminal and the user did not ask for --quiet; stdout is never touched. Thread-safe: sweep worker threads
// may call advance() concurrently. Redraws at most every 100 ms of wall time.
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
  // Convenience: enabled when !quiet and stderr is a TTY; draws on std::cerr.
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
  std::ostream& out_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace fabricsim::sim
