// The SimGrid 3.32 oracle: runs a models::Schedule on SimGrid's CM02 flow model over a platform built from
// the same topology, so tests can check our max-min solver against an independent implementation.
//
// Platform (see /work/shared/docs/architecture.md, "The engine decision"):
//  - one flat NetZone (a NetZoneImpl subclass) holding every topology node as a host; routes are computed on
//    the fly in get_local_route() from topo::Routing (no Floyd/Dijkstra tables);
//  - one SimGrid link per link direction (full duplex), bandwidth = nominal * calibration bw_efficiency,
//    shared (max-min) policy;
//  - CM02 with crosstraffic off, TCP-gamma off (no window bound) and weight-S 0. CM02 gives every
//    communication a sharing penalty equal to its route latency (a TCP RTT artefact we do not model), so the
//    zone reports the same route latency (1 s) for every pair, making all penalties equal (plain max-min),
//    and a latency-factor callback restores the true latency: sum over the route's links of (link latency
//    + calibration per-hop latency). SimGrid pays a comm's latency before it takes a bandwidth share, as our
//    engine does.
//  - a transfer = its per-step delay (step_latency_s*steps, a timer of the actor that starts it), then
//    `weight` comms (weight must be an integer: a weighted flow stands for that many identical flows), each
//    capped at rate_cap_Bps by a private proxy link. Actors drive the dependency DAG (see DagState below).
// SimGrid's Engine is a process-wide singleton that cannot be re-created, so each run forks a child that
// builds the platform, runs, and sends the timings back over a pipe.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <queue>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <simgrid/kernel/resource/NetworkModelIntf.hpp>
#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include "sim/base/error.hpp"
#include "sim/engine/simgrid_backend.hpp"

namespace fabricsim::sim {

namespace {

namespace sg4 = simgrid::s4u;
namespace sgr = simgrid::kernel::routing;

constexpr double kReportedRouteLatency_s = 1.0;  // constant per route; the true one comes from the factor cb
constexpr double kDelayHostSpeed = 1e9;          // flop/s: delays are expressed in nanoseconds of work
constexpr double kUnboundedBps = 1e18;            // a proxy link that bounds nothing (1 EB/s)

class FlatZone final : public sgr::NetZoneImpl {
 public:
  FlatZone(const std::string& name, topo::Routing& routing) : NetZoneImpl(name), routing_(routing) {}
  void set_maps(std::unordered_map<const sgr::NetPoint*, topo::NodeId> node_of,
                std::vector<sg4::Link*> link_of_dir) {
    node_of_ = std::move(node_of);
    link_of_dir_ = std::move(link_of_dir);
  }
  // A proxy host stands for `node` behind a private link: a comm sent from it crosses that link first.
  void add_proxy(const sgr::NetPoint* proxy, topo::NodeId node, sg4::Link* private_link) {
    proxies_[proxy] = {node, private_link};
  }
  void get_local_route(const sgr::NetPoint* src, const sgr::NetPoint* dst, sgr::Route* into,
                       double* latency) override {
    auto s = node_of_.find(src);
    const auto d = node_of_.find(dst);
    if (const auto p = proxies_.find(src); p != proxies_.end()) {
      into->link_list_.push_back(p->second.second->get_impl());
      s = node_of_.find(host_netpoint_of(p->second.first));
    }
    if (s == node_of_.end() || d == node_of_.end()) throw std::logic_error("simgrid backend: unknown netpoint");
    for (topo::LinkDir dir : routing_.route(s->second, d->second))
      into->link_list_.push_back(link_of_dir_[dir]->get_impl());
    if (latency) *latency += kReportedRouteLatency_s;
  }

  const sgr::NetPoint* host_netpoint_of(topo::NodeId n) const { return netpoint_of_[n]; }
  void set_netpoints(std::vector<const sgr::NetPoint*> np) { netpoint_of_ = std::move(np); }

 private:
  topo::Routing& routing_;
  std::unordered_map<const sgr::NetPoint*, topo::NodeId> node_of_;
  std::vector<const sgr::NetPoint*> netpoint_of_;
  std::unordered_map<const sgr::NetPoint*, std::pair<topo::NodeId, sg4::Link*>> proxies_;
  std::vector<sg4::Link*> link_of_dir_;
};

struct ChildResult {
  std::vector<double> start, finish;
};

// The schedule's DAG is driven by actors, not by SimGrid activity dependencies: in 3.32 every host-to-host
// Comm (Comm::sendto_init) is detached, and each detached comm, when it finishes, is removed from maestro's
// single std::list of activities by a linear search (CommImpl::finish), so F concurrent comms cost O(F^2)
// (a 128-GPU step-level all_to_all, 16k comms, took 21 s; 512 GPUs would take hours). Mailbox comms sent by
// an actor are not detached: they live in their sender's list only. So:
//  - "driver" actors, each holding a chunk of one source node's initial transfers (those
//    without dependencies);
//    a driver starts a transfer's comms with Mailbox::put_async and waits for them with Comm::wait_any_for;
//  - when a transfer finishes, the driver that saw it finish releases its dependents; a dependent whose
//    last dependency this was is started by that same driver (at ready time + step delay, with a timeout on
//    the wait), so no cross-actor signalling is needed and every list stays as short as one driver's share;
//  - a comm's route is taken from its sender actor's host at start, so a driver first moves itself to the
//    transfer's source host (Actor::set_host; a rate-capped comm: to its proxy host, see below);
//  - every destination node has a mailbox whose permanent receiver is an idle actor on that node's
//    host: a comm to it starts at once (no matching receive needed), from the sender's host to that host.
// Timings: start = when the transfer became ready (its delay starts), finish = when its last comm finished.
struct Driver {
  std::vector<sg4::CommPtr> live;    // started, unfinished comms of this driver
  std::vector<std::uint32_t> owner;  // transfer of each live comm
  // pending starts: (date, transfer), earliest first, ties by transfer index (deterministic)
  std::priority_queue<std::pair<double, std::uint32_t>, std::vector<std::pair<double, std::uint32_t>>,
                      std::greater<>>
      due;
};

struct DagState {
  const models::Schedule* s = nullptr;
  std::vector<std::uint32_t> unfinished_deps;
  std::vector<std::vector<std::uint32_t>> dependents;
  std::vector<std::uint32_t> comms_left;
  std::vector<std::vector<sg4::Host*>> comm_src;  // per transfer, the sending host of each of its comms
  std::vector<sg4::Mailbox*> mailbox_of;          // per destination node
  std::vector<std::uint64_t> bytes;               // per transfer, bytes of each comm
  ChildResult r;
  std::size_t done = 0;
  char token = 0;  // the payload pointer every comm carries (no data is copied: no receive buffer)
  sg4::SemaphorePtr idle;        // receivers wait on it until the last driver is done
  std::size_t receivers = 0, drivers_left = 0;

  std::vector<double> delay;                      // per transfer, the actor's timer before its comms start
  double delay_of(std::uint32_t i) const { return delay[i]; }

  void finish(Driver& d, std::uint32_t i, double now) {
    r.finish[i] = now;
    ++done;
    for (std::uint32_t k : dependents[i])
      if (--unfinished_deps[k] == 0) {
        r.start[k] = now;
        d.due.emplace(now + delay_of(k), k);
      }
  }

  void launch(Driver& d, std::uint32_t i, double now) {
    if (comm_src[i].empty()) {  // a local transfer: only its delay
      finish(d, i, now);
      return;
    }
    sg4::Actor* self = sg4::Actor::self();
    comms_left[i] = static_cast<std::uint32_t>(comm_src[i].size());
    for (sg4::Host* h : comm_src[i]) {
      if (self->get_host() != h) self->set_host(h);
      d.live.push_back(mailbox_of[s->transfers[i].dst]->put_async(&token, bytes[i]));
      d.owner.push_back(i);
    }
  }

  void run_driver(Driver& d) {
    double fired = -1;  // date of the timer that just fired (its starts are due even if the clock reads
                        // one rounding below it)
    for (;;) {
      const double now = sg4::Engine::get_clock();
      const double limit = std::max(now, fired);
      while (!d.due.empty() && d.due.top().first <= limit) {
        const std::uint32_t i = d.due.top().second;
        d.due.pop();
        launch(d, i, now);
      }
      fired = -1;
      if (d.live.empty() && d.due.empty()) return;
      const double next = d.due.empty() ? -1.0 : d.due.top().first;
      if (d.live.empty()) {
        sg4::this_actor::sleep_until(next);
        fired = next;
        continue;
      }
      const ssize_t k = sg4::Comm::wait_any_for(d.live, next < 0 ? -1.0 : std::max(0.0, next - now));
      if (k < 0) {
        fired = next;
        continue;
      }
      const auto kk = static_cast<std::size_t>(k);
      const std::uint32_t i = d.owner[kk];
      d.live[kk] = d.live.back();
      d.live.pop_back();
      d.owner[kk] = d.owner.back();
      d.owner.pop_back();
      if (--comms_left[i] == 0) finish(d, i, sg4::Engine::get_clock());
    }
  }
};

ChildResult run_in_child(const models::Schedule& s, const topo::Topology& t, topo::Routing& routing,
                         const models::Calibration& calib) {
  std::string a0 = "fabricsim-simgrid";
  std::vector<std::string> args = {a0,
                                   "--cfg=network/model:CM02",
                                   "--cfg=network/crosstraffic:0",
                                   "--cfg=network/TCP-gamma:0",
                                   "--cfg=network/weight-S:0",
                                   // tighter than the defaults (1e-9 s for event dates and remains, 1e-5
                                   // relative in the max-min solver), which blur pipelined schedules
                                   "--cfg=surf/precision:1e-13",
                                   "--cfg=maxmin/precision:1e-11",
                                   // one actor per node: small stacks (KiB) keep thousands of them cheap
                                   "--cfg=contexts/stack-size:256",
                                   "--log=root.thres:critical"};
  if (const char* lg = std::getenv("FABRICSIM_SIMGRID_LOG")) args.back() = std::string("--log=") + lg;  // debugging
  std::vector<char*> argv;
  for (auto& x : args) argv.push_back(x.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  sg4::Engine e(&argc, argv.data());

  auto* zone = new FlatZone("fabric", routing);  // becomes the root zone; owned by SimGrid's engine
  sg4::NetZone* z = zone->get_iface();
  std::unordered_map<const sgr::NetPoint*, topo::NodeId> node_of;
  std::vector<sg4::Host*> host_of(t.num_nodes());
  std::vector<const sgr::NetPoint*> netpoint_of(t.num_nodes());
  for (topo::NodeId n = 0; n < t.num_nodes(); ++n) {
    host_of[n] = z->create_host(t.node(n).id, 1.0);
    netpoint_of[n] = host_of[n]->get_netpoint();
    node_of[netpoint_of[n]] = n;
  }
  zone->set_netpoints(netpoint_of);
  const std::size_t n = s.transfers.size();
  std::vector<sg4::Link*> link_of_dir(2 * t.num_links());
  std::unordered_map<const sg4::Link*, double> true_latency;
  for (topo::LinkId l = 0; l < t.num_links(); ++l) {
    const topo::Link& lk = t.link(l);
    const auto& kp = calib.of(lk.kind);
    for (int d = 0; d < 2; ++d) {
      std::string name = "l";
      name += std::to_string(l);
      name += d == 0 ? "d0" : "d1";
      sg4::Link* link = z->create_link(name, lk.bandwidth_Bps * kp.bw_efficiency);
      link->set_latency(0);
      link_of_dir[2 * l + d] = link;
      true_latency[link] = lk.latency_s + kp.latency_s;
    }
  }
  zone->set_maps(std::move(node_of), std::move(link_of_dir));

  DagState g;
  g.s = &s;
  g.unfinished_deps.assign(n, 0);
  g.dependents.resize(n);
  g.comms_left.assign(n, 0);
  g.comm_src.resize(n);
  g.bytes.assign(n, 0);
  g.mailbox_of.assign(t.num_nodes(), nullptr);
  g.r.start.assign(n, 0.0);
  g.r.finish.assign(n, -1.0);
  // Timer before a transfer's comms: its latency (models::transfer_latency_s) minus the route latency SimGrid
  // adds to each comm itself (the same links get_local_route gives).
  g.delay.assign(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const models::Transfer& tr = s.transfers[i];
    double route = 0;
    if (tr.latency_deferred) {  // its step latency only: its comms go from a zero-latency proxy (below)
      g.delay[i] = models::transfer_latency_s(tr, 0.0);
      continue;
    }
    if (tr.src != tr.dst && tr.latency_includes_route)  // otherwise the route cancels out
      for (topo::LinkDir dir : routing.route(tr.src, tr.dst)) {
        const topo::Link& lk = t.link(topo::Topology::link_of(dir));
        route += lk.latency_s + calib.of(lk.kind).latency_s;
      }
    g.delay[i] = models::transfer_latency_s(tr, route) - route;
  }
  // A comm's rate cap: the tuned TCP-gamma 0 turns CM02's per-comm bound off (min(rate, gamma/2lat) = 0 =
  // unbounded), so a capped comm is sent from a proxy host behind a private link of bandwidth = cap, which
  // bounds it exactly as a rate bound would.
  // A latency_deferred transfer (an LL / LL128 ring send, models/schedule.hpp) pays no route latency: its comms go
  // from a proxy too (an unbounded private link when it has no cap), and the latency-factor callback gives
  // comms from such a proxy none.
  std::size_t proxies = 0;
  std::unordered_set<const sg4::Host*> no_latency;
  std::vector<bool> is_dst(t.num_nodes(), false);
  for (std::size_t i = 0; i < n; ++i) {
    const models::Transfer& tr = s.transfers[i];
    for (std::uint32_t d : tr.deps) {
      ++g.unfinished_deps[i];
      g.dependents[d].push_back(static_cast<std::uint32_t>(i));
    }
    if (tr.src == tr.dst) continue;
    is_dst[tr.dst] = true;
    g.bytes[i] = static_cast<std::uint64_t>(std::llround(tr.bytes * tr.steps));
    const auto w = static_cast<std::uint64_t>(tr.weight);
    for (std::uint64_t k = 0; k < w; ++k) {
      sg4::Host* src = host_of[tr.src];
      if (tr.rate_cap_Bps > 0 || tr.latency_deferred) {
        const std::string name = "__fabricsim_proxy" + std::to_string(proxies++);
        src = z->create_host(name, 1.0);
        sg4::Link* priv = z->create_link(name + "_link", tr.rate_cap_Bps > 0 ? tr.rate_cap_Bps : kUnboundedBps);
        priv->set_latency(0);
        true_latency[priv] = 0;
        zone->add_proxy(src->get_netpoint(), tr.src, priv);
        if (tr.latency_deferred) no_latency.insert(src);
      }
      g.comm_src[i].push_back(src);
    }
  }
  z->seal();

  auto* model = z->get_network_model();
  model->set_lat_factor_cb([&true_latency, &no_latency](double, const sg4::Host* from, const sg4::Host*,
                                                        const std::vector<sg4::Link*>& links,
                                                        const std::unordered_set<sg4::NetZone*>&) {
    if (no_latency.count(from)) return 0.0;
    double lat = 0;
    for (const sg4::Link* l : links) lat += true_latency.at(l);
    return lat / kReportedRouteLatency_s;
  });
  model->set_bw_factor_cb([](double, const sg4::Host*, const sg4::Host*, const std::vector<sg4::Link*>&,
                             const std::unordered_set<sg4::NetZone*>&) { return 1.0; });

  // Drivers: the initial transfers of each source node, in chunks of 32 or more (each
  // completion costs its driver O(live comms) in SimGrid: wait_any re-registers on every one of them and
  // the finished comm leaves the actor's std::list by linear search).
  // At most kMaxDrivers actors: each one's stack takes two memory mappings (stack + guard page), and Linux's
  // default vm.max_map_count is 65536.
  constexpr std::size_t kMaxDrivers = 8192;
  std::size_t initial = 0;
  for (const auto& tr : s.transfers) initial += tr.deps.empty() ? 1 : 0;
  const std::size_t per_driver = std::max<std::size_t>(32, (initial + kMaxDrivers - 1) / kMaxDrivers);
  std::map<std::pair<topo::NodeId, std::size_t>, Driver> drivers;  // deterministic creation order
  std::vector<std::size_t> initial_of(t.num_nodes(), 0);
  for (std::size_t i = 0; i < n; ++i)
    if (s.transfers[i].deps.empty()) {
      const topo::NodeId src = s.transfers[i].src;
      Driver& d = drivers[{src, initial_of[src]++ / per_driver}];
      d.due.emplace(g.delay_of(static_cast<std::uint32_t>(i)), static_cast<std::uint32_t>(i));
    }
  // Receivers (created before the drivers; none without drivers: nothing would release them). A receiver
  // only waits on a semaphore that the last driver to finish releases once per receiver, so every actor
  // returns normally (no actor is killed at the end: killing unwinds the actor's stack by an exception,
  // which AddressSanitizer misreads on SimGrid's stacks).
  g.idle = sg4::Semaphore::create(0);
  for (topo::NodeId node = 0; node < t.num_nodes() && !drivers.empty(); ++node) {
    if (!is_dst[node]) continue;
    const std::string id = std::to_string(node);
    ++g.receivers;
    sg4::ActorPtr rx = sg4::Actor::create("rx" + id, host_of[node], [&g] { g.idle->acquire(); });
    g.mailbox_of[node] = sg4::Mailbox::by_name("__fabricsim_to" + id);
    g.mailbox_of[node]->set_receiver(rx);
  }
  g.drivers_left = drivers.size();
  for (auto& [key, d] : drivers) {
    Driver* dp = &d;
    sg4::Actor::create("drv" + std::to_string(key.first) + "." + std::to_string(key.second), host_of[key.first],
                       [&g, dp] {
                         g.run_driver(*dp);
                         if (--g.drivers_left == 0)
                           for (std::size_t k = 0; k < g.receivers; ++k) g.idle->release();
                       });
  }
  e.run();

  if (g.done != n) {
    for (std::size_t i = 0; i < n; ++i)
      if (g.r.finish[i] < 0)
        throw std::runtime_error("simgrid: transfer " + std::to_string(i) + " did not complete");
  }
  for (auto& m : g.mailbox_of)
    if (m) m->set_receiver(nullptr);
  return std::move(g.r);
}

bool write_all(int fd, const void* p, std::size_t len) {
  const char* c = static_cast<const char*>(p);
  while (len > 0) {
    const ssize_t k = ::write(fd, c, len);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    len -= static_cast<std::size_t>(k);
  }
  return true;
}

}  // namespace

ScheduleResult run_schedule_simgrid(const models::Schedule& s, const topo::Topology& t, topo::Routing& routing,
                                    const models::Calibration& calib, const RunOptions& opt) {
  const std::string where = "schedule " + s.op + "/" + s.algorithm;
  const std::size_t n = s.transfers.size();
  for (std::size_t i = 0; i < n; ++i) {
    const models::Transfer& tr = s.transfers[i];
    const std::string w = where + ": transfers[" + std::to_string(i) + "]";
    if (tr.src >= t.num_nodes() || tr.dst >= t.num_nodes()) throw InputError(w, "src/dst is not a topology node");
    if (!(tr.weight >= 1) || tr.weight != std::floor(tr.weight) || tr.weight > 1e6)
      throw InputError(w + ".weight", "the simgrid engine needs an integer weight >= 1 (it runs w flows)");
    if (!(tr.bytes >= 0) || tr.steps == 0 || !(tr.step_latency_s >= 0) || !(tr.rate_cap_Bps >= 0))
      throw InputError(w, "bytes, step_latency_s and rate_cap_Bps must be >= 0 and steps >= 1");
    for (std::uint32_t d : tr.deps)
      if (d >= n || d == i) throw InputError(w + ".deps", "dependency " + std::to_string(d) + " is not a transfer");
    if (tr.via != topo::kNoNode)
      throw InputError(w + ".via", "a hop relayed through a GPU (NCCL's PATH_NVB ring or tree hop) is not modelled by the "
                                   "simgrid engine; use --engine fabricsim");
    if (tr.src != tr.dst) routing.route(tr.src, tr.dst);  // unreachable pairs throw InputError here, not in the child
  }
  for (const auto& l : calib.link)
    if (!(l.bw_efficiency > 0)) throw InputError("calibration: bw_efficiency", "expected a number > 0");

  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("simgrid backend: pipe: ") + std::strerror(errno));
  std::fflush(nullptr);  // do not let the child inherit (and flush again) buffered output
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("simgrid backend: fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    // The parent's crash handlers (e.g. a test framework's) must not report the child's failures.
    std::signal(SIGABRT, SIG_DFL);
    std::signal(SIGSEGV, SIG_DFL);
    int status = 0;
    try {
      ChildResult r = run_in_child(s, t, routing, calib);
      const std::uint64_t count = n;
      const bool ok = write_all(fds[1], &count, sizeof count) &&
                      write_all(fds[1], r.start.data(), n * sizeof(double)) &&
                      write_all(fds[1], r.finish.data(), n * sizeof(double));
      status = ok ? 0 : 4;
    } catch (const std::exception& ex) {
      const std::string msg = ex.what();
      const std::uint64_t marker = ~std::uint64_t{0};
      write_all(fds[1], &marker, sizeof marker);
      write_all(fds[1], msg.data(), msg.size());
      status = 3;
    }
    ::close(fds[1]);
    ::_exit(status);
  }
  ::close(fds[1]);
  std::vector<char> buf;
  char chunk[65536];
  for (;;) {
    const ssize_t k = ::read(fds[0], chunk, sizeof chunk);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    buf.insert(buf.end(), chunk, chunk + k);
  }
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  std::uint64_t count = 0;
  if (buf.size() >= sizeof count) std::memcpy(&count, buf.data(), sizeof count);
  if (count == ~std::uint64_t{0})
    throw std::runtime_error("simgrid backend: " + std::string(buf.begin() + sizeof count, buf.end()));
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0 || count != n ||
      buf.size() != sizeof count + 2 * n * sizeof(double))
    throw std::runtime_error("simgrid backend: the SimGrid child process failed (status " +
                             std::to_string(wstatus) + ")");
  ScheduleResult res;
  res.transfers.resize(n);
  const char* p = buf.data() + sizeof count;
  double last = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::memcpy(&res.transfers[i].start_s, p + i * sizeof(double), sizeof(double));
    std::memcpy(&res.transfers[i].finish_s, p + (n + i) * sizeof(double), sizeof(double));
    last = std::max(last, res.transfers[i].finish_s);
  }
  res.makespan_s = s.fixed_latency_s + last;
  (void)opt;
  return res;
}

}  // namespace fabricsim::sim
