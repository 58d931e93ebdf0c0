// cat(): the same text as operator<< into a stream, whether it appends the
// parts itself (text, chars, integers) or takes the stream (anything else).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace genie {
namespace {

template <class... Parts>
std::string streamed(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

TEST(Cat, TextCharsAndIntegersReadAsTheStreamWritesThem) {
  const std::string s = "abc";
  const std::string_view v = "view";
  const char* p = "ptr";
  char buf[] = "array";
  EXPECT_EQ(cat("x=", 0, ' ', s, v, p, buf, std::string("tmp")),
            streamed("x=", 0, ' ', s, v, p, buf, std::string("tmp")));
  EXPECT_EQ(cat(-1, short{-32768}, 42u, 7l, std::numeric_limits<int64_t>::min(),
                std::numeric_limits<uint64_t>::max(), size_t{1} << 40),
            streamed(-1, short{-32768}, 42u, 7l, std::numeric_limits<int64_t>::min(),
                     std::numeric_limits<uint64_t>::max(), size_t{1} << 40));
  EXPECT_EQ(cat(), "");
  EXPECT_EQ(cat("", std::string()), "");
  EXPECT_EQ(cat("remote:", 3), "remote:3");
  const char* none = nullptr;
  EXPECT_EQ(cat("a", none, "b"), "ab");  // a null C string adds nothing, and nothing breaks
}

TEST(Cat, OtherPartsGoThroughTheStream) {
  // Character-sized integers print as characters, bool as 0 or 1, and
  // manipulators apply to what follows: all as a stream does.
  const uint8_t byte = 65;
  const int8_t sbyte = 66;
  EXPECT_EQ(cat("byte ", byte, sbyte), streamed("byte ", byte, sbyte));
  EXPECT_EQ(cat("flag ", true, false), "flag 10");
  EXPECT_EQ(cat("0x", std::hex, 255u, std::dec, " ", 255), "0xff 255");
  EXPECT_EQ(cat("half ", 0.5), streamed("half ", 0.5));
}

}  // namespace
}  // namespace genie
