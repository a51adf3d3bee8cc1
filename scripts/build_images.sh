#!/usr/bin/env bash
# Builds the Docker images reward-service needs, making the public base images locally when
# they are missing (machines without a registry): debian:bookworm by debootstrap + docker import.
# The Dockerfiles stay standard (FROM debian:bookworm); elsewhere docker pulls the base as usual.
#
#   scripts/build_images.sh            # base images if missing; the simulation, worker and service
#                                      # images are always built (Docker's layer cache makes that quick)
#   FORCE=1 scripts/build_images.sh    # rebuild those three without the layer cache
#
# Images: debian:bookworm (base), redis:7.0-bookworm (pulled, else built from docker/redis on the
# local Debian), reward-service-sim:latest (sim_images/), reward-service-worker:latest
# (docker/worker/Dockerfile: FROM the simulation image, the workers of docker-compose.yml),
# reward-service:latest (Dockerfile: the API).
#
# Behind an intercepting HTTPS proxy the CA certificates of the host's local trust store
# (/usr/local/share/ca-certificates/*.crt) are passed to the build (EXTRA_CA build arg), and
# builds use the host network (--network host) so that the host's apt mirror and proxy apply.
set -euo pipefail
cd "$(dirname "$0")/.."

SIM_IMAGE="${SIM_IMAGE:-reward-service-sim:latest}"
APP_IMAGE="${APP_IMAGE:-reward-service:latest}"
WORKER_IMAGE="${WORKER_IMAGE:-reward-service-worker:latest}"
REDIS_IMAGE="${REDIS_IMAGE:-redis:7.0-bookworm}"
# The host's Debian mirror: the first non-comment URIs:/deb entry that ends in /debian.
MIRROR="${DEBIAN_MIRROR:-$( (grep -rhE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null || true) \
  | grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ')}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"

command -v docker >/dev/null || { echo "build_images: docker not found: install and start Docker Engine first" >&2; exit 1; }
have_image() { docker image inspect "$1" >/dev/null 2>&1; }

if ! have_image debian:bookworm; then
  if docker pull -q debian:bookworm >/dev/null 2>&1; then
    echo "build_images: pulled debian:bookworm" >&2
  else
    echo "build_images: no registry; making debian:bookworm with debootstrap from $MIRROR" >&2
    command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
    rootfs="$(mktemp -d)"
    trap 'rm -rf "$rootfs"' EXIT
    debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >/dev/null
    tar -C "$rootfs" -c . | docker import -c 'CMD ["bash"]' - debian:bookworm >/dev/null
    rm -rf "$rootfs"
    trap - EXIT
  fi
fi

extra_ca=""
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  extra_ca="$(cat /usr/local/share/ca-certificates/*.crt)"
fi

no_cache=()
[ "${FORCE:-0}" = 1 ] && no_cache=(--no-cache)

echo "build_images: building $SIM_IMAGE" >&2
docker build -q "${no_cache[@]}" --network host --build-arg EXTRA_CA="$extra_ca" -t "$SIM_IMAGE" sim_images >/dev/null

# The worker image starts FROM the simulation image just built (no --no-cache needed for that:
# a new base image invalidates every layer above it).
echo "build_images: building $WORKER_IMAGE" >&2
docker build -q "${no_cache[@]}" --network host --build-arg EXTRA_CA="$extra_ca" --build-arg SIM_IMAGE="$SIM_IMAGE" \
  -f docker/worker/Dockerfile -t "$WORKER_IMAGE" . >/dev/null

if ! have_image "$REDIS_IMAGE"; then
  if docker pull -q "$REDIS_IMAGE" >/dev/null 2>&1; then
    echo "build_images: pulled $REDIS_IMAGE" >&2
  else
    echo "build_images: no registry; building $REDIS_IMAGE from docker/redis (Debian's redis-server)" >&2
    docker build -q --network host -t "$REDIS_IMAGE" docker/redis >/dev/null
  fi
fi

echo "build_images: building $APP_IMAGE" >&2
docker build -q "${no_cache[@]}" --network host --build-arg EXTRA_CA="$extra_ca" -t "$APP_IMAGE" . >/dev/null
echo "build_images: ready: debian:bookworm $REDIS_IMAGE $SIM_IMAGE $WORKER_IMAGE $APP_IMAGE" >&2
