// The JSON input layer's limits (issue 24): nesting depth, numbers out of double range, duplicate keys,
// truncated values in messages, physical ranges of unit fields, integer ranges before narrowing, and
// atomic output files with a clear error when they cannot be written.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"
#include "sim/base/units.hpp"

using namespace fabricsim;
namespace fs = std::filesystem;

namespace {
// The message of the InputError `f` throws ("" if none; a test then fails on the expected text).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
std::string nested(std::size_t depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }
}  // namespace

TEST_CASE("JSON nesting deeper than the limit is an InputError naming the file and path, not a stack overflow") {
  // Issue 24: 100,000-deep arrays in a topology latency, calibration value, scenario section or sweep point
  // crashed later walks (copy, dump, destruction). Now the parser refuses them before any DOM exists.
  const std::string doc = R"({"links": [{"latency": )" + nested(100000) + "}]}";
  const std::string m = error_of([&] { parse_json_text(doc, "topo.json"); });
  CHECK(m.find("topo.json: /links/0/latency") == 0);
  CHECK(m.find("nesting deeper than 64") != std::string::npos);
  CHECK(m.size() < 400);  // the path is cut, not 100,000 levels long
  // Objects count too; the limit itself is accepted.
  std::string objs;
  for (int i = 0; i < 70; ++i) objs += "{\"a\":";
  objs += "1" + std::string(70, '}');
  CHECK(error_of([&] { parse_json_text(objs, "s.json"); }).find("s.json: /a/a/a") == 0);
  CHECK_NOTHROW(parse_json_text(nested(kMaxJsonDepth), "ok.json"));
  CHECK_THROWS_AS(parse_json_text(nested(kMaxJsonDepth + 1), "deep.json"), InputError);
}

TEST_CASE("numbers beyond double range are InputErrors with line:column, never json.exception") {
  for (const char* v : {"1e400", "-1e999"}) {
    const std::string m = error_of([&] { parse_json_text(std::string("{\n  \"bandwidth\": ") + v + "\n}", "t.json"); });
    CHECK_MESSAGE(m.find("t.json:2:") == 0, m);
    CHECK(m.find("out of range") != std::string::npos);
    CHECK(m.find("json.exception") == std::string::npos);
  }
  // Integers beyond 64 bits are doubles (finite): accepted by the parser, refused by integer fields.
  Json j = parse_json_text(R"({"n": 18446744073709551616, "u": 9223372036854775808})", "i.json");
  ObjectReader r(j, JsonPath{"i.json", ""});
  CHECK(error_of([&] { r.integer("n"); }).find("i.json: /n: expected an integer") == 0);
  CHECK(error_of([&] { r.integer("u"); }).find("below 2^63") != std::string::npos);
}

TEST_CASE("a key repeated in one object is refused (a second \"kind\" must not turn a switch into a GPU)") {
  const std::string doc = R"({"nodes": [{"id": "sw0", "kind": "nvswitch", "kind": "gpu"}]})";
  const std::string m = error_of([&] { parse_json_text(doc, "topo.json"); });
  CHECK_MESSAGE(m.find("topo.json: /nodes/0/kind") == 0, m);
  CHECK(m.find("duplicate key 'kind'") != std::string::npos);
  // The same key in sibling objects is fine.
  CHECK_NOTHROW(parse_json_text(R"([{"kind": 1}, {"kind": 2}])", "ok.json"));
}

TEST_CASE("syntax errors name file:line:column; oversized files are refused before reading") {
  CHECK(error_of([] { parse_json_text("{\n\"a\": [1,,2]}", "x.json"); }).find("x.json:2:") == 0);
  const fs::path d = fs::temp_directory_path() / ("fabricsim_limits_" + std::to_string(::getpid()));
  fs::create_directories(d);
  {
    std::ofstream f(d / "big.json", std::ios::binary);
    f.seekp(static_cast<std::streamoff>(kMaxJsonBytes) + 10);
    f << ' ';
  }  // a sparse file: no disk space used
  const std::string m = error_of([&] { load_json_file((d / "big.json").string()); });
  CHECK(m.find("inputs are limited to") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("error messages show a short excerpt of the offending value, never the whole value") {
  const std::string huge(1 << 20, 'x');
  Json j = Json::object({{"bandwidth", huge}, {"arr", Json::array({1, 2, 3})}, {"latency", true}});
  ObjectReader r(j, JsonPath{"t.json", ""});
  const std::string m = error_of([&] { r.bandwidth("bandwidth"); });
  CHECK(m.find("t.json: /bandwidth") == 0);
  CHECK(m.size() < 400);
  CHECK(m.find("xxx...\"") != std::string::npos);
  CHECK(json_excerpt(j["arr"]) == "an array of 3 elements");
  CHECK(error_of([&] { r.time("latency"); }).find("found true") != std::string::npos);
  CHECK(error_of([&] { parse_size(huge, "size"); }).size() < 300);
}

TEST_CASE("unit fields hold physical ranges: 1e-300 B/s, 1e300 s and 2^70 bytes are refused") {
  Json j = parse_json_text(R"({"bw": 1e-300, "bw2": "1e-300B/s", "bw3": "1e300TB/s", "t": 1e300, "t2": "1e30s",
                              "s": "2000000T", "s2": "1e30G", "s3": 1180591620717411303424, "ok_bw": "400Gbps", "ok_t": "1.5us"})",
                           "u.json");
  ObjectReader r(j, JsonPath{"u.json", ""});
  CHECK(error_of([&] { r.bandwidth("bw"); }).find("u.json: /bw: expected a bandwidth between") == 0);
  CHECK_THROWS_AS(r.bandwidth("bw2"), InputError);
  CHECK_THROWS_AS(r.bandwidth("bw3"), InputError);
  CHECK(error_of([&] { r.time("t"); }).find("u.json: /t: expected a time between 0 and 1e9 s") == 0);
  CHECK_THROWS_AS(r.time("t2"), InputError);
  CHECK(error_of([&] { r.size("s"); }).find("at most 2^60") != std::string::npos);
  CHECK_THROWS_AS(r.size("s2"), InputError);  // 1e39 bytes: refused before the cast to 64 bits
  CHECK_THROWS_AS(r.size("s3"), InputError);
  CHECK(r.bandwidth("ok_bw") == doctest::Approx(50e9));
  CHECK(r.time("ok_t") == doctest::Approx(1.5e-6));
  CHECK_THROWS_AS(parse_size("1e30G"), InputError);
  CHECK_THROWS_AS(parse_size("1e25"), InputError);
  CHECK_THROWS_AS(parse_bandwidth("1e308TB/s"), InputError);  // overflows to inf
}

TEST_CASE("integer_in checks the range before the caller narrows") {
  Json j = parse_json_text(R"({"npus": 4294967304, "ok": 8})", "a.json");
  ObjectReader r(j, JsonPath{"a.json", ""});
  CHECK(error_of([&] { r.integer_in("npus", 1, 1 << 20); })
            .find("a.json: /npus: expected an integer in [1, 1048576], found 4294967304") == 0);
  CHECK(r.integer_in("ok", 1, 16) == 8);
  CHECK(r.integer_in_or("absent", 0, 5, 3) == 3);
}

TEST_CASE("write_file_atomic: replaces whole files and reports why a write failed") {
  const fs::path d = fs::temp_directory_path() / ("fabricsim_atomic_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string p = (d / "out.csv").string();
  write_file_atomic(p, "old\n");
  write_file_atomic(p, "new contents\n");
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  CHECK(s.str() == "new contents\n");
  CHECK(!fs::exists(p + ".tmp"));
  // A missing directory: one line with the reason.
  const std::string m = error_of([&] { write_file_atomic((d / "no/such/dir.csv").string(), "x"); });
  CHECK(m.find("cannot write output (create temporary file: No such file or directory)") != std::string::npos);
  // A full disk (Linux /dev/full refuses every write with ENOSPC) through the same write path: the
  // temporary file is a symlink to it, so the write, not the open, fails.
  if (fs::exists("/dev/full")) {
    fs::create_symlink("/dev/full", d / "full.csv.tmp");
    const std::string e = error_of([&] { write_file_atomic((d / "full.csv").string(), std::string(1 << 16, 'x')); });
    CHECK_MESSAGE(e.find("No space left on device") != std::string::npos, e);
    CHECK(!fs::exists(d / "full.csv"));  // no partial output appeared
  }
  fs::remove_all(d);
}

// Found by fuzzing (2026-11-29): an output path that named a device or a symbolic link was replaced by a regular
// file (the temporary file renamed over it); as root, `--json /dev/null` replaced /dev/null.
TEST_CASE("write_file_atomic writes into a pipe or device in place and follows a symbolic link") {
  const fs::path dir = fs::temp_directory_path() / ("fabricsim_atomic_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // A FIFO stands in for a device (mkfifo needs no privilege); its reader is open before the write, non-blocking,
  // so the write neither waits nor, if the FIFO were replaced, would the test hang.
  const fs::path fifo = dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(rd >= 0);
  write_file_atomic(fifo.string(), "abc");
  char buf[8] = {};
  const ssize_t n = ::read(rd, buf, sizeof buf);
  ::close(rd);
  CHECK(n == 3);
  CHECK(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0) == "abc");
  CHECK(fs::is_fifo(fifo));
  CHECK(!fs::exists(dir / "pipe.tmp"));
  // A link to a file: the file gets the new contents, the link stays a link.
  std::ofstream(dir / "real.csv") << "old\n";
  fs::create_symlink(dir / "real.csv", dir / "link.csv");
  write_file_atomic((dir / "link.csv").string(), "new\n");
  CHECK(fs::is_symlink(dir / "link.csv"));
  std::ifstream in(dir / "real.csv");
  std::string line;
  std::getline(in, line);
  CHECK(line == "new");
  fs::remove_all(dir);
}
