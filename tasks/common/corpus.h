// Where the real corpora live: the data cache that tools/fetch_data.sh fills from the npm
// registry ($ATTOGRAD_DATA_DIR, else ${XDG_CACHE_HOME:-~/.cache}/attograd).
#pragma once

#include <string>

namespace ag::tasks {

std::string data_cache_dir();

// The cached corpus file `name` ("moby-dick.txt", "uci-sentiment/amazon.json"); an error saying
// how to fetch it, or how to proceed offline, if it is not there.
std::string corpus_path(const std::string& name);

}  // namespace ag::tasks
