// libFuzzer entry point for one parser (docs/reliability.md "libFuzzer"). Built once per target by
// fuzz/CMakeLists.txt with FABRICSIM_FUZZ_<NAME> defined; the same entry points as the deterministic driver
// in tests/apps/test_fuzz.cpp. Any input must parse or raise an InputError whose message is one line under
// 2,000 characters; anything else (another exception, a sanitizer report, a crash) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>

#include "models/calibration.hpp"
#include "replay/outputs_sweep.hpp"
#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"
#include "topologies/io.hpp"
#include "validate/nccl_log.hpp"
#include "workloads/chakra.hpp"
#include "workloads/importers.hpp"
#include "workloads/scenario.hpp"
#include "workloads/trace.hpp"

namespace {

void run(const std::string& s) {
  using namespace fabricsim;
#if defined(FABRICSIM_FUZZ_TOPOLOGY)
  topo::topology_from_json(parse_json_text(s, "topo.json"), "topo.json");
#elif defined(FABRICSIM_FUZZ_SCENARIO)
  workloads::scenario_from_json(parse_json_text(s, "scenario.json"), "scenario.json");
#elif defined(FABRICSIM_FUZZ_CALIBRATION)
  models::calibration_from_json(parse_json_text(s, "cal.json"), "cal.json");
#elif defined(FABRICSIM_FUZZ_SWEEP)
  sim::parse_sweep(parse_json_text(s, "sweep.json"), "sweep.json");
#elif defined(FABRICSIM_FUZZ_TRACE)
  workloads::trace_from_json(parse_json_text(s, "trace.json"), "trace.json");
#elif defined(FABRICSIM_FUZZ_NCCL_TESTS)
  // As validate::load_measurements tells them apart: a busbw-only markdown table, or an nccl-tests log.
  if (s.find("| Message Size") != std::string::npos && s.find("# nThread") == std::string::npos &&
      s.find("(elements)") == std::string::npos)
    validate::parse_busbw_markdown(s, "table.md", {});
  else
    validate::parse_nccl_tests_text(s, "log.txt", {});
#elif defined(FABRICSIM_FUZZ_ASTRA)
  workloads::import_astra_text(s, "astra.txt", {{"npus", "32"}, {"cycle_ns", "1"}}, "astra");
#elif defined(FABRICSIM_FUZZ_CHAKRA)
  // One rank file (JSON, jsonizer output or protobuf .et, told apart by content as for real files), handed
  // over in memory as the file chakra.0.et.
  workloads::ChakraOptions o;
  o.quiet = true;
  workloads::import_chakra_buffers({{"chakra.0.et", s}}, "chakra", o);
#else
#error "define one FABRICSIM_FUZZ_<TARGET>"
#endif
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string s(reinterpret_cast<const char*>(data), size);
  try {
    run(s);
  } catch (const fabricsim::InputError& e) {
    const std::string msg = e.what();
    if (msg.size() > 2000 || msg.find('\n') != std::string::npos) {
      std::fprintf(stderr, "InputError message of %zu characters or with a newline: %.300s\n", msg.size(), msg.c_str());
      std::abort();
    }
  }
  // Any other exception escapes: libFuzzer reports it as a crash with the input.
  return 0;
}
