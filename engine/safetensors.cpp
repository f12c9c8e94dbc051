#include "engine/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/hash.h"

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace ag {

namespace {

std::string_view safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::i64:
      return "I64";
    case DType::b8:
      return "BOOL";
  }
  return "?";
}

DType parse_dtype(const std::string& path, const std::string& name, const std::string& text) {
  if (text == "F32") return DType::f32;
  if (text == "F64") return DType::f64;
  if (text == "I64") return DType::i64;
  if (text == "BOOL") return DType::b8;
  fail("{}: tensor '{}' has dtype '{}'; expected one of F32, F64, I64, BOOL", path, name, text);
}

std::string read_whole_file(const std::string& path) {
  std::error_code error;  // a name too long, a symlink loop: the open below says so, in plain words
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  AG_CHECK(!std::filesystem::is_directory(status), "{}: is a directory, expected a safetensors file", path);
  // Before opening: opening a FIFO would block.
  AG_CHECK(!std::filesystem::exists(status) || std::filesystem::is_regular_file(status),
           "{}: is not a regular file, expected a safetensors file", path);
  std::ifstream in(path, std::ios::binary);
  AG_CHECK(in.good(), "{}: cannot open for reading: {}", path, std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  AG_CHECK(!in.bad(), "{}: read failed", path);
  return bytes;
}

constexpr const char* kChecksumKey = "attograd_checksum";

// Covers the header as canonical JSON (sorted keys, no padding, without the checksum itself) and
// the data section, so a damaged shape or metadata value is caught as well as damaged data.
std::string checksum(const nlohmann::json& header_without_checksum, std::string_view data) {
  return fmt::format("fnv1a64:{:016x}", fnv1a64(data, fnv1a64(header_without_checksum.dump())));
}

// Compares the stored checksum, if the writer left one, with the file's content. Returns whether
// there was one.
bool verify_checksum(const std::string& source, nlohmann::json header, std::string_view data) {
  if (!header.contains("__metadata__") || !header["__metadata__"].is_object()) return false;
  nlohmann::json& metadata = header["__metadata__"];
  if (!metadata.contains(kChecksumKey)) return false;
  const nlohmann::json stored = metadata[kChecksumKey];
  metadata.erase(kChecksumKey);
  std::string actual;
  try {
    actual = checksum(header, data);
  } catch (const nlohmann::json::exception& e) {  // e.g. invalid UTF-8 in a string
    fail("{}: the file is corrupt: its header cannot be re-encoded: {}", source, e.what());
  }
  AG_CHECK(stored.is_string() && stored.get<std::string>() == actual,
           "{}: the file is corrupt: its checksum is {}, its content hashes to {} (damaged on disk or in transfer?)",
           source, stored.dump(), actual);
  return true;
}

}  // namespace

namespace {

// A new file `stem`.XXXXXX, opened for writing: mkstemp creates it exclusively (O_EXCL), so never
// through a symlink or over a file someone placed there. Returns its descriptor; sets `path`.
int create_unique_file(const std::string& stem, std::string& path) {
  std::string name = stem + ".XXXXXX";
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  AG_CHECK(fd >= 0, "{}: cannot write a temporary file there: {}", name, std::strerror(errno));
  const mode_t umask = ::umask(0);  // read it: open(…, 0644) would apply it; mkstemp's 0600 would hide the file
  ::umask(umask);
  ::fchmod(fd, 0644 & ~umask);
  path = name;
  return fd;
}

}  // namespace

std::string create_temporary_file(const std::string& stem) {
  std::string path;
  ::close(create_unique_file(stem, path));
  return path;
}

void write_file_atomically(const std::string& path, const std::string& bytes, Durability durability) {
  std::string temporary;
  const int fd = create_unique_file(path + ".tmp", temporary);
  const auto fail_removing_temporary = [&](const char* what, int error) {
    ::unlink(temporary.c_str());
    fail("{}: could not be written: {} failed: {}", path, what, std::strerror(error));
  };
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n == 0 ? EIO : errno;
      ::close(fd);
      fail_removing_temporary("write", error);
    }
    written += static_cast<size_t>(n);
  }
  if (durability == Durability::synced && ::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    fail_removing_temporary("fsync", error);
  }
  if (::close(fd) != 0) fail_removing_temporary("close", errno);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) fail_removing_temporary("rename", errno);
  if (durability == Durability::synced) sync_to_disk({path});  // the rename: the folder's entry
}

void create_output_folder(const std::string& dir) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(dir, error);
  AG_CHECK(!std::filesystem::exists(status) || std::filesystem::is_directory(status),
           "{}: exists and is not a folder (expected a folder for the run's files)", dir);
  std::filesystem::create_directories(dir, error);
  AG_CHECK(!error, "{}: cannot create the folder: {}", dir, error.message());
}

bool sync_to_disk(const std::vector<std::string>& paths) {
  auto sync = [](const std::string& path, int flags) {
    const int fd = ::open(path.c_str(), O_RDONLY | flags);
    if (fd < 0) return errno == ENOENT;  // nothing to keep
    const bool synced = ::fsync(fd) == 0;
    return ::close(fd) == 0 && synced;
  };
  bool all = true;
  for (const std::string& path : paths) {
    const std::string folder = std::filesystem::path(path).parent_path().string();
    all = sync(path, 0) && sync(folder.empty() ? "." : folder, O_DIRECTORY) && all;
  }
  return all;
}

std::string safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  AG_CHECK(!metadata.contains(kChecksumKey), "save_safetensors: metadata key '{}' is reserved", kChecksumKey);
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = nlohmann::ordered_json::object();
  for (const auto& [key, value] : metadata) header["__metadata__"][key] = value;
  std::set<std::string> names;
  size_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    AG_CHECK(tensor.defined(), "save_safetensors: tensor '{}' is undefined", name);
    AG_CHECK(name != "__metadata__" && names.insert(name).second,
             "save_safetensors: tensor name '{}' is reserved or repeated", name);
    const size_t bytes = static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype());
    header[name] = {{"dtype", safetensors_dtype(tensor.dtype())},
                    {"shape", tensor.shape()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string data;
  data.reserve(offset);
  for (const auto& [name, tensor] : tensors)
    data.append(static_cast<const char*>(tensor.raw_data()), tensor.numel() * dtype_size(tensor.dtype()));
  header["__metadata__"][kChecksumKey] = checksum(nlohmann::json(header), data);  // keys sorted, as a reader sees them
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  const uint64_t length = json.size();
  std::memcpy(file.data(), &length, 8);
  file += json;
  file += data;
  return file;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomically(path, safetensors_bytes(tensors, metadata));
}

SafetensorsFile load_safetensors(const std::string& path) { return parse_safetensors(read_whole_file(path), path); }

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& path) {
  AG_CHECK(bytes.size() >= 8, "{}: not a safetensors file: {} bytes, shorter than the 8-byte header length", path,
           bytes.size());
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  AG_CHECK(length <= bytes.size() - 8, "{}: header length {} runs past the end of the {}-byte file (truncated?)", path,
           length, bytes.size());
  const std::string_view header_text = bytes.substr(8, length);
  // The JSON parser would stop at a NUL and ignore the rest: a damaged padding byte must not pass.
  AG_CHECK(header_text.find('\0') == std::string_view::npos, "{}: the file is corrupt: a NUL byte in its header", path);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: the header is not valid JSON: {}", path, e.what());
  }
  AG_CHECK(header.is_object(), "{}: the header is not a JSON object", path);
  const std::string_view data(bytes.data() + 8 + length, bytes.size() - 8 - length);
  SafetensorsFile file;
  file.checksummed = verify_checksum(path, header, data);
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  std::vector<std::pair<uint64_t, std::pair<std::string, Tensor>>> by_offset;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      AG_CHECK(entry.is_object(), "{}: __metadata__ is not an object", path);
      for (const auto& [key, value] : entry.items()) {
        AG_CHECK(value.is_string(), "{}: metadata '{}' is not a string", path, key);
        if (key != kChecksumKey) file.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    AG_CHECK(entry.is_object() && entry.contains("dtype") && entry.contains("shape") &&
                 entry.contains("data_offsets") && entry["dtype"].is_string() && entry["shape"].is_array() &&
                 entry["data_offsets"].is_array() && entry["data_offsets"].size() == 2,
             "{}: tensor '{}' needs dtype (string), shape (array) and data_offsets ([begin, end])", path, name);
    const DType dtype = parse_dtype(path, name, entry["dtype"].get<std::string>());
    Shape shape;
    uint64_t count = 1;
    for (const auto& size : entry["shape"]) {
      AG_CHECK(size.is_number_unsigned() && size.get<uint64_t>() < (uint64_t{1} << 40),
               "{}: tensor '{}' has an invalid size in its shape {}", path, name, entry["shape"].dump());
      shape.push_back(size.get<int64_t>());
      count *= size.get<uint64_t>();
      AG_CHECK(count < (uint64_t{1} << 40), "{}: tensor '{}' is impossibly large", path, name);
    }
    const auto& offsets = entry["data_offsets"];
    AG_CHECK(offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned(),
             "{}: tensor '{}' has non-integer data_offsets", path, name);
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    AG_CHECK(begin <= end && end <= data.size(), "{}: tensor '{}' data_offsets [{}, {}] lie outside the {} data bytes",
             path, name, begin, end, data.size());
    AG_CHECK(end - begin == count * dtype_size(dtype),
             "{}: tensor '{}' of shape {} {} needs {} bytes, but data_offsets span {}", path, name, shape_str(shape),
             dtype_name(dtype), count * dtype_size(dtype), end - begin);
    Tensor tensor = empty(shape, dtype);
    std::memcpy(tensor.raw_data(), data.data() + begin, end - begin);
    if (dtype == DType::b8) {
      for (uint64_t i = 0; i < count; ++i)
        AG_CHECK(static_cast<unsigned char>(data[begin + i]) <= 1, "{}: tensor '{}' has a BOOL byte that is not 0 or 1",
                 path, name);
    }
    spans.emplace_back(begin, end);
    by_offset.push_back({begin, {name, std::move(tensor)}});
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    AG_CHECK(spans[i].first >= spans[i - 1].second, "{}: two tensors' data overlap", path);
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [offset, named] : by_offset) file.tensors.push_back(std::move(named));
  return file;
}

}  // namespace ag
