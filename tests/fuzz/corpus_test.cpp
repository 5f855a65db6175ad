// Every input of the checked-in fuzz corpora (fuzz/corpus/<target>/) through its fuzz
// target, in every build: the seeds, and each input that once crashed goro or broke a
// property a target checks (the files named regression-*), so that it stays fixed.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "harness.hpp"

namespace goro::fuzz {
namespace {

class FuzzCorpus : public ::testing::TestWithParam<Target> {};

TEST_P(FuzzCorpus, EveryInputPasses) {
  const std::filesystem::path dir = std::filesystem::path(GORO_FUZZ_CORPUS) / GetParam().name;
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  std::vector<std::filesystem::path> inputs;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) inputs.push_back(entry.path());
  std::sort(inputs.begin(), inputs.end());
  EXPECT_GE(inputs.size(), 3u) << "a corpus of seeds for every target";
  for (const std::filesystem::path& path : inputs) {
    std::ifstream file(path, std::ios::binary);
    const std::string input{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    EXPECT_EQ(GetParam().run(input), "") << path;
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzCorpus, ::testing::ValuesIn(targets),
                         [](const ::testing::TestParamInfo<Target>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace goro::fuzz
