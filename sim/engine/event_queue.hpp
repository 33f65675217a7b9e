#pragma once
// Discrete-event core: a priority queue of events ordered by (time, sequence number), so events at the
// same simulated time run in the order they were scheduled and runs are deterministic. No globals: every
// simulation owns its EventQueue and passes it explicitly.
//
// Two kinds of callbacks:
//  - typed targets (hot path): an object implementing EventTarget receives (queue, tag); the 64-bit tag is
//    the target's own encoding (e.g. an index and a kind), so no allocation per event;
//  - closures (convenience, e.g. for the trace replayer's compute ops): std::function<void()>, stored in a
//    recycled slot table.
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace fabricsim::sim {

class EventQueue;

class EventTarget {
 public:
  virtual void on_event(EventQueue& q, std::uint64_t tag) = 0;

 protected:
  ~EventTarget() = default;
};

class EventQueue {
 public:
  EventQueue() = default;
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  double now() const { return now_s_; }
  // Schedules `target->on_event(*this, tag)` at time t_s (seconds). t_s must be >= now() (throws
  // std::logic_error otherwise: an engine bug, not an input error).
  void schedule(double t_s, EventTarget* target, std::uint64_t tag);
  // Schedules a closure at time t_s.
  void schedule(double t_s, std::function<void()> fn);

  // Runs the earliest event; returns false when the queue is empty.
  bool step();
  // Runs until the queue is empty.
  void run();
  // Runs every event with time <= t_s, then sets now() to t_s (if t_s is later).
  void run_until(double t_s);

  bool empty() const { return heap_.empty(); }
  // Time of the earliest pending event, or +infinity when none is pending.
  double next_time_s() const { return heap_.empty() ? std::numeric_limits<double>::infinity() : heap_.front().t_s; }
  std::size_t pending() const { return heap_.size(); }
  std::size_t processed() const { return processed_; }

 private:
  struct Event {
    double t_s;
    std::uint64_t seq;
    EventTarget* target;  // nullptr: closure in fns_[tag]
    std::uint64_t tag;
  };
  static bool later(const Event& a, const Event& b) {
    return a.t_s > b.t_s || (a.t_s == b.t_s && a.seq > b.seq);
  }
  void push(Event e);
  Event pop();

  double now_s_ = 0;
  std::uint64_t next_seq_ = 0;
  std::size_t processed_ = 0;
  std::vector<Event> heap_;
  std::vector<std::function<void()>> fns_;
  std::vector<std::uint64_t> free_fns_;
};

}  // namespace fabricsim::sim
