// DeepSpeed's estimators against the table Hugging Face publishes for bigscience/T0_3B
// (transformers docs, "DeepSpeed" page, estimate_zero3_model_states_mem_needs_all_live, 1 node x 1 GPU),
// and against the formulas written out by hand.
#include <cstdio>
#include <string>

#include "catch.hpp"
#include "helpers.hpp"
#include "zeromem/engines/deepspeed.hpp"

using namespace zeromem;
namespace ds = zeromem::deepspeed;

namespace {
constexpr std::int64_t t0_params = 2'783'959'040;
constexpr std::int64_t t0_largest = 65'798'144;
using test::gib_2dp;
}  // namespace

TEST_CASE("ZeRO-3 estimator reproduces the published T0_3B table", "[deepspeed][published]") {
  // Published rows, "per CPU | per GPU" in DeepSpeed's GB (= GiB):
  const char* published[6][2] = {{"70.00", "0.25"}, {"70.00", "0.25"}, {"62.23", "5.43"},
                                 {"62.23", "5.43"}, {"0.37", "46.91"}, {"15.56", "46.91"}};
  const bool flags[6][3] = {{true, true, true},   {true, true, false},   {false, true, true},
                            {false, true, false}, {false, false, true}, {false, false, false}};
  const auto rows = ds::zero3_table(t0_params, t0_largest, ds::cluster{1, 1});
  for (int i = 0; i < 6; ++i) {
    INFO("row " << i);
    CHECK(rows[static_cast<std::size_t>(i)].offload_param == flags[i][0]);
    CHECK(rows[static_cast<std::size_t>(i)].offload_optimizer == flags[i][1]);
    CHECK(rows[static_cast<std::size_t>(i)].zero_init == flags[i][2]);
    CHECK(gib_2dp(rows[static_cast<std::size_t>(i)].cpu) == published[i][0]);
    CHECK(gib_2dp(rows[static_cast<std::size_t>(i)].gpu) == published[i][1]);
  }
}

TEST_CASE("ZeRO-3 estimator exact bytes, derived by hand", "[deepspeed]") {
  const ds::cluster one{1, 1};
  // 4L = 263,192,576. 18P = 50,111,262,720. 2P = 5,567,918,080.
  const auto full = ds::estimate_zero3(t0_params, t0_largest, one, true, true, true);
  CHECK(full.gpu.count() == 263'192'576);
  CHECK(full.cpu.count() == 75'166'894'080);  // P x 18 x 1 x 1.5 = P x 27
  const auto opt = ds::estimate_zero3(t0_params, t0_largest, one, true, false, true);
  CHECK(opt.gpu.count() == 263'192'576 + 5'567'918'080);
  CHECK(opt.cpu.count() == 66'815'016'960);   // P x 16 x 1.5 = P x 24
  const auto none = ds::estimate_zero3(t0_params, t0_largest, one, false, false, true);
  CHECK(none.gpu.count() == 263'192'576 + 50'111'262'720);
  CHECK(none.cpu.count() == 394'788'864);     // L x 4 x 1 x 1.5 = L x 6
  // Two nodes of 8: gpus_factor 1/2; int(18P/16) = int(3,131,953,920) exactly; zero_init=0 CPU takes
  // max(4 x 8, 18 / 2) = 32 per parameter: P x 32 x 1.5 = P x 48.
  const ds::cluster two{8, 2};
  CHECK(ds::estimate_zero3(t0_params, t0_largest, two, false, false, true).gpu.count() == 263'192'576 + 3'131'953'920);
  CHECK(ds::estimate_zero3(t0_params, t0_largest, two, true, true, false).cpu.count() == 133'630'033'920);
  CHECK(ds::estimate_zero3(t0_params, t0_largest, two, true, true, true).cpu.count() == 37'583'447'040);  // P x 18 x 0.5 x 1.5
}

TEST_CASE("ZeRO-2 estimator, current and pre-2024 formulas", "[deepspeed]") {
  // P = 1e9 on 1 node x 4 GPUs.
  // offload: GPU 2P = 2e9; CPU P x max(4 x 4, 16) x 1.5 = 24e9.
  // current: GPU 2P + int(18P/4) = 2e9 + 4.5e9; pre-2024: 4P + int(16P/4) = 4e9 + 4e9; CPU P x 4 x 4 x 1.5 = 24e9.
  const ds::cluster c{4, 1};
  const auto off = ds::estimate_zero2(1'000'000'000, c, true);
  CHECK(off.gpu.count() == 2'000'000'000);
  CHECK(off.cpu.count() == 24'000'000'000);
  CHECK(ds::estimate_zero2(1'000'000'000, c, false).gpu.count() == 6'500'000'000);
  CHECK(ds::estimate_zero2(1'000'000'000, c, false, ds::zero2_formula::pre_2024).gpu.count() == 8'000'000'000);
  CHECK(ds::estimate_zero2(1'000'000'000, c, false).cpu.count() == 24'000'000'000);
  // 8 nodes x 8 GPUs: max(4 x 64, 16) = 256 per parameter: P x 256 x 1.5 = 384e9.
  CHECK(ds::estimate_zero2(1'000'000'000, ds::cluster{8, 8}, true).cpu.count() == 384'000'000'000);
  // int() truncates: P = 7 on 4 GPUs: 2 x 7 + int(18 x 7 / 4 = 31.5) = 14 + 31.
  CHECK(ds::estimate_zero2(7, ds::cluster{4, 1}, false).gpu.count() == 14 + 31);
  const auto table = ds::zero2_table(1'000'000'000, c);
  CHECK(table[0].offload_optimizer);
  CHECK_FALSE(table[1].offload_optimizer);
}

TEST_CASE("DeepSpeed estimator input errors", "[deepspeed][errors]") {
  CHECK_THROWS_WITH(ds::estimate_zero2(0, ds::cluster{}, true), Catch::Matchers::Contains("parameter count must be positive"));
  CHECK_THROWS_WITH(ds::estimate_zero3(10, 11, ds::cluster{}, true, true, true), Catch::Matchers::Contains("largest layer"));
  CHECK_THROWS_WITH(ds::estimate_zero2(10, ds::cluster{0, 1}, true), Catch::Matchers::Contains("GPUs per node"));
  CHECK_THROWS_WITH(ds::estimate_zero2(10, ds::cluster{1, 1, -1.0}, true), Catch::Matchers::Contains("additional_buffer_factor"));
}
