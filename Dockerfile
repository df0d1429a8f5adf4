# syntax=docker/dockerfile:1
#
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#                --build-arg COMMIT=$(git rev-parse HEAD) -t reconciled .
#
# A static, stripped binary on distroless/static: no shell, no libc, runs as
# 65532:65532. .ci/run builds the same binary with the same flags and checks
# it is static and runs as that user.

FROM docker.io/library/golang:1.26 AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/reconciled ./cmd/reconciled \
 && mkdir -m 0700 /out/data

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
# The repository carries no licence file yet: NOASSERTION (SPDX) until it does.
ARG LICENSES=NOASSERTION
LABEL org.opencontainers.image.title="reconciled" \
      org.opencontainers.image.description="Settles unknown outcomes of payments on Internet Computer ICRC ledgers from verified ICRC-3 block history" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.source="https://github.com/reconciled/reconciled" \
      org.opencontainers.image.licenses="${LICENSES}"
COPY --from=build /out/reconciled /reconciled
# An empty /data owned by the runtime user and 0700, so a fresh volume is
# writable by it alone (a volume Docker creates copies the mode).
COPY --from=build --chown=65532:65532 --chmod=0700 /out/data /data
# In a container the HTTP port must be reachable from outside the container
# (probes, the support Service); the binary's own default is loopback.
ENV RECONCILED_DATA=/data \
    RECONCILED_HTTP=0.0.0.0:8080
USER 65532:65532
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/reconciled"]
CMD ["serve"]
