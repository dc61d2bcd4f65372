// Catch2's main, compiled once in its own object: it is the slowest file of the build.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
