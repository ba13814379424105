#!/usr/bin/env bash
# Builds what a machine without Swift installs ckport from, into OUTDIR (default dist/, which git
# ignores):
#
#   ckport-VERSION-linux-ARCH.tar.gz          bin/ckport, man pages, shell completions, the
#   ckport-VERSION-linux-ARCH.tar.gz.sha256   nightly job's systemd units, README, CHANGELOG,
#                                             LICENSE; its SHA-256 (sha256sum -c reads it)
#   ckport_VERSION_DEBARCH.deb                the same in Debian's places, Depends: computed
#                                             from the binary by dpkg-shlibdeps
#   ckport-VERSION-linux-ARCH.debug           the binary's debug information, split off
#
#   scripts/release.sh [OUTDIR]
#
# The binary is a release build with the Swift runtime linked in (--static-swift-stdlib): it
# needs only the system's libraries (SQLite, libxml2, zlib, ISA-L, libcurl for Foundation's
# networking, libstdc++), never the toolchain's. Building needs, beside Swift, the -dev packages
# README names and libcurl4-openssl-dev (the static Foundation links libcurl), dpkg-dev and
# binutils; the script says which are missing. The man pages come from the command tree itself
# (swift-argument-parser's generate-manual), so they say what --help says.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${1:-dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)

missing=()
for package in libcurl4-openssl-dev dpkg-dev binutils libsqlite3-dev libxml2-dev zlib1g-dev; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "error: building a release needs ${missing[*]} (apt-get install ${missing[*]})" >&2
  exit 1
fi
if ! command -v swift >/dev/null && [ -x /opt/swift/usr/bin/swift ]; then export PATH="/opt/swift/usr/bin:$PATH"; fi

version=$(sed -n 's/.*public static let current = "\(.*\)".*/\1/p' Sources/Records/Version.swift)
[ -n "$version" ] || { echo "error: no version in Sources/Records/Version.swift" >&2; exit 1; }
arch=$(uname -m)
debarch=$(dpkg --print-architecture)
commit=$(git rev-parse HEAD 2>/dev/null || echo "")
[ -z "$commit" ] || [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit (with changes not committed)"
name=ckport-$version-linux-$arch
work=$(mktemp -d)
info=Sources/ckport/Support/BuildCommit.swift
cp "$info" "$work/BuildCommit.swift"
restore() { cp "$work/BuildCommit.swift" "$root/$info"; rm -rf "$work"; }
trap restore EXIT

# The commit goes into --version for this build only; the file is put back after.
if [ -n "$commit" ]; then
  printf '/// The commit this ckport was built from (written by scripts/release.sh for its build).\nenum BuildCommit {\n    static let commit: String? = "%s"\n}\n' "$commit" > "$info"
fi
echo "building ckport $version (release, the Swift runtime linked in; a first build takes several minutes)…"
swift build -c release --static-swift-stdlib --product ckport
built="$(swift build -c release --static-swift-stdlib --show-bin-path)/ckport"
cp "$info" "$work/BuildCommit.release.swift"
cp "$work/BuildCommit.swift" "$info"

# Nothing of the toolchain at run time.
if ldd "$built" | grep -E '/opt/swift|libswift|libFoundation|libdispatch|libBlocksRuntime' >/dev/null; then
  echo "error: the binary needs libraries of the Swift toolchain:" >&2
  ldd "$built" | grep -E '/opt/swift|libswift|libFoundation|libdispatch|libBlocksRuntime' >&2
  exit 1
fi

stage=$work/$name
mkdir -p "$stage/bin" "$stage/share/man/man1" "$stage/share/bash-completion/completions" "$stage/share/zsh/site-functions" \
  "$stage/share/fish/vendor_completions.d" "$stage/lib/systemd/system" "$stage/lib/ckport" "$stage/etc/ckport"
cp "$built" "$stage/bin/ckport"
objcopy --only-keep-debug "$stage/bin/ckport" "$out/$name.debug"
strip --strip-debug --strip-unneeded "$stage/bin/ckport"
objcopy --add-gnu-debuglink="$out/$name.debug" "$stage/bin/ckport"

# Man pages, one per command, from the command tree (the debug build is enough to read it).
echo "man pages…"
manuals=$work/manuals
swift build --product ckport >/dev/null
swift package plugin --allow-writing-to-directory "$manuals" generate-manual --configuration debug --multi-page \
  --authors "the ckport developers" --section 1 > "$work/manual.log" 2>&1 || { cat "$work/manual.log" >&2; exit 1; }
pages=$(find .build/plugins/GenerateManual/outputs/ckport -name '*.1' 2>/dev/null | sort)
[ -n "$pages" ] || { echo "error: generate-manual wrote no man page" >&2; cat "$work/manual.log" >&2; exit 1; }
# generate-manual names a subcommand's page ckport.schema.import.1; Debian's way is ckport-schema-import(1).
for page in $pages; do base=$(basename "$page" .1); cp "$page" "$stage/share/man/man1/${base//./-}.1"; done
[ -f "$stage/share/man/man1/ckport.1" ] || { echo "error: no ckport.1 among the man pages" >&2; exit 1; }

"$stage/bin/ckport" --generate-completion-script bash > "$stage/share/bash-completion/completions/ckport"
"$stage/bin/ckport" --generate-completion-script zsh > "$stage/share/zsh/site-functions/_ckport"
"$stage/bin/ckport" --generate-completion-script fish > "$stage/share/fish/vendor_completions.d/ckport.fish"
cp packaging/systemd/ckport-nightly.service packaging/systemd/ckport-nightly.timer "$stage/lib/systemd/system/"
install -m 0755 packaging/ckport-nightly "$stage/lib/ckport/ckport-nightly"
cp packaging/nightly.env "$stage/etc/ckport/nightly.env"
cp README.md CHANGELOG.md LICENSE "$stage/"

# The archive: everything under one folder, and its SHA-256.
tar -C "$work" --owner=0 --group=0 --numeric-owner -czf "$out/$name.tar.gz" "$name"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")

# The Debian package: the same files in Debian's places.
deb=$work/deb
mkdir -p "$deb/DEBIAN" "$deb/usr/bin" "$deb/usr/share/man/man1" "$deb/usr/share/bash-completion/completions" \
  "$deb/usr/share/zsh/vendor-completions" "$deb/usr/share/fish/vendor_completions.d" "$deb/lib/systemd/system" \
  "$deb/usr/lib/ckport" "$deb/etc/ckport" "$deb/usr/share/doc/ckport"
install -m 0755 "$stage/bin/ckport" "$deb/usr/bin/ckport"
for page in "$stage"/share/man/man1/*.1; do gzip -9n < "$page" > "$deb/usr/share/man/man1/$(basename "$page").gz"; done
cp "$stage/share/bash-completion/completions/ckport" "$deb/usr/share/bash-completion/completions/ckport"
cp "$stage/share/zsh/site-functions/_ckport" "$deb/usr/share/zsh/vendor-completions/_ckport"
cp "$stage/share/fish/vendor_completions.d/ckport.fish" "$deb/usr/share/fish/vendor_completions.d/ckport.fish"
cp "$stage"/lib/systemd/system/* "$deb/lib/systemd/system/"
install -m 0755 "$stage/lib/ckport/ckport-nightly" "$deb/usr/lib/ckport/ckport-nightly"
cp "$stage/etc/ckport/nightly.env" "$deb/etc/ckport/nightly.env"
cp README.md "$deb/usr/share/doc/ckport/README.md"
gzip -9n < CHANGELOG.md > "$deb/usr/share/doc/ckport/changelog.gz"
{ echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"; echo "Upstream-Name: ckport"; echo;
  echo "Files: *"; echo "License: Apache-2.0"; echo; cat LICENSE; } > "$deb/usr/share/doc/ckport/copyright"
echo "/etc/ckport/nightly.env" > "$deb/DEBIAN/conffiles"
# What the binary links, as Debian's packages that hold those libraries.
mkdir -p "$work/shlibs/debian"
printf 'Source: ckport\n\nPackage: ckport\nArchitecture: any\n' > "$work/shlibs/debian/control"
depends=$(cd "$work/shlibs" && dpkg-shlibdeps -O -e "$deb/usr/bin/ckport" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "error: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -sk "$deb" | cut -f1)
cat > "$deb/DEBIAN/control" <<CONTROL
Package: ckport
Version: $version
Architecture: $debarch
Maintainer: ckport developers <ckport@localhost>
Installed-Size: $size
Depends: $depends
Section: utils
Priority: optional
Description: CloudKit records in and out of a local store
 ckport keeps a CloudKit container's records in a SQLite file or on a PostgreSQL
 server: pull and push through CloudKit Web Services, import and export JSON, CSV,
 iCalendar and xCal, checksummed (optionally encrypted) backup bundles, and
 schema migrations rehearsed record by record. A systemd timer runs the nightly
 pull and backup (ckport-nightly.timer, settings in /etc/ckport/nightly.env).
CONTROL
dpkg-deb --root-owner-group --build "$deb" "$out/ckport_${version}_${debarch}.deb" >/dev/null

echo "wrote:"
(cd "$out" && ls -l "$name.tar.gz" "$name.tar.gz.sha256" "ckport_${version}_${debarch}.deb" "$name.debug" | awk '{print "  " $5 "  " $9}')
(cd "$out" && sha256sum -c "$name.tar.gz.sha256")
