# syntax=docker/dockerfile:1
# imagepull-sweeper container image.
#   docker build -t <your-registry>/imagepull-sweeper:0.1.0 \
#     --build-arg REVISION=$(git rev-parse HEAD) --build-arg CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ) .
# Multi-arch (amd64 and arm64; the build stage runs emulated on the other platform):
#   docker buildx build --platform linux/amd64,linux/arm64 -t <your-registry>/imagepull-sweeper:0.1.0 --push .
# test/e2e/image.test.ts repeats the runtime stage's install steps outside Docker, so keep
# them in step with it. Both stages use the Node major that `npm test` runs on (the `node` dev
# dependency; test/unit/runtime.test.ts keeps them equal).
# The base is pinned by the digest of its multi-platform index (every architecture), the same in
# both stages and in the base.digest label. To bump it (a Node or Debian security release):
#   docker buildx imagetools inspect node:26-slim --format '{{json .Manifest.Digest}}'
# and replace the three occurrences of the old digest; image.test.ts checks they agree.

# --- build: bundle the TypeScript and its dependencies into dist/src (scripts/build.ts) -------
FROM node:26-slim@sha256:c0753125a3789977aefe869cbebccf70e3cfd7ea84ca48547458f02e4f1d7146 AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY scripts/build.ts ./scripts/
COPY src ./src
RUN npm run build

# --- runtime: the bundle (it carries its dependencies: no node_modules), as a non-root user --
FROM node:26-slim@sha256:c0753125a3789977aefe869cbebccf70e3cfd7ea84ca48547458f02e4f1d7146 AS runtime
# Set by the build (see the top); the defaults describe a build from an unknown commit.
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
# OCI image annotations (https://github.com/opencontainers/image-spec/blob/main/annotations.md).
LABEL org.opencontainers.image.title="imagepull-sweeper" \
      org.opencontainers.image.description="Fails Kubernetes Jobs whose pods are stuck pulling their image, on a namespace policy, with an audit trail." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/imagepull-sweeper/imagepull-sweeper" \
      org.opencontainers.image.url="https://github.com/imagepull-sweeper/imagepull-sweeper" \
      org.opencontainers.image.documentation="https://github.com/imagepull-sweeper/imagepull-sweeper/tree/main/docs" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="docker.io/library/node:26-slim" \
      org.opencontainers.image.base.digest="sha256:c0753125a3789977aefe869cbebccf70e3cfd7ea84ca48547458f02e4f1d7146"
ENV NODE_ENV=production
WORKDIR /app
# package.json: ESM ("type": "module") and the version the CLI reports; the licence and notices.
COPY package.json LICENSE NOTICE ./
COPY --from=build /src/dist/src ./dist/src
RUN groupadd --system --gid 65532 sweeper \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin sweeper
# Numeric, so Kubernetes can check runAsNonRoot.
USER 65532:65532
# Turbofan on the main thread: its compile memory, taken from a background thread's malloc arena,
# stays mapped after each compile (17 MiB of peak RSS on 1,500 stuck Jobs; docs/performance.md).
# V8 takes this flag on the command line only, not from NODE_OPTIONS.
ENTRYPOINT ["node", "--no-concurrent-recompilation", "/app/dist/src/cli/main.js"]
CMD ["sweep"]
