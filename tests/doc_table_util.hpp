// Per-row tables of docs/validation.md rendered by the validation test that computes them, and checked:
// a table sits between the lines `<!-- generated: NAME -->` and `<!-- /generated -->` (invisible in the
// rendered markdown); the test renders its rows as markdown and fails, in one line naming the table, the first
// differing row and the refresh command, when the doc's block differs. With FABRICSIM_UPDATE_DOCS=1 in the
// environment the test rewrites the block in place instead (scripts/refresh-validation-docs.sh runs them all).
// The doc is found the way the tests find tests/data: relative to FABRICSIM_SOURCE_DIR.
// Figures are printed with few enough digits that Release and sanitizer builds agree.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fabricsim::test {

inline std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

// A fraction as a signed percentage the way the docs write it: "+2.1 %", "−0.9 %" (U+2212), "0.0 %".
inline std::string signed_pct(double frac, int digits = 1) {
  const double scale = std::pow(10.0, digits);
  const double r = std::round(100.0 * frac * scale) / scale;
  if (r == 0.0) return fmt("%.*f %%", digits, 0.0);
  return (r > 0 ? "+" : "\u2212") + fmt("%.*f %%", digits, std::abs(r));
}

struct DocTable {
  std::string name;                  // the NAME of `<!-- generated: NAME -->`
  std::vector<std::string> header;   // column titles
  std::vector<bool> right;           // right-aligned columns (numbers); shorter than header = left
  std::vector<std::vector<std::string>> rows;

  void add(std::vector<std::string> row) { rows.push_back(std::move(row)); }

  static std::string escape(const std::string& cell) {
    std::string out;
    for (char ch : cell) {
      if (ch == '|') out += '\\';
      out += ch;
    }
    return out;
  }

  std::string markdown() const {
    std::string out;
    auto line = [&out](const std::vector<std::string>& cells) {
      out.push_back('|');
      for (const auto& c : cells) out.append(" ").append(escape(c)).append(" |");
      out.push_back('\n');
    };
    line(header);
    out.push_back('|');
    for (std::size_t i = 0; i < header.size(); ++i) out.append(i < right.size() && right[i] ? "---:|" : "---|");
    out.push_back('\n');
    for (const auto& r : rows) line(r);
    return out;
  }
};

// A table the test already prints as "a | b | c" lines (the first line its header) as a DocTable.
inline DocTable table_from_pipes(const std::string& name, const std::string& text, std::vector<bool> right) {
  DocTable t{name, {}, std::move(right), {}};
  std::istringstream in(text);
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::size_t at = 0;
    while (true) {
      const auto bar = line.find('|', at);
      std::string c = line.substr(at, bar == std::string::npos ? std::string::npos : bar - at);
      const auto b = c.find_first_not_of(' '), e = c.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : c.substr(b, e - b + 1));
      if (bar == std::string::npos) break;
      at = bar + 1;
    }
    if (first) t.header = cells, first = false;
    else t.rows.push_back(cells);
  }
  return t;
}

inline std::string docs_validation_path() { return std::string(FABRICSIM_SOURCE_DIR) + "/docs/validation.md"; }

inline bool update_docs_requested() {
  const char* e = std::getenv("FABRICSIM_UPDATE_DOCS");
  return e != nullptr && std::string(e) == "1";
}

// The block NAME of a document's text against the table: error (no block, two blocks, no end marker), or
// whether it is current; if not, the first differing line of the block (0-based: 0 is the blank line after the
// begin marker) and the text with the block replaced.
struct DocBlockDiff {
  std::string error;
  bool current = false;
  int line = 0;
  std::string have, want;  // the first differing lines
  std::string updated;     // the whole text with the block rewritten
};

inline DocBlockDiff diff_doc_block(const std::string& doc, const DocTable& t) {
  DocBlockDiff d;
  const std::string begin = "<!-- generated: " + t.name + " -->\n";
  const std::string end = "<!-- /generated -->";
  const auto b = doc.find(begin);
  if (b == std::string::npos) return d.error = "has no line `<!-- generated: " + t.name + " -->`", d;
  if (doc.find(begin, b + 1) != std::string::npos) return d.error = "has two blocks " + t.name, d;
  const auto body = b + begin.size();
  const auto e = doc.find(end, body);
  if (e == std::string::npos) return d.error = "block " + t.name + " has no `" + end + "` line", d;
  const std::string want = "\n" + t.markdown() + "\n";
  const std::string have = doc.substr(body, e - body);
  if (have == want) return d.current = true, d;
  d.updated = doc;
  d.updated.replace(body, e - body, want);
  std::istringstream hs(have), ws(want);
  std::string hl, wl;
  while (true) {
    const bool hok = static_cast<bool>(std::getline(hs, hl)), wok = static_cast<bool>(std::getline(ws, wl));
    if (!hok) hl = "(end of table)";
    if (!wok) wl = "(end of table)";
    if (hl != wl || (!hok && !wok)) break;
    ++d.line;
  }
  d.have = hl, d.want = wl;
  return d;
}

// Compares (or, with FABRICSIM_UPDATE_DOCS=1, rewrites) the block NAME of docs/validation.md. refresh is the
// command that regenerates this one table (shown in the failure).
inline void check_doc_table(const DocTable& t, const std::string& refresh) {
  const std::string path = docs_validation_path();
  std::string doc;
  {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot read " << path);
    std::ostringstream ss;
    ss << in.rdbuf();
    doc = ss.str();
  }
  const DocBlockDiff d = diff_doc_block(doc, t);
  REQUIRE_MESSAGE(d.error.empty(), "docs/validation.md " << d.error);
  if (d.current) return;
  if (update_docs_requested()) {
    const std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary);
      REQUIRE_MESSAGE(out.good(), "cannot write " << tmp);
      out << d.updated;
    }
    REQUIRE(std::rename(tmp.c_str(), path.c_str()) == 0);
    MESSAGE("docs/validation.md: table " << t.name << " rewritten");
    return;
  }
  FAIL_CHECK("docs/validation.md table " << t.name << " is stale at line " << d.line << " of its block: doc has `"
                                         << d.have << "`, the test computes `" << d.want
                                         << "`; refresh: FABRICSIM_UPDATE_DOCS=1 " << refresh
                                         << " (all tables: scripts/refresh-validation-docs.sh)");
}

}  // namespace fabricsim::test
