# shellcheck shell=bash
# Sourced by the container scripts: podman with the project's settings (CONTAINERS_CONF, not
# /etc), and the local image names. Not named *_test.sh: CTest registers only those.
containers_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export CONTAINERS_CONF="$containers_dir/containers.conf"
# The base every image starts from (the Dockerfile's FROM), made by tests/containers/base.sh.
readonly kBaseImage="docker.io/library/debian:12"
# The chart's default nats image (charts/mesh-reconciler/values.yaml nats.image), which the
# stand-in of tests/containers/nats-image.sh takes the name of.
readonly kNatsImage="docker.io/library/nats:2.10.27-alpine"
# The chart's default reconciler image (appVersion), built from the Dockerfile.
readonly kReconcilerImage="localhost/mesh-reconciler:0.1.0"
