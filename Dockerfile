# syntax=docker/dockerfile:1

# belay serve in an image of its own: a static binary on distroless, no
# shell, run as the non-root user nonroot (65532). deploy/deploy_test.go
# builds the binary as this file does and runs it as that user.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static: Belay's SQLite driver is pure Go, so no cgo, no libc to ship.
ENV CGO_ENABLED=0
RUN ["go", "build", "-trimpath", "-ldflags=-s -w", "-o", "/out/belay", "./cmd/belay"]
# The working directory of the image, where a SQLite store and the support
# world go by default; the final image has no shell to make it.
RUN mkdir -p /out/data

# CA certificates, time zones and /etc/passwd with nonroot; nothing else.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/belay /belay
COPY LICENSE /LICENSE
COPY --from=build --chown=65532:65532 /out/data /data
WORKDIR /data
USER 65532:65532
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s CMD ["/belay", "probe", "http://127.0.0.1:8080/readyz"]
ENTRYPOINT ["/belay"]
CMD ["serve", "--addr", "0.0.0.0:8080"]
