# wrk, the HTTP load generator, for compose.yaml's `wrk` service. From Debian's package.
FROM debian:bookworm-slim
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends wrk \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log
USER nobody
ENTRYPOINT ["wrk"]
