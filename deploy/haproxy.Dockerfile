# HAProxy for compose.yaml: Debian's haproxy (2.6) with deploy/haproxy.cfg and the compose backend
# (deploy/compose-servers.cfg), as the unprivileged user the package creates. Built from the same Debian base as
# the app's image, so nothing but Debian's packages is needed (an official haproxy:2.6 image with these two files
# mounted works the same).
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy \
    && rm -rf /var/lib/apt/lists/*
COPY deploy/haproxy.cfg deploy/compose-servers.cfg /etc/haproxy/attention-lab/
USER haproxy
ENV LAB_ADDRESS=0.0.0.0 LAB_PORT=8501
EXPOSE 8501
CMD ["haproxy", "-db", "-f", "/etc/haproxy/attention-lab/haproxy.cfg", "-f", "/etc/haproxy/attention-lab/compose-servers.cfg"]
