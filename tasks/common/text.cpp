#include "tasks/common/text.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/error.h"

namespace ag::tasks {

std::string read_data_file(const std::string& path) {
  AG_CHECK(!path.empty(), "no data file given (an empty path)");
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  AG_CHECK(std::filesystem::exists(status), "{}: cannot open the data file: no such file", path);
  AG_CHECK(!std::filesystem::is_directory(status), "{}: is a directory, expected a data file", path);
  // Before opening: reading a FIFO or a device could block or never end.
  AG_CHECK(std::filesystem::is_regular_file(status), "{}: is not a regular file, expected a data file", path);
  std::ifstream in(path, std::ios::binary);
  AG_CHECK(in.good(), "{}: cannot open the data file", path);
  std::ostringstream text;
  text << in.rdbuf();
  AG_CHECK(!in.bad(), "{}: cannot read the data file", path);
  return text.str();
}

std::u32string decode_utf8(std::string_view bytes, const std::string& source) {
  std::u32string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    const int extra = lead < 0x80 ? 0 : (lead >> 5) == 0x6 ? 1 : (lead >> 4) == 0xE ? 2 : (lead >> 3) == 0x1E ? 3 : -1;
    char32_t code = extra <= 0 ? lead : extra == 1 ? lead & 0x1F : extra == 2 ? lead & 0x0F : lead & 0x07;
    bool valid = extra >= 0 && bytes.size() - i > static_cast<size_t>(extra);  // the whole sequence is there
    for (int k = 1; valid && k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(bytes[i + k]);
      valid = (next >> 6) == 0x2;
      code = (code << 6) | (next & 0x3F);
    }
    constexpr char32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};
    valid = valid && code >= kSmallest[extra] && code <= 0x10FFFF && !(code >= 0xD800 && code <= 0xDFFF);
    AG_CHECK(valid, "{}: invalid UTF-8 at byte offset {} (byte 0x{:02x}); expected UTF-8 text", source, i, lead);
    out.push_back(code);
    i += static_cast<size_t>(extra) + 1;
  }
  return out;
}

std::string encode_utf8(std::u32string_view text) {
  std::string out;
  for (const char32_t c : text) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

}  // namespace ag::tasks
