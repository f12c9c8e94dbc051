// Text files as the tasks read them: whole files read safely, as people have them (a UTF-8 byte
// order mark, LF, CRLF or CR line endings), checked to be UTF-8 once with the file, line and byte
// offset of the first invalid sequence, decoded to code points and encoded back; file text made
// safe to quote in a message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ag::tasks {

// The bytes of a file; refuses folders, FIFOs and devices (reading those may never end) and a file
// larger than the limit below, before reading it, naming the file as `what` ("data file",
// "checkpoint"). Not an input of the command (a run folder's config.json, which the run replaces):
// read data with read_data_file.
std::string read_file(const std::string& path, std::string_view what = "data file");

// A data file is read whole, then held as text, lines, code points (4 bytes each) and ids: it may take
// kDataFileCopies times its size. The largest one read_file reads is kMaxDataFileBytes, or less when
// kDataFileCopies times it is more than the memory available (memory_limit in memory.h).
inline constexpr uint64_t kMaxDataFileBytes = uint64_t{1} << 30;
inline constexpr double kDataFileCopies = 16;
// read_file for the data a command reads: noted as an input (Note [inputs are not outputs] in
// engine/io.h: nothing the command writes may replace it); the file and its content's sha256 are
// recorded, the one digest of data: the ranks of a data-parallel job compare them (they read the same data), a run's
// config stores it (data_sha256: --resume and eval notice a file rewritten in place), a cached
// corpus is checked against its pinned one.
std::string read_data_file(const std::string& path);
// The path a run records for its data (config.json's "data"): "" (the task's own data) stays "";
// another is made absolute and resolved (symlinks, `..`), so an eval or --resume from another folder
// never reads another file of the same name.
std::string recorded_data_path(const std::string& path);
// The data files this process has read, in order, with the sha256 (hex) of their contents.
const std::vector<std::pair<std::string, std::string>>& data_files_read();
// The sha256 of what read_data_file last read from `path` (an error if it has read nothing there).
std::string data_file_sha256(const std::string& path);

// A text file's content: read_data_file, then as_text.
std::string read_text_file(const std::string& path);

// `bytes` as the tasks take text: a leading byte order mark removed, checked to be strict UTF-8
// (an error names `source`, the line and the byte offset), CRLF and CR line endings turned into LF.
std::string as_text(std::string_view bytes, const std::string& source);

// The lines of text, each ended by LF, CR LF or a lone CR (a last line without its line end counts;
// no empty last line).
std::vector<std::string> split_lines(std::string_view text);

// Strict UTF-8 (no overlong forms, surrogates or code points above U+10FFFF).
std::u32string decode_utf8(std::string_view bytes, const std::string& source);
std::string encode_utf8(std::u32string_view text);

// Text from a file or a flag as a message may quote it: control bytes (NUL, ESC, a lone CR …) and
// bytes that are not UTF-8 are shown as \xNN, so nothing cuts or garbles the message.
std::string printable(std::string_view text);

// A C0 or C1 control character, or DEL.
bool is_control(char32_t c);
// A space or separator other than ASCII's, which reads as a space or as nothing: no-break (U+00A0,
// U+202F), the U+2000 block's widths, zero-width (U+200B, U+2060, U+FEFF), line and paragraph
// separators (U+2028, U+2029), ideographic (U+3000), Ogham (U+1680), mathematical (U+205F).
bool is_unicode_space(char32_t c);

// How a character reads in a message: itself and its code point if printable ("'a' (U+0061)"),
// else (a control character, a Unicode space) only its code point ('\n' → "U+000A").
std::string describe_char(char32_t c);

}  // namespace ag::tasks
