#if __has_include(<catch2/catch_all.hpp>)
// Catch2 v3 links Catch2WithMain instead.
#else
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
