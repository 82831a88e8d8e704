# mesh-reconciler container image: multi-stage, Debian 12 (bookworm).
#
#   docker build --build-arg MESH_COMMIT="$(git rev-parse --short=12 HEAD)" \
#     -t mesh-reconciler:0.1.0 .
#
# The build context has no .git (.dockerignore): MESH_COMMIT names the commit that --version
# and mesh_reconciler_build_info report ("unknown" without it). MESH_WERROR=ON turns warnings
# into errors (the test command does; a user's build does not need to).
# The test command builds this file as shipped, with podman, on a debian:12 base made from
# Debian's archive (scripts/test.sh, stage "image"; tests/containers/image_test.sh).
# Packages come from the same lists, through the same script, as the README's install step
# (scripts/install-deps.sh):
#   scripts/packages-build.txt    the build stage (compiler, CMake, -dev packages)
#   scripts/packages-runtime.txt  the runtime stage (shared libraries only)
# The image runs as UID/GID 10001, the chart's default securityContext.runAsUser: nats-server
# and the sidecar must share one user (the sidecar signals nats-server to reload).

FROM debian:12 AS build
COPY scripts/install-deps.sh scripts/packages-build.txt /tmp/deps/
RUN bash /tmp/deps/install-deps.sh build && rm -rf /var/lib/apt/lists/*
ARG MESH_WERROR=OFF
# The binary's sources only (MESH_BUILD_TESTS=OFF): a change to the tests, the chart or the
# docs does not invalidate the compile's cached layer.
COPY CMakeLists.txt /src/
COPY model /src/model
COPY observers /src/observers
COPY reconciler /src/reconciler
RUN cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMESH_BUILD_TESTS=OFF \
      -DMESH_WERROR="${MESH_WERROR}" \
 && cmake --build /build --target mesh-reconciler -j"$(nproc)"
# The commit last: a new commit with the same sources recompiles one file (build_info.cc).
ARG MESH_COMMIT=""
RUN cmake -S /src -B /build -DMESH_COMMIT="${MESH_COMMIT}" \
 && cmake --build /build --target mesh-reconciler -j"$(nproc)" \
 && strip /build/mesh-reconciler

FROM debian:12
COPY scripts/install-deps.sh scripts/packages-runtime.txt /tmp/deps/
RUN bash /tmp/deps/install-deps.sh runtime \
 && rm -rf /var/lib/apt/lists/* /tmp/deps \
 && groupadd --gid 10001 mesh \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin mesh
# After the packages: a new commit does not invalidate their cached layer.
ARG MESH_COMMIT=""
LABEL org.opencontainers.image.title="mesh-reconciler" \
      org.opencontainers.image.revision="${MESH_COMMIT}"
COPY --from=build /build/mesh-reconciler /usr/local/bin/mesh-reconciler
# Every shared library the binary needs comes from packages-runtime.txt.
RUN ! ldd /usr/local/bin/mesh-reconciler | grep 'not found'
USER 10001:10001
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/mesh-reconciler"]
CMD ["--help"]
