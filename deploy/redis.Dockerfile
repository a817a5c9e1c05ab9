# Redis for compose.yaml: Debian's redis-server, holding the class poll's rooms for every replica (server/poll reads
# ATTENTION_LAB_REDIS_URL). An append-only file in /data (compose.yaml mounts a volume there), written every second,
# as the Kubernetes base keeps one: a restarted Redis has every room back (the poll's pages say it is paused while it
# is away). Built from the same Debian base as the app's image, so nothing but Debian's packages is needed (an
# official redis:7 image with the same arguments works the same).
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /data && chown redis:redis /data
USER redis
WORKDIR /data
VOLUME /data
EXPOSE 6379
CMD ["redis-server", "--bind", "0.0.0.0", "--port", "6379", "--protected-mode", "no", "--save", "", "--appendonly", "yes", "--appendfsync", "everysec", "--dir", "/data"]
