#include "tasks/common/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "engine/error.h"
#include "engine/io.h"
#include "tasks/common/corpus.h"
#include "tasks/common/memory.h"

namespace ag::tasks {

namespace {

std::vector<std::pair<std::string, std::string>>& data_files() {
  static std::vector<std::pair<std::string, std::string>> files;
  return files;
}

// The largest data file read_file reads (text.h).
uint64_t data_file_limit() {
  const double memory = memory_limit(0);
  const double share = memory / kDataFileCopies;
  return memory > 0 && share < static_cast<double>(kMaxDataFileBytes) ? static_cast<uint64_t>(share)
                                                                      : kMaxDataFileBytes;
}

// Refuses a data file of `size` bytes above the limit (text.h), naming the file, its size and the limit.
void check_data_file_size(const std::string& path, uint64_t size) {
  const uint64_t limit = data_file_limit();
  AG_CHECK(size <= limit,
           "{}: the file is {} bytes, more than the {} bytes a data file may have (it is read whole and held as "
           "text and characters: at most {} bytes, or 1/{:.0f} of the memory available where that is less)",
           path, size, limit, kMaxDataFileBytes, kDataFileCopies);
}

}  // namespace

std::string read_data_file(const std::string& path) {
  std::string bytes = read_file(path);
  note_input(path);  // Note [inputs are not outputs] (engine/io.h)
  data_files().emplace_back(path, sha256_hex(bytes));
  return bytes;
}

const std::vector<std::pair<std::string, std::string>>& data_files_read() { return data_files(); }

std::string data_file_sha256(const std::string& path) {
  const auto& files = data_files();
  const auto it = std::find_if(files.rbegin(), files.rend(), [&](const auto& file) { return file.first == path; });
  AG_CHECK(it != files.rend(), "{}: no digest: the file has not been read as data", path);
  return it->second;
}

std::string recorded_data_path(const std::string& path) {
  if (path.empty()) return path;
  std::error_code error;
  const std::filesystem::path resolved = std::filesystem::canonical(path, error);
  return error ? std::filesystem::absolute(path, error).lexically_normal().string() : resolved.string();
}

std::string read_file(const std::string& path, std::string_view what) {
  AG_CHECK(!path.empty(), "no {} given (an empty path)", what);
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  AG_CHECK(std::filesystem::exists(status), "{}: cannot open the {}: no such file", path, what);
  AG_CHECK(!std::filesystem::is_directory(status), "{}: is a directory, expected a {}", path, what);
  // Before opening: reading a FIFO or a device could block or never end.
  AG_CHECK(std::filesystem::is_regular_file(status), "{}: is not a regular file, expected a {}", path, what);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  AG_CHECK(in.good(), "{}: cannot open the {}", path, what);
  const std::streamoff size = in.tellg();
  AG_CHECK(size >= 0, "{}: cannot find the {}'s size", path, what);
  check_data_file_size(path, static_cast<uint64_t>(size));  // before a byte is read
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  in.read(bytes.data(), size);
  AG_CHECK(in.gcount() == size && in.peek() == std::char_traits<char>::eof(),
           "{}: cannot read the {}: it held {} bytes when opened, then changed", path, what, size);
  return bytes;
}

namespace {

// The code point of the UTF-8 sequence at bytes[i] and its length, or a length of 0 if it is not
// strict UTF-8 (a stray or missing continuation byte, an overlong form, a surrogate, > U+10FFFF).
std::pair<char32_t, size_t> code_point_at(std::string_view bytes, size_t i) {
  const auto lead = static_cast<unsigned char>(bytes[i]);
  const int extra = lead < 0x80 ? 0 : (lead >> 5) == 0x6 ? 1 : (lead >> 4) == 0xE ? 2 : (lead >> 3) == 0x1E ? 3 : -1;
  if (extra < 0 || bytes.size() - i <= static_cast<size_t>(extra)) return {0, 0};  // the whole sequence is there
  char32_t code = extra == 0 ? lead : extra == 1 ? lead & 0x1F : extra == 2 ? lead & 0x0F : lead & 0x07;
  for (int k = 1; k <= extra; ++k) {
    const auto next = static_cast<unsigned char>(bytes[i + k]);
    if ((next >> 6) != 0x2) return {0, 0};
    code = (code << 6) | (next & 0x3F);
  }
  constexpr char32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};
  if (code < kSmallest[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return {0, 0};
  return {code, static_cast<size_t>(extra) + 1};
}

[[noreturn]] void invalid_utf8(std::string_view bytes, size_t i, const std::string& source) {
  size_t line = 1;  // lines end at LF, CRLF or CR
  for (size_t k = 0; k < i; ++k)
    line += bytes[k] == '\n' || (bytes[k] == '\r' && (k + 1 == bytes.size() || bytes[k + 1] != '\n'));
  fail("{}:{}: invalid UTF-8 at byte offset {} (byte 0x{:02x}); expected UTF-8 text", source, line, i,
       static_cast<unsigned char>(bytes[i]));
}

}  // namespace

std::string read_text_file(const std::string& path) { return as_text(read_data_file(path), path); }

std::string as_text(std::string_view bytes, const std::string& source) {
  std::string text;
  text.reserve(bytes.size());
  for (size_t i = bytes.starts_with("\xEF\xBB\xBF") ? 3 : 0; i < bytes.size();) {  // offsets count the mark
    const size_t length = code_point_at(bytes, i).second;
    if (length == 0) invalid_utf8(bytes, i, source);
    if (bytes[i] == '\r') {
      text += '\n';
      if (i + 1 < bytes.size() && bytes[i + 1] == '\n') ++i;  // CRLF
    } else {
      text.append(bytes.substr(i, length));
    }
    i += length;
  }
  return text;
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const size_t end = std::min(text.find_first_of("\r\n"), text.size());
    lines.emplace_back(text.substr(0, end));
    const bool crlf = end + 1 < text.size() && text[end] == '\r' && text[end + 1] == '\n';
    text.remove_prefix(std::min(end + (crlf ? 2 : 1), text.size()));
  }
  return lines;
}

std::u32string decode_utf8(std::string_view bytes, const std::string& source) {
  std::u32string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const auto [code, length] = code_point_at(bytes, i);
    if (length == 0) invalid_utf8(bytes, i, source);
    out.push_back(code);
    i += length;
  }
  return out;
}

std::string printable(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const size_t length = code_point_at(text, i).second;
    if (length == 0 || byte < 0x20 || byte == 0x7F) {
      out += fmt::format("\\x{:02x}", byte);
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

bool is_control(char32_t c) { return c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0); }

bool is_unicode_space(char32_t c) {
  return c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200B) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x2060 || c == 0x3000 || c == 0xFEFF;
}

std::string describe_char(char32_t c) {
  if (is_control(c) || is_unicode_space(c)) return fmt::format("U+{:04X}", static_cast<uint32_t>(c));
  return fmt::format("'{}' (U+{:04X})", tasks::encode_utf8(std::u32string(1, c)), static_cast<uint32_t>(c));
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
