#!/bin/sh
# Generate ./configure from configure.ac and the Makefile.am files.
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
autoreconf --install --force
