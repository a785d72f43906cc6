// Names (detail/names.hpp): the byte compare, the hash, the quoting and the per-thread name cache
// every component keys its hot path with. Plain code: tested with known data.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/detail/names.hpp"
#include "test_support.hpp"

using laptime::detail::NameCache;
using laptime::detail::quoted;
using laptime::detail::same_text;

TEST_CASE("same_text is byte equality for every length the word loads take apart") {
  for (std::size_t n = 0; n <= 80; ++n) {
    const std::string a(n, 'x');
    CAPTURE(n);
    CHECK(same_text(a, std::string(n, 'x')));
    for (std::size_t i = 0; i < n; ++i) {  // one byte differs, anywhere
      std::string b = a;
      b[i] = 'y';
      CHECK_FALSE(same_text(a, b));
    }
    CHECK_FALSE(same_text(a, std::string(n + 1, 'x')));
  }
  CHECK(same_text(std::string_view("a\0b", 3), std::string_view("a\0b", 3)));
  CHECK_FALSE(same_text(std::string_view("a\0b", 3), std::string_view("a\0c", 3)));
}

TEST_CASE("name_hash is the same in every process and every run (NVTX colours a name by it)") {
  CHECK(laptime::detail::name_hash("") == 1469598103934665603ULL);
  CHECK(laptime::detail::name_hash("a") == 0x44bd8ad473cd9906ULL);
  CHECK(laptime::detail::name_hash("forward") != laptime::detail::name_hash("backward"));
}

TEST_CASE("quoted escapes what could rewrite a terminal") {
  CHECK(quoted("data fetch") == "'data fetch'");
  CHECK(quoted("a\x1b[2Jb") == "'a\\u001b[2Jb'");
  CHECK(quoted("back\\slash") == "'back\\\\slash'");
  CHECK(quoted("caf\xc3\xa9") == "'caf\xc3\xa9'");
  CHECK(quoted("\xe9t\xe9") == "'\\xe9t\\xe9'");
}

TEST_CASE("the name cache finds what was inserted, by pointer and length, verified by content") {
  NameCache<int> cache;
  const std::string interned = "forward";
  const char* literal = "forward";
  CHECK(cache.find(literal) == nullptr);
  cache.insert(literal, interned.data(), 7);
  REQUIRE(cache.find(literal) != nullptr);
  CHECK(cache.find(literal)->value == 7);
  // The same text at another address is a miss (the component's map finds it by content).
  const std::string copy = literal;
  CHECK(cache.find(copy) == nullptr);
  // The same address and length holding another text now: a miss, never the old name's value.
  std::string buffer = "forward";
  cache.insert(buffer, interned.data(), 8);
  REQUIRE(cache.find(buffer) != nullptr);
  buffer[0] = 'b';
  CHECK(cache.find(buffer) == nullptr);
  // Re-inserting the same pointer and length replaces the entry, never leaves two of it.
  const std::string other = "borward";
  cache.insert(buffer, other.data(), 9);
  REQUIRE(cache.find(buffer) != nullptr);
  CHECK(cache.find(buffer)->value == 9);
  cache.clear();
  CHECK(cache.find(literal) == nullptr);
}

TEST_CASE("64 short names side by side in memory all stay cached (issue 16)") {
  // As a compiler lays out 64 one-word string literals: back to back, a few bytes each.
  for (const std::size_t stride : {2u, 4u, 6u, 8u, 12u, 16u}) {
    CAPTURE(stride);
    std::vector<char> text(64 * stride + 64, 'n');
    NameCache<std::size_t> cache;
    std::vector<std::string_view> names;
    for (std::size_t i = 0; i < 64; ++i) names.emplace_back(&text[i * stride], stride - 1);
    for (std::size_t i = 0; i < names.size(); ++i) cache.insert(names[i], names[i].data(), i);
    std::size_t hits = 0;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const auto* e = cache.find(names[i]);
      if (e != nullptr && e->value == i) ++hits;
    }
    CHECK(hits == names.size());
  }
}
