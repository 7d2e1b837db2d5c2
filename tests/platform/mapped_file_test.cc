// MappedFile: maps real files; fails cleanly on missing, empty, directory.
#include "platform/mapped_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <fstream>

#include "tests/testing/test_data.h"

namespace kvedge {
namespace {

TEST(MappedFileTest, MapsWholeFile) {
  const std::string dir = testing::TempDir();
  const std::string path = dir + "/f.bin";
  { std::ofstream(path, std::ios::binary) << "hello kvedge"; }
  auto f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->size(), 12u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data()), f->size()), "hello kvedge");
  MappedFile moved = std::move(f).value();
  EXPECT_EQ(moved.size(), 12u);
  EXPECT_EQ(moved.path(), path);
}

TEST(MappedFileTest, MapsRealModel) {
  auto f = MappedFile::Open(testing::SharedPath("models/stories260K.bin"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->size(), 1056540u);
}

// Dropped pages read back the file's bytes on the next access (the RSS effect
// is measured end to end: docs/model-kernels.md); ranges smaller than a page
// and unaligned edges are left alone.
TEST(MappedFileTest, DropPagesKeepsContents) {
  const std::string path = testing::TempDir() + "/pages.bin";
  constexpr size_t kBytes = 64 * 4096 + 100;
  {
    std::ofstream out(path, std::ios::binary);
    for (size_t i = 0; i < kBytes; ++i) out.put(static_cast<char>(i * 131 % 251));
  }
  auto f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  uint64_t sum = 0;
  for (size_t i = 0; i < kBytes; ++i) sum += f->data()[i];
  f->DropPages(f->data() + 10, kBytes - 20);  // all but the first and last page
  f->DropPages(f->data(), 100);              // less than a page: nothing
  for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(f->data()[i], static_cast<uint8_t>(i * 131 % 251)) << i;
  uint64_t again = 0;
  for (size_t i = 0; i < kBytes; ++i) again += f->data()[i];
  EXPECT_EQ(again, sum);
}

// Retired pages are gone for good (a read faults); the partial pages at both
// edges stay readable with the file's bytes.
TEST(MappedFileTest, RetirePagesKeepsTheEdges) {
  const std::string path = testing::TempDir() + "/retire.bin";
  constexpr size_t kBytes = 8 * 4096;
  {
    std::ofstream out(path, std::ios::binary);
    for (size_t i = 0; i < kBytes; ++i) out.put(static_cast<char>(i * 131 % 251));
  }
  auto f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  f->RetirePages(f->data() + 4096 + 10, 4 * 4096);  // whole pages 2, 3, 4; pages 1 and 5 partly
  for (size_t i : {size_t{0}, size_t{4096}, size_t{2 * 4096 - 1}, size_t{5 * 4096}, kBytes - 1}) {
    EXPECT_EQ(f->data()[i], static_cast<uint8_t>(i * 131 % 251)) << i;
  }
  const volatile uint8_t* retired = f->data() + 3 * 4096;
  EXPECT_DEATH({ [[maybe_unused]] const uint8_t b = *retired; }, "");
}

TEST(MappedFileTest, MissingFile) {
  auto f = MappedFile::Open("/nonexistent/kvedge/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("/nonexistent/kvedge/model.gguf"), std::string::npos);
}

TEST(MappedFileTest, EmptyFile) {
  const std::string path = testing::TempDir() + "/empty";
  { std::ofstream out(path); }
  auto f = MappedFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("empty"), std::string::npos);
}

TEST(MappedFileTest, Directory) {
  auto f = MappedFile::Open(testing::TempDir());
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("directory"), std::string::npos);
}

TEST(MappedFileTest, Unreadable) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  const std::string path = testing::TempDir() + "/secret";
  { std::ofstream(path) << "x"; }
  ::chmod(path.c_str(), 0);
  auto f = MappedFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace kvedge
