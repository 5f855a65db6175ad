#!/usr/bin/env bash
# Builds docker/Dockerfile as localhost/goro-demo:latest with podman, in Docker's format
# (podman drops HEALTHCHECK from OCI images), making the base images debian:bookworm(-slim)
# first where they are missing (docker/make-base-image.sh). Layers are cached between
# runs, so a second build with unchanged sources takes seconds. Used by docker/smoke.sh
# and tests/deploy/kube_test.sh; run as root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}
image=${GORO_IMAGE:-localhost/goro-demo:latest}

start=$SECONDS
"$here/make-base-image.sh"
echo "== podman build --format docker -f docker/Dockerfile -t $image $root"
podman build --format docker -f "$here/Dockerfile" -t "$image" "$root"
echo "== image built in $((SECONDS - start)) s"
podman image ls "$image"
