// Text files as the tasks read them: whole files read safely, UTF-8 decoded to code points (an
// error names the file and the byte offset of the first invalid sequence) and encoded back.
#pragma once

#include <string>
#include <string_view>

namespace ag::tasks {

// The bytes of a data file; refuses folders, FIFOs and devices (reading those may never end).
std::string read_data_file(const std::string& path);

// Strict UTF-8 (no overlong forms, surrogates or code points above U+10FFFF).
std::u32string decode_utf8(std::string_view bytes, const std::string& source);
std::string encode_utf8(std::u32string_view text);

}  // namespace ag::tasks
