#!/usr/bin/env bash
# Installs the release on machines without Swift and uses it there, as a user would:
#
#   scripts/package-check.sh [DIST]     (default dist/, what scripts/release.sh wrote)
#
# - The archive's SHA-256 file verifies with sha256sum -c, and `ldd bin/ckport` names no library
#   of the Swift toolchain.
# - A minimal Debian root (debootstrap --variant=minbase, from Debian's own mirror) with no
#   Swift in it installs the .deb with apt, and in it `ckport --version`, `man ckport`, and the
#   quick start's import, export, backup, verify and restore on a sample work, and
#   `systemd-analyze verify` passes on the nightly job's units as the package installed them
#   (with systemd from Debian in that root). `dpkg -r` then
#   removes every file the package installed but its settings file (a conffile, which Debian
#   keeps until a purge), and `dpkg --purge` that one too.
#
# Needs root (debootstrap, chroot) and debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."
dist=$(cd "${1:-dist}" && pwd)
version=$(sed -n 's/.*public static let current = "\(.*\)".*/\1/p' Sources/Records/Version.swift)
name=ckport-$version-linux-$(uname -m)
deb=$dist/ckport_${version}_$(dpkg --print-architecture).deb
for file in "$dist/$name.tar.gz" "$dist/$name.tar.gz.sha256" "$deb"; do
  [ -f "$file" ] || { echo "error: $file is missing: run scripts/release.sh first" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "error: run as root (debootstrap and chroot)" >&2; exit 1; }
for tool in debootstrap; do
  command -v "$tool" >/dev/null || { echo "error: $tool is not installed (apt-get install $tool)" >&2; exit 1; }
done
fail() { echo "package check failed: $*" >&2; exit 1; }

work=$(mktemp -d)
cleanup() {
  for mount in proc dev/pts dev sys; do umount -l "$work/root/$mount" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

echo "== the archive"
(cd "$dist" && sha256sum -c "$name.tar.gz.sha256") || fail "the SHA-256 file does not verify"
tar -C "$work" -xzf "$dist/$name.tar.gz"
archive=$work/$name
for path in bin/ckport share/man/man1/ckport.1 share/man/man1/ckport-backup.1 share/bash-completion/completions/ckport \
            share/zsh/site-functions/_ckport share/fish/vendor_completions.d/ckport.fish lib/systemd/system/ckport-nightly.service \
            lib/systemd/system/ckport-nightly.timer lib/ckport/ckport-nightly etc/ckport/nightly.env README.md CHANGELOG.md LICENSE; do
  [ -e "$archive/$path" ] || fail "the archive has no $path"
done
if ldd "$archive/bin/ckport" | grep -E '/opt/swift|libswift|libFoundation|libdispatch|libBlocksRuntime'; then
  fail "bin/ckport needs libraries of the Swift toolchain"
fi
env -i "$archive/bin/ckport" --version | head -1 | grep -qx "ckport $version" || fail "bin/ckport --version, with an empty environment"

echo "== a Debian root without Swift"
debootstrap --variant=minbase "$(. /etc/os-release && echo "$VERSION_CODENAME")" "$work/root" http://deb.debian.org/debian > "$work/debootstrap.log" 2>&1 \
  || { tail -20 "$work/debootstrap.log" >&2; fail "debootstrap"; }
root=$work/root
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
mount -t sysfs sys "$root/sys"
cp /etc/resolv.conf "$root/etc/resolv.conf"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
[ ! -e "$root/opt/swift" ] && ! in_root sh -c 'command -v swift' >/dev/null || fail "the root has Swift"
cp "$deb" "$root/tmp/ckport.deb"
mkdir -p "$root/tmp/quick"
cp samples/family-todo/schema.ckdb samples/family-todo/records.jsonl "$root/tmp/quick/"
in_root apt-get update -q > "$work/apt.log" 2>&1 || { tail -20 "$work/apt.log" >&2; fail "apt-get update in the root"; }
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q /tmp/ckport.deb man-db systemd >> "$work/apt.log" 2>&1 \
  || { tail -20 "$work/apt.log" >&2; fail "apt-get install ckport.deb"; }
in_root ckport --version
# The units as the package installed them, with the man pages their Documentation= names.
in_root systemd-analyze verify /lib/systemd/system/ckport-nightly.service /lib/systemd/system/ckport-nightly.timer \
  || fail "systemd-analyze verify"
in_root man -P cat ckport | grep -q "ckport" || fail "man ckport"
in_root man -P cat ckport-backup | grep -qi "bundle" || fail "man ckport-backup"
in_root sh -ec '
  cd /tmp/quick
  ckport import schema.ckdb records.jsonl -q
  ckport export -o tasks.jsonl --type Task -q
  test "$(wc -l < tasks.jsonl)" -eq 46
  ckport backup -o family.ckbundle -q
  ckport verify family.ckbundle
  ckport restore family.ckbundle --store restored.sqlite -q
  ckport export -q > a.jsonl
  ckport export -q --store restored.sqlite > b.jsonl
  cmp a.jsonl b.jsonl
  test "$(wc -l < a.jsonl)" -eq 80
' || fail "the quick start in the root"

echo "== removing it"
in_root dpkg -L ckport > "$work/files"
in_root env DEBIAN_FRONTEND=noninteractive dpkg -r ckport > /dev/null
left=()
while read -r path; do
  [ -d "$root$path" ] && continue
  [ -f "$root$path" ] || [ -L "$root$path" ] || continue
  [ "$path" = /etc/ckport/nightly.env ] || left+=("$path")
done < "$work/files"
[ ${#left[@]} -eq 0 ] || fail "dpkg -r left ${left[*]}"
in_root env DEBIAN_FRONTEND=noninteractive dpkg --purge ckport > /dev/null
[ ! -e "$root/etc/ckport/nightly.env" ] || fail "dpkg --purge left /etc/ckport/nightly.env"
[ ! -e "$root/usr/bin/ckport" ] || fail "/usr/bin/ckport is still there"
echo "package check: the archive, the units and the .deb in a Debian root without Swift are all right"
