# One image for skr-agent, skr-webhook and skr-certs: `docker build -t skr-watcher .`
FROM node:22-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json tsconfig*.json ./
COPY packages ./packages
COPY webhook ./webhook
COPY agent ./agent
COPY certs ./certs
COPY manifests ./manifests
RUN npm ci --no-audit --no-fund --omit=optional && npx tsc -b && npm prune --omit=dev \
 && rm -rf packages/testenv/go

FROM gcr.io/distroless/nodejs22-debian12:nonroot
WORKDIR /app
COPY --from=build /src /app
ENV NODE_ENV=production
# The image's entrypoint is node; pick the binary with the first argument:
#   agent/dist/main.js run ...   webhook/dist/main.js   certs/dist/main.js ...
CMD ["agent/dist/main.js", "--help"]
