#include <limits>
#include <stdexcept>
#include <type_traits>

#include "catch.hpp"
#include "zeromem/core/dtype.hpp"
#include "zeromem/core/format.hpp"
#include "zeromem/core/units.hpp"

using namespace zeromem;
using namespace zeromem::literals;

TEST_CASE("literals give exact counts and sizes", "[units]") {
  CHECK((7.5_Gparams).count() == 7'500'000'000);  // 7.5 x 10^9
  CHECK((350_Mparams).count() == 350'000'000);
  CHECK((1_Tparams).count() == 1'000'000'000'000);
  CHECK((0.1_Gparams).count() == 100'000'000);  // 0.1 is inexact in binary; the literal still lands on 10^8
  CHECK((80_GB).count() == 80'000'000'000);     // GB = 10^9 B
  CHECK((80_GiB).count() == 85'899'345'920);    // 80 x 2^30 = 80 x 1,073,741,824
  CHECK((1_KiB).count() == 1024);
  CHECK((1_TiB).count() == 1'099'511'627'776);  // 2^40
  // 79.35 x 2^30 = 85,201,413,734.4 B, rounded to the nearest byte.
  CHECK((79.35_GiB).count() == 85'201'413'734);
}

TEST_CASE("fractional parameter literals are rejected", "[units]") {
  CHECK_THROWS_WITH(operator""_Kparams(0.0005L), Catch::Matchers::Contains("whole number of parameters"));
}

TEST_CASE("GB and GiB conversions are exact", "[units]") {
  const bytes b = bytes_of(31'406'250'000LL);
  CHECK(to_gb(b) == 31.40625);                                 // ZeRO paper: 31.4 GB for stage 1
  CHECK(to_gib(80_GiB) == 80.0);
  CHECK(to_gb(80_GiB) == 85.89934592);                         // 80 GiB = 85.89934592 GB
  CHECK(in_units(bytes_of(1'500'000), size_unit::MB) == 1.5);
  CHECK(to_mib(bytes_of(10'292'838'400LL)) == Approx(9816.02).margin(0.005));  // Megatron's 9816.02 MiB
}

TEST_CASE("elements times bytes per element", "[units]") {
  CHECK((elements_of(1000) * size_of(dtype::bf16)).count() == 2000);
  CHECK((elements_of(1000) * size_of(dtype::fp32)).count() == 4000);
  CHECK((elements_of(7) * size_of(dtype::int4)).count() == 4);  // 7 x 4 bits = 28 bits -> 4 whole bytes
  CHECK((elements_of(8) * size_of(dtype::int4)).count() == 4);
  CHECK((elements_of(10) * bytes_per_element_of(12)).count() == 120);
  CHECK((size_of(dtype::bf16) * 3).bits() == 48);
  CHECK((size_of(dtype::fp32) + size_of(dtype::bf16)).value() == 6.0);
}

TEST_CASE("byte arithmetic and comparisons", "[units]") {
  CHECK((80_GB - 85_GB).count() == -5'000'000'000);  // headroom can be negative
  CHECK((3 * 1_GiB) == 3_GiB);
  CHECK(1_GiB > 1_GB);
  CHECK((1_GiB / 1_MiB) == 1024.0);
  bytes acc{};
  acc += 1_KiB;
  acc += 1_KiB;
  CHECK(acc == 2_KiB);
}

TEST_CASE("shares split totals exactly", "[units]") {
  // 10 bytes over 4 ranks: 3, 3, 2, 2.
  CHECK(share_of_rank(bytes_of(10), 4, 0).count() == 3);
  CHECK(share_of_rank(bytes_of(10), 4, 1).count() == 3);
  CHECK(share_of_rank(bytes_of(10), 4, 2).count() == 2);
  CHECK(share_of_rank(bytes_of(10), 4, 3).count() == 2);
  CHECK(largest_share(bytes_of(10), 4).count() == 3);
  CHECK(largest_share(elements_of(7'500'000'000LL), 64).count() == 117'187'500);  // 7.5e9 / 64 exactly
  CHECK_THROWS_AS(largest_share(bytes_of(10), 0), std::invalid_argument);
  CHECK_THROWS_AS(share_of_rank(bytes_of(10), 4, 4), std::invalid_argument);
}

TEST_CASE("division helpers agree with the language's / and % for every sign and divisor", "[units]") {
  // quotient/remainder take a shift for power-of-two divisors; the expected values are C++'s own operators.
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  for (std::int64_t a : {std::int64_t{0}, std::int64_t{1}, std::int64_t{7}, std::int64_t{-7}, std::int64_t{4096},
                         std::int64_t{-4096}, std::int64_t{6'738'415'617}, max, max - 1, -max}) {
    for (std::int64_t b = 1; b <= 70; ++b) {
      INFO("a " << a << " b " << b);
      CHECK(detail::quotient(a, b) == a / b);
      CHECK(detail::remainder(a, b) == a % b);
      CHECK(detail::divides(b, a) == (a % b == 0));
      // ceil(a / b) written out: truncation rounds toward zero, so positive inexact quotients go up by one.
      CHECK(detail::ceil_div(a, b) == a / b + ((a % b != 0 && a > 0) ? 1 : 0));
    }
    const std::int64_t big = std::int64_t{1} << 62;
    CHECK(detail::quotient(a, big) == a / big);
    CHECK(detail::remainder(a, big) == a % big);
  }
}

TEST_CASE("overflow and negative counts are rejected", "[units]") {
  const bytes big = bytes_of(std::numeric_limits<std::int64_t>::max());
  CHECK_THROWS_AS(big + 1_B, std::overflow_error);
  CHECK_THROWS_AS(big * 2, std::overflow_error);
  CHECK_THROWS_AS(elements_of(std::numeric_limits<std::int64_t>::max()) * size_of(dtype::fp32), std::overflow_error);
  CHECK_THROWS_AS(elements_of(-1), std::invalid_argument);
  CHECK_THROWS_AS(elements_of(1) - elements_of(2), std::invalid_argument);
  CHECK_THROWS_AS(bits_per_element(-4), std::invalid_argument);
  CHECK_THROWS_AS(elements_of(std::numeric_limits<std::uint64_t>::max()), std::overflow_error);
  CHECK_THROWS_WITH(big + 1_B, Catch::Matchers::StartsWith("zeromem: "));
}

TEST_CASE("the types keep dimensions apart", "[units]") {
  // Raw numbers do not convert silently: the conversions exist only to explain the fix (compile-fail tests).
  STATIC_REQUIRE_FALSE(std::is_same_v<elements, bytes>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<bytes>);
  STATIC_REQUIRE(sizeof(bytes) == sizeof(std::int64_t));  // the units vanish at run time
  STATIC_REQUIRE(sizeof(elements) == sizeof(std::int64_t));
}

TEST_CASE("formatting always carries a unit", "[format]") {
  CHECK(format_bytes(bytes_of(31'406'250'000LL), size_unit::GB) == "31.41 GB");
  CHECK(format_bytes(80_GiB, size_unit::GiB, 1) == "80.0 GiB");
  CHECK(format_bytes(bytes_of(46'912'000'000LL), size_unit::GiB) == "43.69 GiB");  // 46.912e9 / 2^30 = 43.690...
  CHECK(format_count(7'500'000'000LL) == "7,500,000,000");
  CHECK(format_count(-1234) == "-1,234");
  CHECK(format_count(999) == "999");
  CHECK(format_exact(bytes_of(1536)) == "1,536 B");
  CHECK(format_auto(bytes_of(1536)) == "1.50 KiB");
  CHECK(format_auto(bytes_of(1536), false) == "1.54 kB");
  CHECK(format_auto(bytes_of(12)) == "12 B");
  CHECK_THROWS_AS(format_bytes(1_B, size_unit::GB, -1), std::invalid_argument);
}

TEST_CASE("the Boost.Units quantity underneath carries the dimension", "[units]") {
  const auto q = (elements_of(10) * size_of(dtype::bf16)).quantity();
  CHECK(q.value() == 20);
  const auto per = (size_of(dtype::fp32)).quantity();
  const auto product = elements_of(3).quantity() * per;  // Boost: element x byte/element = byte
  STATIC_REQUIRE(std::is_same_v<std::decay_t<decltype(product)>::unit_type, bytes::quantity_type::unit_type>);
  CHECK(product.value() == 12.0);
}
