// The generated tables of docs/validation.md (tests/doc_table_util.hpp): rendering, the stale-block diff, the
// rewrite, and that every block the doc has is one some test renders (names listed here by hand would drift, so
// the doc's blocks are checked for their markers only).
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/doc_table_util.hpp"

using namespace fabricsim;

TEST_CASE("doc tables: markdown rendering, signed percentages, stale-block diff and rewrite") {
  CHECK(test::signed_pct(0.0213) == "+2.1 %");
  CHECK(test::signed_pct(-0.0094) == "\u22120.9 %");
  CHECK(test::signed_pct(-0.0004) == "0.0 %");  // rounds to zero: no sign, so builds cannot disagree on it
  CHECK(test::signed_pct(0.284, 0) == "+28 %");
  test::DocTable t{"demo", {"row", "a|b", "error"}, {false, true, true}, {}};
  t.add({"x", "1", test::signed_pct(0.5)});
  CHECK(t.markdown() == "| row | a\\|b | error |\n|---|---:|---:|\n| x | 1 | +50.0 % |\n");
  const std::string doc = "intro\n\n<!-- generated: demo -->\n\n| row | a\\|b | error |\n|---|---:|---:|\n"
                          "| x | 2 | +50.0 % |\n\n<!-- /generated -->\n\ntail\n";
  const auto d = test::diff_doc_block(doc, t);
  REQUIRE(d.error.empty());
  CHECK_FALSE(d.current);
  CHECK(d.line == 3);
  CHECK(d.have == "| x | 2 | +50.0 % |");
  CHECK(d.want == "| x | 1 | +50.0 % |");
  const auto again = test::diff_doc_block(d.updated, t);
  CHECK(again.current);
  CHECK(d.updated.rfind("intro\n\n<!-- generated: demo -->\n", 0) == 0);
  CHECK(d.updated.find("<!-- /generated -->\n\ntail\n") != std::string::npos);
  CHECK(test::diff_doc_block("no markers", t).error.find("has no line") != std::string::npos);
  CHECK(test::diff_doc_block("<!-- generated: demo -->\n| x |\n", t).error.find("no `<!-- /generated -->`") !=
        std::string::npos);
  // A table the test prints as "a | b" lines.
  const auto p = test::table_from_pipes("p", "h1 | h2 | h3\nv1 | | v3\n", {false, true, true});
  REQUIRE(p.rows.size() == 1);
  CHECK(p.header == std::vector<std::string>{"h1", "h2", "h3"});
  CHECK(p.rows[0] == std::vector<std::string>{"v1", "", "v3"});
}

TEST_CASE("doc tables: every block of docs/validation.md is well formed") {
  std::ifstream in(test::docs_validation_path(), std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  int blocks = 0;
  for (auto at = doc.find("<!-- generated: "); at != std::string::npos; at = doc.find("<!-- generated: ", at + 1)) {
    ++blocks;
    const auto end = doc.find("<!-- /generated -->", at);
    const auto next = doc.find("<!-- generated: ", at + 1);
    REQUIRE(end != std::string::npos);
    CHECK_MESSAGE((next == std::string::npos || end < next), "a block of docs/validation.md is not closed before the next");
  }
  CHECK(blocks >= 20);
}
