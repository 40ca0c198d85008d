# syntax=docker/dockerfile:1
# imagepull-sweeper container image.
#   docker build -t <your-registry>/imagepull-sweeper:0.1.0 .
# test/e2e/image.test.ts repeats the runtime stage's install steps outside Docker, so keep
# them in step with it. Both stages use the Node major that `npm test` runs on (the `node` dev
# dependency; test/unit/runtime.test.ts keeps them equal).

# --- build: bundle the TypeScript and its dependencies into dist/src (scripts/build.ts) -------
FROM node:26-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY scripts/build.ts ./scripts/
COPY src ./src
RUN npm run build

# --- runtime: the bundle (it carries its dependencies: no node_modules), as a non-root user --
FROM node:26-slim AS runtime
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
