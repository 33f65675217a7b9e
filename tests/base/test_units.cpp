#include <doctest/doctest.h>

#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"
#include "sim/base/units.hpp"

using namespace fabricsim;

TEST_CASE("sizes accept nccl-tests suffixes") {
  CHECK(parse_size("8") == 8);
  CHECK(parse_size("1K") == 1024);
  CHECK(parse_size("64M") == 64ull << 20);
  CHECK(parse_size("8G") == 8ull << 30);
  CHECK(parse_size("2GiB") == 2ull << 30);
  CHECK(parse_size("4MB") == 4000000);
  CHECK_THROWS_AS(parse_size("abc"), InputError);
  CHECK_THROWS_AS(parse_size("-1"), InputError);
  CHECK_THROWS_AS(parse_size("3X"), InputError);
  CHECK_THROWS_AS(parse_size("0.5"), InputError);
}

TEST_CASE("bandwidths distinguish bits and bytes") {
  CHECK(parse_bandwidth("400Gbps") == doctest::Approx(50e9));
  CHECK(parse_bandwidth("200Gb/s") == doctest::Approx(25e9));
  CHECK(parse_bandwidth("25GB/s") == doctest::Approx(25e9));
  CHECK(parse_bandwidth("25GBps") == doctest::Approx(25e9));
  CHECK(parse_bandwidth("1GiB/s") == doctest::Approx(1073741824.0));
  CHECK(parse_bandwidth("1000") == doctest::Approx(1000.0));
  CHECK_THROWS_AS(parse_bandwidth("0Gbps"), InputError);
  CHECK_THROWS_AS(parse_bandwidth("-5GB/s"), InputError);
  CHECK_THROWS_AS(parse_bandwidth("5 furlongs"), InputError);
}

TEST_CASE("times") {
  CHECK(parse_time("1.5us") == doctest::Approx(1.5e-6));
  CHECK(parse_time("700ns") == doctest::Approx(7e-7));
  CHECK(parse_time("2ms") == doctest::Approx(2e-3));
  CHECK(parse_time("3") == doctest::Approx(3.0));
  CHECK_THROWS_AS(parse_time("-1us"), InputError);
}

TEST_CASE("strict JSON object reader names file, path and expectation") {
  Json j = Json::parse(R"({"a": 1, "b": "x", "bw": "400Gbps", "extra": true})");
  ObjectReader r(j, {"f.json", "/root"});
  CHECK(r.integer("a") == 1);
  CHECK(r.string("b") == "x");
  CHECK(r.bandwidth("bw") == doctest::Approx(50e9));
  try {
    r.finish();
    FAIL("unknown key accepted");
  } catch (const InputError& e) {
    std::string m = e.what();
    CHECK(m.find("f.json: /root/extra") != std::string::npos);
    CHECK(m.find("unknown key") != std::string::npos);
  }
  ObjectReader r2(j, {"f.json", ""});
  try {
    r2.number("missing");
    FAIL("missing key accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("f.json: /missing") != std::string::npos);
  }
  CHECK_THROWS_AS(parse_json_text("{\"a\": }", "bad.json"), InputError);
  try {
    parse_json_text("{\n\"a\": }", "bad.json");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("bad.json:2:") != std::string::npos);
  }
}
