#include <stdexcept>

#include "catch.hpp"
#include "zeromem/core/dtype.hpp"
#include "zeromem/core/parse.hpp"

using namespace zeromem;

TEST_CASE("dtype sizes", "[dtype]") {
  // IEEE 754 binary32 = 4 B, binary16 and bfloat16 = 2 B, FP8 = 1 B, int4 packs two values per byte.
  CHECK(size_of(dtype::fp32).value() == 4.0);
  CHECK(size_of(dtype::bf16).value() == 2.0);
  CHECK(size_of(dtype::fp16).value() == 2.0);
  CHECK(size_of(dtype::fp8_e4m3).value() == 1.0);
  CHECK(size_of(dtype::fp8_e5m2).value() == 1.0);
  CHECK(size_of(dtype::int8).value() == 1.0);
  CHECK(size_of(dtype::int4).value() == 0.5);
  STATIC_REQUIRE(bf16_t::bits == 16);
  STATIC_REQUIRE(int4_t_tag::size.bits() == 4);
  STATIC_REQUIRE(fp32_t::value == dtype::fp32);
}

TEST_CASE("dtype names round-trip and PyTorch spellings parse", "[dtype]") {
  for (dtype d : all_dtypes) CHECK(parse_dtype(name(d)) == d);
  CHECK(parse_dtype("bfloat16") == dtype::bf16);
  CHECK(parse_dtype("float8_e4m3fn") == dtype::fp8_e4m3);
  CHECK(parse_dtype("half") == dtype::fp16);
  CHECK_THROWS_WITH(parse_dtype("fp64"),
                    "zeromem: unknown dtype 'fp64'; expected one of fp32, bf16, fp16, fp8_e4m3, fp8_e5m2, int8, int4");
  CHECK_THROWS_AS(parse_dtype(""), std::invalid_argument);
}

TEST_CASE("counts parse exactly", "[parse]") {
  CHECK(parse_count("7.5e9") == 7'500'000'000);
  CHECK(parse_count("7.5B") == 7'500'000'000);
  CHECK(parse_count("7.5G") == 7'500'000'000);
  CHECK(parse_count("350M") == 350'000'000);
  CHECK(parse_count("1T") == 1'000'000'000'000);
  CHECK(parse_count("2783959040") == 2'783'959'040);
  CHECK(parse_count("7,615,616,512") == 7'615'616'512);
  CHECK(parse_count("65.798144M") == 65'798'144);
  CHECK(parse_count(" 12k ") == 12'000);
  CHECK(parse_count("1.5e3") == 1500);
}

TEST_CASE("bad counts are rejected with the reason", "[parse]") {
  CHECK_THROWS_WITH(parse_count("-5"), Catch::Matchers::Contains("cannot be negative"));
  CHECK_THROWS_WITH(parse_count("1.5"), Catch::Matchers::Contains("not a whole number"));
  CHECK_THROWS_WITH(parse_count("7.5X"), Catch::Matchers::Contains("unknown suffix"));
  CHECK_THROWS_WITH(parse_count("nan"), Catch::Matchers::Contains("write it like 7.5B"));
  CHECK_THROWS_WITH(parse_count(""), Catch::Matchers::Contains("write it like 7.5B"));
  CHECK_THROWS_WITH(parse_count("1e"), Catch::Matchers::Contains("write it like 7.5B"));
  CHECK_THROWS_AS(parse_count("99999999999T"), std::overflow_error);
  CHECK_THROWS_AS(parse_count("1e400"), std::overflow_error);
}

TEST_CASE("sizes need a unit and parse exactly", "[parse]") {
  CHECK(parse_size("80GiB") == 85'899'345'920);
  CHECK(parse_size("80 GB") == 80'000'000'000);
  CHECK(parse_size("79.35GiB") == 85'201'413'734);  // 85,201,413,734.4 rounds down
  CHECK(parse_size("1.5B") == 2);                   // half a byte rounds up
  CHECK(parse_size("760GB") == 760'000'000'000);
  CHECK(parse_size("1TiB") == 1'099'511'627'776);
  CHECK_THROWS_WITH(parse_size("80"), Catch::Matchers::Contains("give a unit"));
  CHECK_THROWS_WITH(parse_size("80 gigs"), Catch::Matchers::Contains("give a unit"));
}

TEST_CASE("parse_elements and parse_bytes give typed quantities, as the compiler's messages suggest", "[parse][first-contact]") {
  using namespace zeromem::literals;
  const zeromem::elements p = zeromem::parse_elements("7.5B");
  CHECK(p.count() == 7'500'000'000);
  CHECK(zeromem::parse_elements("7,615,616,512") == 7'615'616'512_params);
  const zeromem::bytes b = zeromem::parse_bytes("79.35 GiB");
  CHECK(b.count() == 85'201'413'734);  // 79.35 x 2^30 = 85,201,413,734.4, to the nearest byte
  CHECK_THROWS_WITH(zeromem::parse_elements("-1"), Catch::Matchers::Contains("cannot be negative"));
  CHECK_THROWS_WITH(zeromem::parse_bytes("80"), Catch::Matchers::Contains("unit"));
}
