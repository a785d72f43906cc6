// docs/guarantees.md's memory rows against the types they describe: each byte figure in the
// "limit" column of the rows "memory per (thread, name)" and "memory per thread" is computed here
// from sizeof of the real types, and the page must print exactly those figures, in that order. A
// change of layout that leaves the page behind (or an edit of the page that the layout does not
// back) fails this test.
//
// And docs/configuration.md's table of variables against the code's table (detail/env_vars.hpp),
// with the rule that keeps the table whole: no header, and no module of the Python package, reads
// a LAPTIME_* variable but through it.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "laptime/detail/env_vars.hpp"  // the table of variables
#include "laptime/laptime.hpp"
#include "test_support.hpp"

#ifndef LAPTIME_DOCS_DIR
#error "LAPTIME_DOCS_DIR (tests/CMakeLists.txt) must name the repository's docs/ folder"
#endif

namespace {
std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}
}  // namespace

#if LAPTIME_ENABLED
namespace {

/// The table row of `page` whose first cell is `first_cell`, split into its cells (trimmed).
std::vector<std::string> row_cells(const std::string& page, const std::string& first_cell) {
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| " + first_cell + " |", 0) != 0) continue;
    std::vector<std::string> cells;
    std::size_t from = 1;
    for (std::size_t bar; (bar = line.find('|', from)) != std::string::npos; from = bar + 1) {
      std::string cell = line.substr(from, bar - from);
      const auto first = cell.find_first_not_of(' ');
      const auto last = cell.find_last_not_of(' ');
      cells.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
    }
    return cells;
  }
  return {};
}

/// Every byte figure in `text` ("7,680 B", "120 B"), in order, commas dropped.
/// (Scanned by hand, not with <regex>: GCC 12 warns inside it under the sanitizers' -O1.)
std::vector<std::size_t> byte_figures(const std::string& text) {
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  const auto letter = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); };
  std::vector<std::size_t> out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (!digit(text[i]) || (i > 0 && (digit(text[i - 1]) || text[i - 1] == ','))) {
      ++i;
      continue;
    }
    // A number: digits, with thousands separated by commas ("33,472").
    std::string digits;
    std::size_t j = i;
    while (j < text.size() &&
           (digit(text[j]) || (text[j] == ',' && j + 3 < text.size() && digit(text[j + 1]) &&
                               digit(text[j + 2]) && digit(text[j + 3])))) {
      if (text[j] != ',') digits += text[j];
      ++j;
    }
    // followed by " B" and no letter after it ("360 B", not "360 Bytes" or "4 Bn").
    if (text.compare(j, 2, " B") == 0 && (j + 2 >= text.size() || !letter(text[j + 2]))) {
      out.push_back(static_cast<std::size_t>(std::stoull(digits)));
    }
    i = j;
  }
  return out;
}

/// "360 B, 256 B": what a failed check prints.
std::string joined(const std::vector<std::size_t>& figures) {
  std::string out;
  for (const std::size_t f : figures) out += (out.empty() ? "" : ", ") + std::to_string(f) + " B";
  return out;
}

/// "1,024" for 1024: how the page prints a count.
std::string with_commas(std::size_t n) {
  std::string digits = std::to_string(n);
  for (int at = static_cast<int>(digits.size()) - 3; at > 0; at -= 3) {
    digits.insert(static_cast<std::size_t>(at), ",");
  }
  return digits;
}

const std::string kGuarantees = std::string(LAPTIME_DOCS_DIR) + "/guarantees.md";

}  // namespace
#endif

TEST_CASE("guarantees.md prints the memory per (thread, name) and per thread that sizeof gives" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  namespace d = laptime::detail;
  // The page states the figures of the default capacity (the record holds a chunk pointer per 64
  // names of LAPTIME_MAX_NAMES).
  REQUIRE(LAPTIME_MAX_NAMES == 4096);
  const std::string page = read_file(kGuarantees);
  REQUIRE_MESSAGE(!page.empty(), "cannot read " << kGuarantees);

  const std::size_t block = d::Histogram::kStorageBytes / d::Histogram::kBlocks;
  const std::size_t cache_entries = d::NameCache<d::Slot*>::kSets * d::NameCache<d::Slot*>::kWays;
  SUBCASE("memory per (thread, name): histogram table, block, slot, chunk of slots") {
    const auto cells = row_cells(page, "memory per (thread, name)");
    REQUIRE_MESSAGE(cells.size() >= 2, "no row 'memory per (thread, name)' in " << kGuarantees);
    CAPTURE(cells[1]);
    const std::vector<std::size_t> expected = {sizeof(d::Histogram), block, sizeof(d::Slot),
                                               sizeof(d::SlotChunk)};
    CHECK(joined(byte_figures(cells[1])) == joined(expected));
    CHECK(cells[1].find("slots come " + std::to_string(d::kChunk) + " to a") != std::string::npos);
  }
  SUBCASE("memory per thread: the record, its name cache, its chunk pointers") {
    const auto cells = row_cells(page, "memory per thread");
    REQUIRE_MESSAGE(cells.size() >= 2, "no row 'memory per thread' in " << kGuarantees);
    CAPTURE(cells[1]);
    const std::vector<std::size_t> expected = {
        sizeof(d::ThreadRecord), sizeof(d::NameCache<d::Slot*>), sizeof(d::ThreadRecord::chunks)};
    CHECK(joined(byte_figures(cells[1])) == joined(expected));
    CHECK(cells[1].find(with_commas(cache_entries) + " entries") != std::string::npos);
  }
#endif
}

// ---- docs/configuration.md's table of variables, and the code that reads them ------------------

namespace {
namespace lt = laptime::detail;

// The table's type, as docs/configuration.md writes it.
std::string type_text(const lt::EnvVar& v) {
  const std::string lo = std::to_string(v.lowest), hi = std::to_string(v.highest);
  switch (v.type) {
    case lt::EnvType::Flag:
      return "bool";
    case lt::EnvType::Int:
      return v.highest == INT_MAX ? "int ≥ " + lo : "int " + lo + " … " + hi;
    case lt::EnvType::Rate:
      return "number " + lo + " … " + hi;
    case lt::EnvType::Choice: {
      std::string out = "`";
      for (const char* c = v.values; *c != '\0'; ++c)
        out += *c == '|' ? std::string("`, `") : std::string(1, *c);
      return out + "`" + (v.any_case ? " (any case)" : "");
    }
    case lt::EnvType::Text:
      return "text";
    case lt::EnvType::Names:
      return "names, comma-separated, at most " + hi;
    case lt::EnvType::BoolOrNames:
      return "bool, or at most " + hi + " names";
    case lt::EnvType::Path:
      return "path";
    case lt::EnvType::SetByLaptime:
      return "set by laptime";
  }
  return "?";
}

// The start of the table's row for `v` in docs/configuration.md: name, type, default, when read.
std::string doc_row(const lt::EnvVar& v) {
  return "| `" + std::string(v.name) + "` | " + type_text(v) + " | " + v.default_text + " | " +
         v.read_at + " | ";
}
}  // namespace

TEST_CASE("docs/configuration.md's table of variables is the code's table") {
  const std::string doc = read_file(std::string(LAPTIME_DOCS_DIR) + "/configuration.md");
  const std::string header = "| variable | type | default | read | meaning |";
  const auto at = doc.find(header);
  REQUIRE(at != std::string::npos);
  // The table's rows: from the header to the first line that is not a row.
  std::vector<std::string> rows;
  std::istringstream lines(doc.substr(at));
  std::string line;
  std::getline(lines, line);  // the header
  std::getline(lines, line);  // |---|
  while (std::getline(lines, line) && line.rfind("| ", 0) == 0) rows.push_back(line);
  // One row per variable, in the table's order; the meaning column is the page's own.
  REQUIRE(rows.size() == std::size(lt::kEnvVars));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string expected = doc_row(lt::kEnvVars[i]);
    CHECK_MESSAGE(rows[i].rfind(expected, 0) == 0,
                  "docs/configuration.md's row " << i + 1 << " should start " << expected);
    CHECK(rows[i].size() > expected.size() + 2);  // with a meaning
  }
}

namespace {
// The string literal at `at` (just after an opening parenthesis), or "" when it is not one.
std::string literal_at(const std::string& text, std::size_t at) {
  if (at >= text.size() || text[at] != '"') return "";
  const auto end = text.find('"', at + 1);
  return end == std::string::npos ? "" : text.substr(at + 1, end - at - 1);
}
}  // namespace

TEST_CASE("no header reads a LAPTIME_* variable but through the table") {
  const std::filesystem::path include = std::filesystem::path(LAPTIME_DOCS_DIR) / "../include";
  // detail/env.hpp holds the one getenv; detail/env_vars.hpp the table and the reads through it.
  // Every other env_raw reads a variable that is not laptime's, named by a literal.
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(include)) {
    if (entry.path().extension() != ".hpp") continue;
    ++files;
    const std::string name = entry.path().filename().string();
    if (name == "env.hpp" || name == "env_vars.hpp") continue;
    const std::string text = read_file(entry.path());
    CAPTURE(name);
    CHECK(text.find("getenv(") == std::string::npos);
    for (const char* call : {"env_raw(", "setenv("}) {
      for (auto p = text.find(call); p != std::string::npos; p = text.find(call, p + 1)) {
        const std::string arg = literal_at(text, p + std::strlen(call));
        CAPTURE(text.substr(p, 60));
        if (std::string(call) != "setenv(") CHECK_FALSE(arg.empty());
        CHECK(arg.rfind("LAPTIME_", 0) == std::string::npos);
      }
    }
  }
  CHECK(files > 30);
  // The Python package reads no variable of its own: those it looks at are in the table.
  const std::filesystem::path python =
      std::filesystem::path(LAPTIME_DOCS_DIR) / "../python/laptime";
  std::size_t looked_at = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(python)) {
    if (entry.path().extension() != ".py") continue;
    std::istringstream lines(read_file(entry.path()));
    std::string line;
    while (std::getline(lines, line)) {
      if (line.find("environ") == std::string::npos && line.find("_env_set(") == std::string::npos)
        continue;
      for (auto p = line.find("\"LAPTIME_"); p != std::string::npos;
           p = line.find("\"LAPTIME_", p + 1)) {
        const std::string var = line.substr(p + 1, line.find('"', p + 1) - p - 1);
        CAPTURE(var);
        bool known = false;
        for (const lt::EnvVar& v : lt::kEnvVars) known = known || var == v.name;
        CHECK(known);
        ++looked_at;
      }
    }
  }
  CHECK(looked_at >= 3);
}
