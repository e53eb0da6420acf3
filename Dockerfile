# syntax=docker/dockerfile:1
# Slotkeeper: one static binary with the dashboard embedded.
#
#   docker build -t slotkeeper .
#
# Stage 1 builds the SPA, stage 2 the Go binary (with frontend/dist embedded),
# stage 3 is the small runtime: Alpine for `git` (the git provider shells out
# to it) and busybox `wget` (the compose health check), running as a non-root
# user.

ARG NODE_VERSION=20
ARG GO_VERSION=1.26

FROM node:${NODE_VERSION}-bookworm-slim AS spa
WORKDIR /src
# Manifests first, so `npm ci` is cached until dependencies change. npm
# workspaces need every workspace's package.json to install.
COPY package.json package-lock.json ./
COPY frontend/package.json frontend/package.json
COPY e2e/package.json e2e/package.json
RUN npm ci --no-audit --no-fund
COPY frontend/ frontend/
RUN npm run build --workspace frontend

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The SPA built above replaces whatever frontend/dist the context held.
RUN rm -rf frontend/dist
COPY --from=spa /src/frontend/dist frontend/dist
RUN go build -trimpath -ldflags="-s -w" -o /out/slotkeeper ./backend/cmd/slotkeeper

FROM alpine:3.22 AS runtime
# git-daemon carries git-http-backend, which `slotkeeper sim` serves git with.
RUN apk add --no-cache ca-certificates git git-daemon tzdata \
 && adduser -D -H -u 10001 -s /sbin/nologin slotkeeper \
 && mkdir -p /data /simdata && chown slotkeeper:slotkeeper /data /simdata
COPY --from=build /out/slotkeeper /usr/local/bin/slotkeeper
USER 10001:10001
WORKDIR /data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/slotkeeper"]
CMD ["serve"]
