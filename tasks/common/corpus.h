// Where the real corpora live: the data cache that tools/fetch_data.sh fills from the npm
// registry ($ATTOGRAD_DATA_DIR, else ${XDG_CACHE_HOME:-~/.cache}/attograd).
#pragma once

#include <string>
#include <string_view>

namespace ag::tasks {

std::string data_cache_dir();

// The cached corpus file `name` ("moby-dick.txt", "uci-sentiment/amazon.json"); an error saying
// how to fetch it, or how to proceed offline, if it is not there.
std::string corpus_path(const std::string& name);

// The SHA-256 of `bytes` as 64 lower-case hex digits (OpenSSL), to check a corpus when it is read.
std::string sha256_hex(std::string_view bytes);

}  // namespace ag::tasks
