# One image for every shipped command: skr-agent (the entrypoint), skr-webhook, skr-certs and skr-modules (by name,
# e.g. a container's `command: [skr-webhook]`). `docker build -t <registry>/skr-watcher:<tag> .`
# Base images are pinned by digest and replaceable through build arguments: the tests build this file with
# buildah from local bases (a Node 22 assembled from the npm `node` binary; see packages/testenv/src/images.ts),
# since their machines reach no internet registry. Decision 014.
ARG BUILD_IMAGE=docker.io/library/node:22-bookworm-slim@sha256:43ac6c60b8f89723f746e8a92ce91abd5017e627ce1ddfe4238355d3a30b772c
ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs22-debian12:nonroot@sha256:13593b7570658e8477de39e2f4a1dd25db2f836d68a0ba771251572d23bb4f8e

FROM ${BUILD_IMAGE} AS build
# Behind a TLS-intercepting proxy, npm needs its CA: pass the file's path (mounted at build time, never copied).
ARG NODE_EXTRA_CA_CERTS
WORKDIR /src
# Manifests first: the dependency layer is rebuilt only when they change.
COPY package.json package-lock.json ./
COPY packages/api/package.json packages/api/
COPY packages/pki/package.json packages/pki/
COPY packages/kube/package.json packages/kube/
COPY packages/telemetry/package.json packages/telemetry/
COPY packages/testenv/package.json packages/testenv/
COPY webhook/package.json webhook/
COPY agent/package.json agent/
COPY certs/package.json certs/
COPY modules/package.json modules/
COPY packages/module-manager/package.json packages/module-manager/
COPY packages/oci/package.json packages/oci/
COPY examples/sample-manager/package.json examples/sample-manager/
# No install scripts: the only ones fetch a second Node binary (devDependency `node`) and check esbuild's
# (its platform package is installed either way; the agent's bundle step below runs it).
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.base.json ./
COPY packages ./packages
COPY webhook ./webhook
COPY agent ./agent
COPY certs ./certs
COPY modules ./modules
COPY examples ./examples
RUN node node_modules/typescript/bin/tsc -b packages/api packages/pki packages/telemetry packages/kube packages/oci \
      webhook agent certs modules packages/module-manager examples/sample-manager \
 && npm run --workspace agent bundle \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund \
 && rm -rf node_modules/@skr-watcher/testenv node_modules/.package-lock.json
# The commands on PATH: each name links to its entry point, which starts `#!/usr/bin/env node`. The runtime base
# may lack env (distroless has no coreutils): it comes from here, as a file (busybox's is a link to itself). Node
# does the work: the build bases differ in their shell tools, both have node.
RUN node -e " \
      const fs = require('node:fs'); \
      fs.mkdirSync('/image/app/bin', { recursive: true }); \
      fs.mkdirSync('/image/usr/bin', { recursive: true }); \
      for (const [command, entry] of [ \
        ['skr-agent', 'agent/dist/bundle/main.cjs'], \
        ['skr-webhook', 'webhook/dist/main.js'], \
        ['skr-certs', 'certs/dist/main.js'], \
        ['skr-modules', 'modules/dist/main.js'], \
      ]) { \
        fs.chmodSync(entry, 0o755); \
        fs.symlinkSync('../' + entry, '/image/app/bin/' + command); \
      } \
      fs.copyFileSync('/usr/bin/env', '/image/usr/bin/env'); \
      fs.chmodSync('/image/usr/bin/env', 0o755); \
    "

FROM ${RUNTIME_IMAGE}
WORKDIR /app
# Only what runs: compiled code, package manifests (workspace links resolve through them), production
# dependencies and the CRDs the agent installs in SKRs. Owned by root, run as an unprivileged user.
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/packages/api/package.json ./packages/api/
COPY --from=build /src/packages/api/dist ./packages/api/dist
# The Node.js version check every entry point and the module-manager kit import first.
COPY --from=build /src/packages/api/node-version-guard ./packages/api/node-version-guard
COPY --from=build /src/packages/pki/package.json ./packages/pki/
COPY --from=build /src/packages/pki/dist ./packages/pki/dist
COPY --from=build /src/packages/kube/package.json ./packages/kube/
COPY --from=build /src/packages/kube/dist ./packages/kube/dist
COPY --from=build /src/packages/telemetry/package.json ./packages/telemetry/
COPY --from=build /src/packages/telemetry/dist ./packages/telemetry/dist
COPY --from=build /src/webhook/package.json ./webhook/
COPY --from=build /src/webhook/dist ./webhook/dist
COPY --from=build /src/agent/package.json ./agent/
COPY --from=build /src/agent/dist ./agent/dist
COPY --from=build /src/certs/package.json ./certs/
COPY --from=build /src/certs/dist ./certs/dist
COPY --from=build /src/packages/oci/package.json ./packages/oci/
COPY --from=build /src/packages/oci/dist ./packages/oci/dist
COPY --from=build /src/modules/package.json ./modules/
COPY --from=build /src/modules/dist ./modules/dist
COPY --from=build /src/packages/module-manager/package.json ./packages/module-manager/
COPY --from=build /src/packages/module-manager/dist ./packages/module-manager/dist
COPY --from=build /src/examples/sample-manager/package.json ./examples/sample-manager/
COPY --from=build /src/examples/sample-manager/dist ./examples/sample-manager/dist
COPY manifests/crds ./manifests/crds
# util-linux's chrt (libc only): the webhook's dispatch thread makes itself SCHED_IDLE with it, so admission
# answers always take the core first (decision 015). Without it the thread keeps only a higher nice value.
COPY --from=build /usr/bin/chrt /usr/bin/chrt
COPY --from=build /image/usr/bin/env /usr/bin/env
COPY --from=build /image/app/bin ./bin
ENV NODE_ENV=production
# The commands, then node where either base keeps it (distroless: /nodejs/bin).
ENV PATH=/app/bin:/nodejs/bin:/usr/local/bin:/usr/bin:/bin
USER 65532:65532
# The agent by default, as its bundle (one file, decision 017): `run …` in a Deployment's args. The other commands
# by name: `command: [skr-webhook]`, `[skr-certs, …]`, `[skr-modules, …]`; `[node, examples/sample-manager/dist/main.js]`
# runs the example module manager.
ENTRYPOINT ["skr-agent"]
CMD ["run"]
