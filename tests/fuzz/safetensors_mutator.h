// A structure-aware mutator for safetensors files (the safetensors and run targets' libFuzzer
// LLVMFuzzerCustomMutator). Random bytes almost never get past the JSON parser and never past
// attograd's checksum; this one parses the file, changes one thing a damaged or hostile file
// could change — a shape size, data offsets, a dtype, a tensor name (repeated, removed, renamed),
// nesting, a metadata value (a number or the nesting inside the config's JSON), the header length,
// the data's size, a weight to NaN or Inf — and writes it back with its header length and checksum
// recomputed (most of the time), so the change reaches the checks behind them.
#pragma once

#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "engine/hash.h"

namespace fuzz {

struct SafetensorsParts {
  nlohmann::json header;  // without attograd's checksum
  std::string data;
};

// The header and data of a well-formed file (no checks beyond parsing), or nothing.
inline std::optional<SafetensorsParts> split_safetensors(std::string_view bytes) {
  if (bytes.size() < 8) return std::nullopt;
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  if (length > bytes.size() - 8) return std::nullopt;
  const std::string_view text = bytes.substr(8, length);
  // Nesting is bounded first: the mutator copies and prints what it parsed, which recurses.
  int depth = 0, deepest = 0;
  for (char c : text) {
    depth += (c == '[' || c == '{') - (c == ']' || c == '}');
    deepest = std::max(deepest, depth);
  }
  if (deepest > 32) return std::nullopt;
  nlohmann::json header = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return std::nullopt;
  if (header.contains("__metadata__") && header["__metadata__"].is_object())
    header["__metadata__"].erase("attograd_checksum");
  return SafetensorsParts{std::move(header), std::string(bytes.substr(8 + length))};
}

// The file's bytes, with attograd's checksum over header and data when `checksum`; `splice`
// replaces the entry "__splice__":null in the header text (for what a json value cannot hold:
// repeated keys, nesting too deep to print recursively).
inline std::string join_safetensors(nlohmann::json header, std::string_view data, bool checksum,
                                    const std::string& splice = "") {
  if (checksum && header.contains("__metadata__") && header["__metadata__"].is_object()) {
    const uint64_t hash =
        ag::fnv1a64(data, ag::fnv1a64(header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
    char text[40];
    std::snprintf(text, sizeof text, "fnv1a64:%016llx", static_cast<unsigned long long>(hash));
    header["__metadata__"]["attograd_checksum"] = text;
  }
  std::string json = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::string placeholder = "\"__splice__\":null";
  if (const size_t at = json.find(placeholder); at != std::string::npos) json.replace(at, placeholder.size(), splice);
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  const uint64_t length = json.size();
  std::memcpy(file.data(), &length, 8);
  return file + json + std::string(data);
}

class SafetensorsMutator {
 public:
  explicit SafetensorsMutator(unsigned seed) : rng_(seed) {}

  // One mutation of a well-formed file's bytes; nothing if they are not one (or an earlier
  // mutation left a value of a type the chosen change cannot apply to).
  std::optional<std::string> mutate(std::string_view bytes) {
    try {
      return mutate_parsed(bytes);
    } catch (const nlohmann::json::exception&) {
      return std::nullopt;
    }
  }

 private:
  std::optional<std::string> mutate_parsed(std::string_view bytes) {
    std::optional<SafetensorsParts> parts = split_safetensors(bytes);
    if (!parts) return std::nullopt;
    nlohmann::json& header = parts->header;
    std::string& data = parts->data;
    std::vector<std::string> names;
    for (const auto& [name, _] : header.items())
      if (name != "__metadata__") names.push_back(name);
    std::string splice;
    bool checksum = pick(10) != 0;
    const std::string name = names.empty() ? "t" : names[pick(names.size())];
    nlohmann::json& entry = header[name];
    switch (pick(12)) {
      case 0:  // a shape size
        if (entry.contains("shape") && entry["shape"].is_array() && !entry["shape"].empty())
          entry["shape"][pick(entry["shape"].size())] = interesting();
        else
          entry["shape"] = {interesting()};
        break;
      case 1:  // data offsets
        entry["data_offsets"][pick(2)] = pick(2) ? interesting() : static_cast<uint64_t>(pick(64)) * 4;
        break;
      case 2:
        entry["dtype"] = std::vector<std::string>{"F32", "F64", "I64", "BOOL", "F16", "U8", "", "f32"}[pick(8)];
        break;
      case 3:  // a repeated tensor name
        header["__splice__"] = nullptr;
        splice = "\"" + name + "\":" + entry.dump() + ",\"__x\":0";
        checksum = false;
        break;
      case 4: {  // nesting, around a value or in place of one
        const size_t levels = std::vector<size_t>{2, 33, 63, 64, 65, 1000, 100'000}[pick(7)];
        header["__splice__"] = nullptr;
        splice = "\"deep\":" + std::string(levels, '[') + std::string(levels, ']');
        checksum = false;
        break;
      }
      case 5:
        mutate_metadata(header);
        break;
      case 6:  // a tensor removed, renamed or added
        if (pick(2)) {
          header.erase(name);
        } else {
          header[std::vector<std::string>{"optimizer.x", "__metadata__x", name + "x", ""}[pick(4)]] = entry;
        }
        break;
      case 7:  // bytes after the data, or fewer
        if (pick(2) || data.empty())
          data.append(1 + pick(16), '\0');
        else
          data.resize(data.size() - 1 - pick(std::min<size_t>(data.size(), 16)));
        break;
      case 8:  // a weight that is NaN or infinite
        if (data.size() >= 4) {
          const uint32_t bits = std::vector<uint32_t>{0x7fc00000u, 0x7f800000u, 0xff800000u}[pick(3)];
          std::memcpy(data.data() + 4 * pick(data.size() / 4), &bits, 4);
        }
        break;
      case 9: {  // a garbage header length
        std::string file = join_safetensors(header, data, checksum);
        const uint64_t length = pick(2) ? interesting() : pick(64);
        std::memcpy(file.data(), &length, 8);
        return file;
      }
      default:  // tensors swapped in the data: offsets no longer in header order
        if (names.size() >= 2) std::swap(header[names[0]]["data_offsets"], header[names[1]]["data_offsets"]);
        break;
    }
    return join_safetensors(header, data, checksum, splice);
  }

  size_t pick(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  uint64_t interesting() {
    static const std::vector<uint64_t> values = {0,
                                                 1,
                                                 2,
                                                 3,
                                                 7,
                                                 16,
                                                 255,
                                                 4096,
                                                 200'000,
                                                 1ull << 31,
                                                 1ull << 32,
                                                 (1ull << 32) + 1,
                                                 1ull << 40,
                                                 1ull << 62,
                                                 (1ull << 63) - 1,
                                                 1ull << 63,
                                                 6148914691236517206ull,
                                                 ~0ull,
                                                 ~0ull - 7};
    return values[pick(values.size())];
  }

  // A metadata value, or a number or nesting inside the JSON text of one (the model config).
  void mutate_metadata(nlohmann::json& header) {
    nlohmann::json& metadata = header["__metadata__"];
    if (!metadata.is_object()) metadata = nlohmann::json::object();
    std::vector<std::string> keys;
    for (const auto& [key, _] : metadata.items()) keys.push_back(key);
    const std::string key = keys.empty() ? "config" : keys[pick(keys.size())];
    nlohmann::json value =
        nlohmann::json::parse(metadata[key].is_string() ? metadata[key].get<std::string>() : "", nullptr, false);
    if (pick(4) == 0 || value.is_discarded()) {
      const size_t levels = std::vector<size_t>{10, 64, 65, 100'000}[pick(4)];
      metadata[key] = pick(2) ? std::string(levels, '[') + std::string(levels, ']')
                              : std::vector<std::string>{"", "1", "null", "{}", "[]", "\"x\"", "-1"}[pick(7)];
      return;
    }
    if (value.is_object() && !value.empty()) {
      auto it = value.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(pick(value.size())));
      const nlohmann::json replacements[] = {
          interesting(), -1, 0, 0.5, "x", nullptr, nlohmann::json::array(), nlohmann::json::object(), true};
      *it = replacements[pick(std::size(replacements))];
    } else if (value.is_array() && !value.empty()) {
      value[pick(value.size())] = pick(2) ? nlohmann::json(interesting()) : nlohmann::json("");
    }
    metadata[key] = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  std::mt19937_64 rng_;
};

}  // namespace fuzz
