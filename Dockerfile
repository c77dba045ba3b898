# syntax=docker/dockerfile:1
# The gateway's container image (C47): docs/deploy.md says how to build, run and scale it.
#
#   docker build -t junction .
#   docker run --init -p 8080:8080 -v junction-data:/data junction             # embedded storage
#   docker run --init -p 8080:8080 -v junction-data:/data junction --devnet    # + local anvil chains
#
# NODE_IMAGE is the base of both stages: the official Node.js 24 LTS image by default. Any image
# laid out the same way (node and npm in /usr/local/bin, Debian bookworm's glibc) works;
# scripts/container-test.sh builds such a stand-in where no registry can be reached.
ARG NODE_IMAGE=node:24-bookworm-slim

# --- build: every dependency (dev ones too), then dist/ and web/dist/ -----------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# An npm configuration for a private registry or a TLS-inspecting proxy comes in as a build
# secret (`--secret id=npmrc,src=...`, and `id=npm_ca` for a CA file it names as
# /run/secrets/npm_ca): a secret is mounted for this one step only, so it is in no layer and no
# image, unlike a build-arg, which the image's history keeps. Without it npm uses its defaults.
# --ignore-scripts: the project's `prepare` (the build) runs below, once the sources are here.
RUN --mount=type=secret,id=npmrc --mount=type=secret,id=npm_ca \
    if [ -s /run/secrets/npmrc ]; then export NPM_CONFIG_USERCONFIG=/run/secrets/npmrc; fi; \
    npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/build.mjs scripts/
COPY src src
COPY web web
RUN node scripts/build.mjs \
 && npm prune --omit=dev --no-audit --no-fund --ignore-scripts \
 && rm -rf node_modules/.cache

# --- run: production dependencies, the compiled gateway, the dashboard ---------------------------
FROM ${NODE_IMAGE}
WORKDIR /app
# MALLOC_MMAP_THRESHOLD_: glibc gives the memory of large answers back once they are freed
# (docs/deploy.md, C60).
ENV NODE_ENV=production \
    DATA_DIR=/data \
    PORT=8080 \
    HOST=0.0.0.0 \
    LOG_FORMAT=json \
    MALLOC_MMAP_THRESHOLD_=131072
# Embedded storage (PGlite), generated secrets and the devnet chains' state live in DATA_DIR:
# a volume, owned by the user the gateway runs as.
RUN mkdir -p /data && chown 1000:1000 /data
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules node_modules
COPY --from=build /app/dist dist
COPY --from=build /app/web/dist web/dist
COPY config/default.json config/
# The compiled contracts (src/onchain/artifacts.ts reads them from ../../contracts/build/ next to
# dist/): the intents read the settlers' ABIs, --devnet deploys them. anvil itself comes with
# node_modules (@foundry-rs/anvil-linux-amd64), so `--devnet` works in this image.
COPY contracts/build contracts/build
VOLUME ["/data"]
# The official image's `node` user, by number so that Kubernetes' runAsNonRoot can check it.
USER 1000:1000
EXPOSE 8080
# SIGTERM starts the graceful stop (server.shutdownGraceMs): requests drain, usage is written.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT||8080}/health/ready`).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "--v8-pool-size=1", "dist/main.js"]
