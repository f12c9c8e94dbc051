#!/usr/bin/env bash
# `cmake --install` of a build into a temporary prefix, then tests/install (a project of its own)
# configured with find_package(attograd CONFIG REQUIRED), built, and run: it defines logcosh as an
# ag::Function, registers it and gradchecks it (the table `attograd gradcheck` prints, and
# EXPECT_GRADCHECK under GoogleTest, which must be found); and pronounces words with the shipped G2P
# model through ag::g2p::Pronouncer. Also checks the installed program and
# pkg-config file.
#   install_test.sh BUILD_DIR
set -euo pipefail
build="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for file in include/attograd/attograd.h include/attograd/engine/tensor.h include/attograd/engine/function.h \
  include/attograd/engine/testing/gradcheck_gtest.h include/attograd/nn/module.h include/attograd/seeds/seed004.h include/attograd/tasks/g2p/pronouncer.h \
  lib/cmake/attograd/attogradConfig.cmake lib/cmake/attograd/attogradConfigVersion.cmake \
  lib/pkgconfig/attograd.pc bin/attograd; do
  [ -e "$prefix/$file" ] || { echo "install: $file is missing"; exit 1; }
done
"$prefix/bin/attograd" --version >/dev/null
found=no  # pkg-config's include path leads to the umbrella header
for flag in $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags-only-I attograd); do
  [ -f "${flag#-I}/attograd/attograd.h" ] && found=yes
done
[ "$found" = yes ] || { echo "install: pkg-config's -I flags do not lead to attograd/attograd.h"; exit 1; }
cmake -S "$root/tests/install" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/consumer" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
[ -x "$work/consumer/logcosh_gtest" ] || { echo "install: the consumer found no GoogleTest (libgtest-dev)"; exit 1; }
"$work/consumer/logcosh_op"
"$work/consumer/logcosh_gtest" --gtest_brief=1
"$work/consumer/pronounce"
echo "install: the consumer built against $prefix; its op passed and it pronounced words"
