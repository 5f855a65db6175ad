# Prometheus for compose.yaml's `monitoring` profile, from Debian's `prometheus` package
# on the same debian:bookworm-slim base image as docker/Dockerfile (pulled, or made
# locally by docker/make-base-image.sh), so it builds where no container registry can be
# reached. It runs like the official docker.io/prom/prometheus image: the same
# configuration and storage paths, port 9090, user nobody.
FROM debian:bookworm-slim
# policy-rc.d: the package's maintainer scripts must not try to start a service during
# the build (there is no init system in a container).
RUN printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
 && apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
           /usr/sbin/policy-rc.d \
 && mkdir -p /prometheus && chown nobody:nogroup /prometheus
COPY docker/prometheus.yml /etc/prometheus/prometheus.yml
USER nobody
WORKDIR /prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
