#!/usr/bin/env bash
# Creates the container images debian:bookworm and debian:bookworm-slim locally, for
# machines that cannot pull from a container registry: debootstrap (minbase) from the
# Debian mirror this machine's apt already uses, then `podman import`. The slim image is
# the same tree without documentation, manual pages and translations, with dpkg told to
# leave them out of every package installed later, as Debian's own slim image does. Run
# as root. Takes a few minutes.
#
#   docker/make-base-image.sh           # does nothing when both images exist
#   docker/make-base-image.sh --force   # rebuilds them
#
# Needs debootstrap and podman (installed from Debian's packages when missing).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}
image=debian:bookworm
slim=debian:bookworm-slim
force=0
[ "${1:-}" = --force ] && force=1

for tool in debootstrap podman; do
  if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
    echo "make-base-image: installing $tool"
    DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$tool" </dev/null
  fi
done
export PATH=$PATH:/usr/sbin:/sbin

if [ "$force" = 0 ] && podman image exists "$image" && podman image exists "$slim"; then
  echo "make-base-image: $image and $slim exist (use --force to rebuild them)"
  exit 0
fi

# The mirrors apt uses here: deb822 .sources files first, then one-line sources.list.
# Prints "URI SUITE" pairs for Debian's main component.
apt_sources() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
      {
        uris = ""; suites = ""; comps = ""; enabled = 1
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { uris = $i; sub(/^URIs:[ \t]*/, "", uris) }
          if ($i ~ /^Suites:/) { suites = $i; sub(/^Suites:[ \t]*/, "", suites) }
          if ($i ~ /^Components:/) { comps = $i }
          if ($i ~ /^Enabled:[ \t]*no/) { enabled = 0 }
        }
        if (enabled && comps ~ /main/) {
          n = split(uris, u, /[ \t]+/); m = split(suites, s, /[ \t]+/)
          for (a = 1; a <= n; a++) for (b = 1; b <= m; b++) print u[a], s[b]
        }
      }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
      for (c = i + 2; c <= NF; c++) if ($c == "main") print $i, $(i + 1) }' "$f"
  done
}

sources=$(apt_sources | grep -E ' bookworm(-updates|-security|/updates)?$' || true)
mirror=${GORO_DEBIAN_MIRROR:-$(printf '%s\n' "$sources" | awk '$2 == "bookworm" { print $1; exit }')}
mirror=${mirror:-http://deb.debian.org/debian}
echo "make-base-image: mirror $mirror"

rootfs=$(mktemp -d "${TMPDIR:-/tmp}/goro-bookworm-rootfs.XXXXXX")
cleanup() { rm -rf "$rootfs"; }
trap cleanup EXIT

debootstrap --variant=minbase bookworm "$rootfs" "$mirror"

# apt inside the image uses the same mirrors as this machine (bookworm, -updates,
# -security), so it sees the same package versions.
{
  printf '%s\n' "$sources" | while read -r uri suite; do
    [ -n "$uri" ] && echo "deb $uri $suite main"
  done
} >"$rootfs/etc/apt/sources.list"
[ -s "$rootfs/etc/apt/sources.list" ] || echo "deb $mirror bookworm main" >"$rootfs/etc/apt/sources.list"
echo "make-base-image: image sources.list:"
sed 's/^/  /' "$rootfs/etc/apt/sources.list"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*


import_rootfs() {
  tar --numeric-owner -C "$rootfs" -c . | podman import \
    --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$1"
}
import_rootfs "$image"

# The slim variant. The paths are those Debian's slim image leaves out.
slim_paths=(/usr/share/doc /usr/share/man /usr/share/groff /usr/share/info /usr/share/lintian
  /usr/share/linda /usr/share/locale)
{
  for p in "${slim_paths[@]}"; do echo "path-exclude $p/*"; done
  echo "path-include /usr/share/doc/*/copyright"
} >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim"
find "$rootfs/usr/share/doc" -mindepth 1 -not -type d -not -name copyright -delete
for p in "${slim_paths[@]:1}"; do
  [ -d "$rootfs$p" ] && find "$rootfs$p" -mindepth 1 -delete
done
import_rootfs "$slim"
podman image ls "$image"
podman image ls "$slim"
