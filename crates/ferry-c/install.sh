#!/bin/sh
# Builds libferry (the C ABI) and installs it under PREFIX (default
# /usr/local):
#   lib/libferry.so.0 (the SONAME), lib/libferry.so -> libferry.so.0,
#   lib/libferry.a, include/ferry.h (and ferry.hpp, its C++11 wrapper),
#   lib/pkgconfig/ferry.pc
# so that `cc prog.c $(pkg-config --cflags --libs ferry)` builds against it.
#
#   crates/ferry-c/install.sh [PREFIX]
#
# FERRY_LIB_DIR names a directory that already holds cargo's
# libferry_c.so and libferry_c.a (then nothing is built).
set -eu
prefix=${1:-/usr/local}
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${FERRY_LIB_DIR:-}" ]; then
    cargo build --release -p ferry-c --manifest-path "$here/Cargo.toml"
    target=${CARGO_TARGET_DIR:-$here/../../target}
    FERRY_LIB_DIR=$target/release
fi
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
prefix=$(cd "$prefix" && pwd)
cp "$FERRY_LIB_DIR/libferry_c.so" "$prefix/lib/libferry.so.0.tmp"
mv -f "$prefix/lib/libferry.so.0.tmp" "$prefix/lib/libferry.so.0"
ln -sf libferry.so.0 "$prefix/lib/libferry.so"
cp "$FERRY_LIB_DIR/libferry_c.a" "$prefix/lib/libferry.a"
cp "$here/include/ferry.h" "$prefix/include/ferry.h"
cp "$here/include/ferry.hpp" "$prefix/include/ferry.hpp"
cat > "$prefix/lib/pkgconfig/ferry.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: ferry
Description: messages between processes on one machine through shared memory
Version: 0.1.0
Cflags: -I\${includedir}
Libs: -L\${libdir} -lferry
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
PC
echo "installed libferry under $prefix"
