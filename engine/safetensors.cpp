#include "engine/safetensors.h"

#include <xxhash.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "engine/hash.h"
#include "engine/io.h"
#include "engine/json.h"

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
    case DType::bf16:
      return "BF16";
  }
  return "?";
}

DType parse_dtype(const std::string& path, const std::string& name, const std::string& text) {
  if (text == "F32") return DType::f32;
  if (text == "F64") return DType::f64;
  if (text == "I64") return DType::i64;
  if (text == "BOOL") return DType::b8;
  if (text == "BF16") return DType::bf16;
  fail("{}: tensor '{}' has dtype '{}'; expected one of F32, F64, I64, BOOL, BF16", path, name, text);
}

constexpr const char* kChecksumKey = "attograd_checksum";
// As the safetensors library's own reader: a longer header is damage or an attack, not a model.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// attograd's checksum covers the header as canonical JSON (sorted keys, no padding, without the
// checksum itself), then the data section, so a damaged shape or metadata value is caught as well
// as damaged data. attograd writes XXH3-64 (xxhash: GB/s, so a checkpoint every epoch costs no
// hashing time; FNV-1a's byte-at-a-time loop took a tenth of a small model's training run). It
// still reads FNV-1a 64, which older files and tools/golden/golden.py's carry.
class Checksum {
 public:
  static Checksum for_writing() { return Checksum(Algorithm::xxh3_64); }
  // For verifying `stored`, the text a file carries: its prefix names the algorithm.
  static Checksum for_stored(const std::string& stored, const std::string& path) {
    if (stored.starts_with("xxh3_64:")) return Checksum(Algorithm::xxh3_64);
    if (stored.starts_with("fnv1a64:")) return Checksum(Algorithm::fnv1a64);
    fail(
        "{}: the file is corrupt: its checksum \"{:.40}\" names no algorithm attograd knows (expected "
        "\"xxh3_64:\" or \"fnv1a64:\" and 16 hex digits)",
        path, stored);
  }

  void add(std::string_view bytes) {
    if (algorithm_ == Algorithm::fnv1a64)
      fnv_ = fnv1a64(bytes, fnv_);
    else
      XXH3_64bits_update(xxh3_.get(), bytes.data(), bytes.size());
  }
  std::string text() const {
    if (algorithm_ == Algorithm::fnv1a64) return fmt::format("fnv1a64:{:016x}", fnv_);
    return fmt::format("xxh3_64:{:016x}", XXH3_64bits_digest(xxh3_.get()));
  }

 private:
  enum class Algorithm { xxh3_64, fnv1a64 };
  explicit Checksum(Algorithm algorithm) : algorithm_(algorithm) {
    if (algorithm != Algorithm::xxh3_64) return;
    xxh3_.reset(XXH3_createState());
    AG_CHECK(xxh3_ != nullptr, "safetensors checksum: out of memory");
    XXH3_64bits_reset(xxh3_.get());
  }

  struct FreeState {
    void operator()(XXH3_state_t* state) const { XXH3_freeState(state); }
  };
  Algorithm algorithm_;
  uint64_t fnv_ = kFnv1a64OffsetBasis;
  std::unique_ptr<XXH3_state_t, FreeState> xxh3_;
};

// The header length the first 8 bytes give, checked against the file's size before anything
// else is read.
uint64_t header_length(std::string_view first_bytes, uint64_t file_bytes, const std::string& path) {
  AG_CHECK(file_bytes >= 8, "{}: not a safetensors file: {} bytes, shorter than the 8-byte header length", path,
           file_bytes);
  uint64_t length = 0;
  std::memcpy(&length, first_bytes.data(), 8);
  AG_CHECK(length >= 2, "{}: not a safetensors file: its header length is {}, too short for a JSON object", path,
           length);
  AG_CHECK(length <= file_bytes - 8, "{}: header length {} runs past the end of the {}-byte file (truncated?)", path,
           length, file_bytes);
  AG_CHECK(length <= kMaxHeaderBytes, "{}: header length {} is over the {} bytes a safetensors header may have", path,
           length, kMaxHeaderBytes);
  return length;
}

struct TensorEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;  // in the data section
};

// What the JSON header says, checked against the format's rules: each tensor's bytes match its
// shape and dtype, and the tensors tile the data section from 0 without gaps or overlaps.
struct Header {
  std::vector<TensorEntry> tensors;  // in the order of their data
  std::map<std::string, std::string> metadata;
  uint64_t data_bytes = 0;              // the data section's size
  std::optional<std::string> checksum;  // attograd's, if the writer stored one
  std::string canonical;                // the header without the checksum, as hashed, when there is one
};

TensorEntry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& entry) {
  AG_CHECK(entry.is_object() && entry.contains("dtype") && entry.contains("shape") && entry.contains("data_offsets") &&
               entry["dtype"].is_string() && entry["shape"].is_array() && entry["data_offsets"].is_array() &&
               entry["data_offsets"].size() == 2,
           "{}: tensor '{}' needs dtype (string), shape (array) and data_offsets ([begin, end])", path, name);
  TensorEntry tensor{name, parse_dtype(path, name, entry["dtype"].get<std::string>()), {}, 0, 0};
  for (const auto& size : entry["shape"]) {
    AG_CHECK(size.is_number_unsigned() && size.get<uint64_t>() <= uint64_t{INT64_MAX},
             "{}: tensor '{}' has an invalid size in its shape {:.100} (expected non-negative integers)", path, name,
             entry["shape"].dump());
    tensor.shape.push_back(size.get<int64_t>());
  }
  const auto& offsets = entry["data_offsets"];
  AG_CHECK(offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned(),
           "{}: tensor '{}' has non-integer data_offsets (expected [begin, end] byte offsets)", path, name);
  tensor.begin = offsets[0].get<uint64_t>();
  tensor.end = offsets[1].get<uint64_t>();
  AG_CHECK(tensor.begin <= tensor.end, "{}: tensor '{}' has data_offsets [{}, {}] that end before they begin", path,
           name, tensor.begin, tensor.end);
  uint64_t bytes = 0;
  try {
    AG_CHECK(!__builtin_mul_overflow(static_cast<uint64_t>(numel(tensor.shape)), dtype_size(tensor.dtype), &bytes),
             "too many bytes");
  } catch (const Error&) {
    fail("{}: tensor '{}' has shape {}: more elements than a tensor can hold", path, name, shape_str(tensor.shape));
  }
  AG_CHECK(tensor.end - tensor.begin == bytes,
           "{}: tensor '{}' of shape {} {} needs {} bytes, but data_offsets span {}", path, name,
           shape_str(tensor.shape), dtype_name(tensor.dtype), bytes, tensor.end - tensor.begin);
  return tensor;
}

Header parse_header(std::string_view text, const std::string& path) {
  // The JSON parser would stop at a NUL and ignore the rest: a damaged padding byte must not pass.
  AG_CHECK(text.find('\0') == std::string_view::npos, "{}: the file is corrupt: a NUL byte in its header", path);
  nlohmann::json json = parse_json(text, fmt::format("{}: the header", path));
  AG_CHECK(json.is_object(), "{}: the header is not a JSON object", path);
  Header header;
  for (const auto& [name, entry] : json.items()) {
    if (name == "__metadata__") {
      AG_CHECK(entry.is_object(), "{}: __metadata__ is not an object", path);
      for (const auto& [key, value] : entry.items()) {
        AG_CHECK(value.is_string(), "{}: metadata '{}' is not a string", path, key);
        if (key == kChecksumKey)
          header.checksum = value.get<std::string>();
        else
          header.metadata[key] = value.get<std::string>();
      }
    } else {
      header.tensors.push_back(parse_entry(path, name, entry));
    }
  }
  std::stable_sort(header.tensors.begin(), header.tensors.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  const TensorEntry* previous = nullptr;
  for (const TensorEntry& tensor : header.tensors) {
    AG_CHECK(tensor.begin >= header.data_bytes, "{}: tensors '{}' and '{}' share data bytes", path, previous->name,
             tensor.name);
    AG_CHECK(tensor.begin == header.data_bytes,
             "{}: a gap of {} bytes no tensor covers before tensor '{}' (data_offsets must tile the data)", path,
             tensor.begin - header.data_bytes, tensor.name);
    header.data_bytes = tensor.end;
    previous = &tensor;
  }
  if (header.checksum) {
    json["__metadata__"].erase(kChecksumKey);  // hashed as the writer did, before adding it
    try {
      header.canonical = json.dump();
    } catch (const nlohmann::json::exception& e) {  // e.g. invalid UTF-8 in a string
      fail("{}: the file is corrupt: its header cannot be re-encoded: {}", path, json_error_text(e));
    }
  }
  return header;
}

// Fills the header's tensors with `read(destination, begin, size)` from the data section, checks
// BOOL bytes and the checksum.
template <typename Read>
SafetensorsFile read_tensors(const Header& header, const std::string& path, Read&& read) {
  SafetensorsFile file;
  file.metadata = header.metadata;
  std::optional<Checksum> checksum;
  if (header.checksum) {
    checksum = Checksum::for_stored(*header.checksum, path);
    checksum->add(header.canonical);
  }
  for (const TensorEntry& entry : header.tensors) {
    Tensor tensor = empty(entry.shape, entry.dtype);
    char* bytes = static_cast<char*>(tensor.raw_data());
    const uint64_t size = entry.end - entry.begin;
    read(bytes, entry.begin, size);
    if (checksum) checksum->add(std::string_view(bytes, size));
    if (entry.dtype == DType::b8) {
      for (uint64_t i = 0; i < size; ++i)
        AG_CHECK(static_cast<unsigned char>(bytes[i]) <= 1, "{}: tensor '{}' has a BOOL byte that is not 0 or 1", path,
                 entry.name);
    }
    file.tensors.emplace_back(entry.name, std::move(tensor));
  }
  if (checksum) {
    const std::string content = checksum->text();
    AG_CHECK(*header.checksum == content,
             "{}: the file is corrupt: its checksum is \"{:.40}\", its content hashes to {} (damaged on disk or in "
             "transfer?)",
             path, *header.checksum, content);
    file.checksummed = true;
  }
  return file;
}

// The data section must be exactly what the header describes.
void check_data_size(uint64_t data_bytes, const Header& header, const std::string& path) {
  AG_CHECK(data_bytes >= header.data_bytes, "{}: the file is truncated: its tensors need {} data bytes, it has {}",
           path, header.data_bytes, data_bytes);
  AG_CHECK(data_bytes == header.data_bytes, "{}: {} bytes after the last tensor that the header does not describe",
           path, data_bytes - header.data_bytes);
}

}  // namespace

namespace {

std::string_view raw_bytes(const Tensor& tensor) {
  return {static_cast<const char*>(tensor.raw_data()),
          static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype())};
}

}  // namespace

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
  // Keys sorted, as a reader sees them.
  Checksum checksum = Checksum::for_writing();
  checksum.add(nlohmann::json(header).dump());
  for (const auto& [name, tensor] : tensors) checksum.add(raw_bytes(tensor));
  header["__metadata__"][kChecksumKey] = checksum.text();
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  const uint64_t length = json.size();
  std::memcpy(file.data(), &length, 8);
  file.reserve(8 + json.size() + offset);
  file += json;
  for (const auto& [name, tensor] : tensors) file += raw_bytes(tensor);
  return file;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomically(path, safetensors_bytes(tensors, metadata));
}

SafetensorsFile load_safetensors(const std::string& path) {
  AG_CHECK(!path.empty(), "load_safetensors: the file name is empty");
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  AG_CHECK(!std::filesystem::is_directory(status), "{}: is a directory, expected a safetensors file", path);
  // Before opening: opening a FIFO would block.
  AG_CHECK(!std::filesystem::exists(status) || std::filesystem::is_regular_file(status),
           "{}: is not a regular file, expected a safetensors file", path);
  std::ifstream in(path, std::ios::binary);
  AG_CHECK(in.good(), "{}: cannot open for reading: {}", path, std::strerror(errno));
  note_input(path);  // Note [inputs are not outputs]
  in.seekg(0, std::ios::end);
  const std::streamoff end = in.tellg();
  AG_CHECK(end >= 0, "{}: cannot find the file's size", path);
  const auto file_bytes = static_cast<uint64_t>(end);
  // Reads exactly `size` bytes at `offset` of the file.
  const auto read = [&](char* out, uint64_t offset, uint64_t size) {
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(out, static_cast<std::streamsize>(size));
    AG_CHECK(in.gcount() == static_cast<std::streamsize>(size), "{}: read failed at byte {} (did the file change?)",
             path, offset);
  };
  std::string first(8, '\0');
  if (file_bytes >= 8) read(first.data(), 0, 8);
  const uint64_t length = header_length(first, file_bytes, path);
  std::string text(length, '\0');
  read(text.data(), 8, length);
  const Header header = parse_header(text, path);
  check_data_size(file_bytes - 8 - length, header, path);
  return read_tensors(header, path,
                      [&](char* out, uint64_t begin, uint64_t size) { read(out, 8 + length + begin, size); });
}

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& path) {
  const uint64_t length = header_length(bytes, bytes.size(), path);
  const Header header = parse_header(bytes.substr(8, length), path);
  const std::string_view data = bytes.substr(8 + length);
  check_data_size(data.size(), header, path);
  return read_tensors(header, path,
                      [&](char* out, uint64_t begin, uint64_t size) { std::memcpy(out, data.data() + begin, size); });
}

}  // namespace ag
