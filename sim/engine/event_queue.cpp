#include "sim/engine/event_queue.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace fabricsim::sim {

void EventQueue::push(Event e) {
  heap_.push_back(e);
  std::push_heap(heap_.begin(), heap_.end(), later);
}

EventQueue::Event EventQueue::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), later);
  Event e = heap_.back();
  heap_.pop_back();
  return e;
}

void EventQueue::schedule(double t_s, EventTarget* target, std::uint64_t tag) {
  if (!(t_s >= now_s_))
    throw std::logic_error("EventQueue: event scheduled in the past (t=" + std::to_string(t_s) +
                           " s < now=" + std::to_string(now_s_) + " s)");
  if (target == nullptr) throw std::logic_error("EventQueue: null event target");
  push(Event{t_s, next_seq_++, target, tag});
}

void EventQueue::schedule(double t_s, std::function<void()> fn) {
  if (!(t_s >= now_s_))
    throw std::logic_error("EventQueue: event scheduled in the past (t=" + std::to_string(t_s) +
                           " s < now=" + std::to_string(now_s_) + " s)");
  std::uint64_t slot;
  if (!free_fns_.empty()) {
    slot = free_fns_.back();
    free_fns_.pop_back();
    fns_[slot] = std::move(fn);
  } else {
    slot = fns_.size();
    fns_.push_back(std::move(fn));
  }
  push(Event{t_s, next_seq_++, nullptr, slot});
}

bool EventQueue::step() {
  if (heap_.empty()) return false;
  Event e = pop();
  now_s_ = e.t_s;
  ++processed_;
  if (e.target) {
    e.target->on_event(*this, e.tag);
  } else {
    std::function<void()> fn = std::move(fns_[e.tag]);
    fns_[e.tag] = nullptr;
    free_fns_.push_back(e.tag);
    fn();
  }
  return true;
}

void EventQueue::run() {
  while (step()) {
  }
}

void EventQueue::run_until(double t_s) {
  while (!heap_.empty() && heap_.front().t_s <= t_s) step();
  if (t_s > now_s_) now_s_ = t_s;
}

}  // namespace fabricsim::sim
