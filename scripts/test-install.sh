#!/usr/bin/env bash
# kvedge as an embedder sees it (the `install` stage of scripts/test.sh):
#   1. cmake --install of the release build into a temporary prefix: exactly the
#      expected files; libkvedge.so exports exactly kvedge.h's functions
#   2. an out-of-tree CMake consumer (find_package(kvedge 0.2), shared and static),
#      a Makefile consumer (pkg-config) and the Python binding, all built against
#      that prefix with strict C99 and run on the shipped model: the same story
#   3. cpack -G DEB: the three packages hold exactly the expected files, and
#      their Depends name exactly the expected packages
# The commands under "embedder commands" are the README's "Embedding" section.
# Usage: scripts/test-install.sh [BUILD_DIR]   (default build/release; it is configured and the
#        installed targets built if needed). Leaves nothing behind but examples/pkgconfig-consumer/stream.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/release}"
version=$(sed -n 's/^project(kvedge VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
abi=$(sed -n 's/^#define KVEDGE_ABI_VERSION \([0-9]*\)$/\1/p' include/kvedge.h)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "test-install.sh: $*" >&2; exit 1; }
# same_list NAME EXPECTED ACTUAL: both newline-separated; prints a diff and fails if they differ.
same_list() {
  if ! diff <(printf '%s\n' "$2" | sort) <(printf '%s\n' "$3" | sort) >"$work/diff"; then
    echo "test-install.sh: $1 differs from the expected list (< expected, > actual):" >&2
    cat "$work/diff" >&2
    exit 1
  fi
  echo "ok: $1"
}

echo "== build the installed targets ($build)"
if [[ "$build" == build/release && ! -f "$build/CMakeCache.txt" ]]; then cmake --preset release >/dev/null; fi
cmake --build "$build" --target kvedge kvedge_shared kvedge_static >/dev/null || fail "build failed"

echo "== install into a temporary prefix"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
same_list "installed files" "bin/kvedge
include/kvedge.h
lib/cmake/kvedge/kvedgeConfig.cmake
lib/cmake/kvedge/kvedgeConfigVersion.cmake
lib/cmake/kvedge/kvedgeTargets-release.cmake
lib/cmake/kvedge/kvedgeTargets.cmake
lib/libkvedge.a
lib/libkvedge.so
lib/libkvedge.so.$abi
lib/libkvedge.so.$version
lib/pkgconfig/kvedge.pc" "$(cd "$prefix" && find . ! -type d | sed 's|^\./||')"
[[ "$(readelf -d "$prefix/lib/libkvedge.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')" == "libkvedge.so.$abi" ]] ||
  fail "SONAME of libkvedge.so is not libkvedge.so.$abi"
cmake -DNM=nm -DLIBRARY="$prefix/lib/libkvedge.so" -DHEADER="$prefix/include/kvedge.h" -P cmake/check-exports.cmake

echo "== embedder commands: CMake, pkg-config, Python"
# --8<-- embedder commands (README "Embedding")
cmake -S examples/cmake-consumer -B "$work/cmake-consumer" -DCMAKE_PREFIX_PATH="$prefix"
cmake --build "$work/cmake-consumer"
"$work/cmake-consumer/stream" models/stories260K.gguf > "$work/cmake.txt"
"$work/cmake-consumer/stream_static" models/stories260K.gguf > "$work/cmake-static.txt"

make -C examples/pkgconfig-consumer clean
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" make -C examples/pkgconfig-consumer
LD_LIBRARY_PATH="$prefix/lib" examples/pkgconfig-consumer/stream models/stories260K.gguf > "$work/pkgconfig.txt"

PYTHONPATH=bindings/python KVEDGE_LIBRARY="$prefix/lib/libkvedge.so" \
  python3 examples/stream.py models/stories260K.gguf > "$work/python.txt"
# -->8--
make -C examples/pkgconfig-consumer clean >/dev/null
[[ "$(ldd "$work/cmake-consumer/stream")" == *"libkvedge.so.$abi => $prefix/lib/"* ]] ||
  fail "stream does not load the prefix's libkvedge"
[[ "$(ldd "$work/cmake-consumer/stream_static")" != *libkvedge* ]] || fail "stream_static loads libkvedge.so"
[[ "$(head -c 17 "$work/cmake.txt")" == "Once upon a time," ]] ||
  fail "the CMake consumer printed: $(head -c 200 "$work/cmake.txt")"
grep -q "^kvedge $version: 205 tokens seen, " "$work/cmake.txt" || fail "the CMake consumer's stats: $(tail -1 "$work/cmake.txt")"
for out in cmake-static pkgconfig python; do
  cmp -s "$work/cmake.txt" "$work/$out.txt" || fail "$out output differs from the CMake consumer's:
$(diff "$work/cmake.txt" "$work/$out.txt")"
done
echo "ok: the CMake (shared and static), pkg-config and Python embedders print the same story"
tail -n 1 "$work/cmake.txt"

# examples/chat.c: a conversation saved by one run continues in the next.
"$work/cmake-consumer/chat" models/stories260K.gguf "$work/chat.kvs" "Tell me a story" > "$work/chat1.txt" 2>/dev/null
"$work/cmake-consumer/chat" models/stories260K.gguf "$work/chat.kvs" "And then?" > "$work/chat2.txt" 2>/dev/null
grep -q ": 1 messages restored; " "$work/chat1.txt" || fail "chat, first run: $(tail -1 "$work/chat1.txt")"
grep -q ": 3 messages restored; " "$work/chat2.txt" || fail "chat, second run did not restore: $(tail -1 "$work/chat2.txt")"
echo "ok: the C chat example continues its saved conversation after a restart"
tail -n 1 "$work/chat2.txt"

# The README's "Embedding" section shows exactly these commands and examples/stream.py.
while IFS= read -r line; do
  [[ -z "$line" ]] || grep -qxF -- "$line" README.md || fail "README.md lacks the line: $line"
done < <(sed -n '/^# --8<-- embedder commands/,/^# -->8--/{/^#/d;p}' "$0"; tail -n +2 examples/stream.py)
echo "ok: README.md shows these commands and examples/stream.py"

echo "== Debian packages"
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/deb" >/dev/null
# Files (not directories) in a .deb, symlinks as "path -> target".
deb_files() { dpkg -c "$1" | awk '$1 !~ /^d/ { $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print }'; }
# Package names in Depends, versions dropped except an exact "(= V)" pin.
deb_depends() {
  dpkg -f "$1" Depends | tr ',' '\n' | sed -E 's/^ +//; s/ \((>=|>>|<=|<<) [^)]*\)//'
}
arch=$(dpkg --print-architecture)
same_list "kvedge_${version}_$arch.deb files" "./usr/bin/kvedge" "$(deb_files "$work/deb/kvedge_${version}_$arch.deb")"
same_list "libkvedge${abi}_${version}_$arch.deb files" "./usr/lib/libkvedge.so.$abi -> libkvedge.so.$version
./usr/lib/libkvedge.so.$version" "$(deb_files "$work/deb/libkvedge${abi}_${version}_$arch.deb")"
same_list "libkvedge-dev_${version}_$arch.deb files" "./usr/include/kvedge.h
./usr/lib/cmake/kvedge/kvedgeConfig.cmake
./usr/lib/cmake/kvedge/kvedgeConfigVersion.cmake
./usr/lib/cmake/kvedge/kvedgeTargets-release.cmake
./usr/lib/cmake/kvedge/kvedgeTargets.cmake
./usr/lib/libkvedge.a
./usr/lib/libkvedge.so -> libkvedge.so.$abi
./usr/lib/pkgconfig/kvedge.pc" "$(deb_files "$work/deb/libkvedge-dev_${version}_$arch.deb")"
shared_depends="libc6
libgcc-s1
libhwy1
libmimalloc2.0
libpcre2-8-0
libstdc++6
libtbb12"
# The CLI alone links libedit (line editing in kvedge chat) and cpp-httplib (kvedge serve; its
# runtime package is named after its soname version, e.g. libcpp-httplib0.11 on Debian 12).
httplib_pkg=$(dpkg-query -W -f='${Package}\n' 'libcpp-httplib[0-9]*' 2>/dev/null | grep -v -- -dev | head -1)
same_list "kvedge Depends" "$shared_depends
libedit2
$httplib_pkg" "$(deb_depends "$work/deb/kvedge_${version}_$arch.deb")"
same_list "libkvedge$abi Depends" "$shared_depends" "$(deb_depends "$work/deb/libkvedge${abi}_${version}_$arch.deb")"
same_list "libkvedge-dev Depends" "libkvedge$abi (= $version)
libhwy-dev
libtbb-dev
libmimalloc-dev
libpcre2-dev" "$(deb_depends "$work/deb/libkvedge-dev_${version}_$arch.deb")"
shlibs=$(dpkg-deb --ctrl-tarfile "$work/deb/libkvedge${abi}_${version}_$arch.deb" | tar -xO ./shlibs)
[[ "$shlibs" == "libkvedge $abi libkvedge$abi (>= $version)" ]] || fail "libkvedge$abi's shlibs is '$shlibs'"
echo "ok: shlibs of libkvedge$abi"
echo "test-install.sh: all passed"
