// docs/guarantees.md's memory rows against the types they describe: each byte figure in the
// "limit" column of the rows "memory per (thread, name)" and "memory per thread" is computed here
// from sizeof of the real types, and the page must print exactly those figures, in that order. A
// change of layout that leaves the page behind (or an edit of the page that the layout does not
// back) fails this test.
#include <algorithm>
#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "laptime/laptime.hpp"
#include "test_support.hpp"

#if LAPTIME_ENABLED
namespace {

#ifndef LAPTIME_DOCS_DIR
#error "LAPTIME_DOCS_DIR (tests/CMakeLists.txt) must name the repository's docs/ folder"
#endif

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

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
