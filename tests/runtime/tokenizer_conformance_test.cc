// llama.cpp's tokenizer test vectors (../shared/conformance/tokenizers):
// every case of every vocabulary must give llama.cpp's ids exactly, without
// BOS/EOS and without parsing special tokens in the text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "platform/mapped_file.h"
#include "runtime/model/gguf.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/testing/test_data.h"

namespace kvedge {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The .inp cases: separated by "\n__ggml_vocab_test__\n"; the file ends
// with the separator's first two parts ("\n__ggml_vocab_test__\n" after the
// last case), as llama.cpp's test reads it.
std::vector<std::string> Cases(const std::string& inp) {
  static const std::string kSep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> cases;
  size_t pos = 0;
  while (true) {
    const size_t hit = inp.find(kSep, pos);
    if (hit == std::string::npos) break;
    cases.push_back(inp.substr(pos, hit - pos));
    pos = hit + kSep.size();
  }
  if (pos < inp.size()) cases.push_back(inp.substr(pos));
  return cases;
}

std::vector<std::vector<int>> Expected(const std::string& out) {
  std::vector<std::vector<int>> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::vector<int> ids;
    for (int id; ls >> id;) ids.push_back(id);
    lines.push_back(std::move(ids));
  }
  return lines;
}

std::vector<std::string> VocabFiles() {
  std::vector<std::string> files;
  const std::string dir = testing::SharedPath("conformance/tokenizers");
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ggml-vocab-", 0) == 0 && e.path().extension() == ".gguf") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class VocabConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabConformance, EveryCaseMatchesLlamaCpp) {
  const std::string path = GetParam();
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto gguf = GgufFile::Parse(file->data(), file->size(), path);
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  auto tok = LoadGgufTokenizer(*gguf);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const auto cases = Cases(ReadFile(path + ".inp"));
  const auto expected = Expected(ReadFile(path + ".out"));
  ASSERT_FALSE(cases.empty());
  ASSERT_EQ(cases.size(), expected.size()) << path;
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    auto ids = (*tok)->Encode(cases[i], EncodeOptions{.add_special = false, .parse_special = false});
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    if (*ids != expected[i]) {
      ++failures;
      std::string got, want;
      for (int id : *ids) got.append(" ").append(std::to_string(id));
      for (int id : expected[i]) want.append(" ").append(std::to_string(id));
      ADD_FAILURE() << path << " case " << i << " '" << cases[i] << "'\n  got: " << got << "\n want: " << want;
    }
  }
  EXPECT_EQ(failures, 0) << "of " << cases.size() << " cases";
}

std::string VocabName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = std::filesystem::path(info.param).stem().string().substr(11);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, VocabConformance, ::testing::ValuesIn(VocabFiles()), VocabName);

TEST(VocabConformanceFiles, ArePresent) { EXPECT_GE(VocabFiles().size(), 6u); }

}  // namespace
}  // namespace kvedge
