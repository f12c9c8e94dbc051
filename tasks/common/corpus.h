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

// The pinned SHA-256 of a cached corpus file (the same as tools/fetch_data.sh's; a test keeps the
// two equal), or "" for a name that is not pinned.
std::string pinned_sha256(const std::string& name);

// The bytes of the cached corpus file `name` (corpus_path), checked against its pinned SHA-256
// every time it is read (a few milliseconds: 4.7 MB for the largest): a damaged or edited copy is
// refused, saying how to fetch it again, so no figure is ever reported beside reference points
// that belong to the real data.
std::string read_corpus(const std::string& name);

}  // namespace ag::tasks
