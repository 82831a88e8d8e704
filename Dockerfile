# mesh-reconciler container image: multi-stage, Debian 12 (bookworm).
#
#   docker build -t mesh-reconciler:0.1.0 .
#
# The development machines and CI of this repository cannot run Docker (no daemon, no registry
# but Debian's and npm's), so this file is not built by the tests: build it where Docker runs.
# Packages come from the same lists, through the same script, as the README's install step
# (scripts/install-deps.sh):
#   scripts/packages-build.txt    the build stage (compiler, CMake, -dev packages)
#   scripts/packages-runtime.txt  the runtime stage (shared libraries only)
# The image runs as UID/GID 10001, the chart's default securityContext.runAsUser: nats-server
# and the sidecar must share one user (the sidecar signals nats-server to reload).

FROM debian:12 AS build
COPY scripts/install-deps.sh scripts/packages-build.txt /tmp/deps/
RUN bash /tmp/deps/install-deps.sh build && rm -rf /var/lib/apt/lists/*
COPY . /src
RUN cmake -S /src -B /build -DCMAKE_BUILD_TYPE=Release -DMESH_BUILD_BENCH=OFF \
 && cmake --build /build --target mesh-reconciler -j"$(nproc)" \
 && strip /build/mesh-reconciler

FROM debian:12
COPY scripts/install-deps.sh scripts/packages-runtime.txt /tmp/deps/
RUN bash /tmp/deps/install-deps.sh runtime \
 && rm -rf /var/lib/apt/lists/* /tmp/deps \
 && groupadd --gid 10001 mesh \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin mesh
COPY --from=build /build/mesh-reconciler /usr/local/bin/mesh-reconciler
# Every shared library the binary needs comes from packages-runtime.txt.
RUN ! ldd /usr/local/bin/mesh-reconciler | grep 'not found'
USER 10001:10001
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/mesh-reconciler"]
CMD ["--help"]
