# nginx from Debian bookworm's packages (1.22), offering what compose-ha.yaml uses of the
# nginx:1.27-bookworm image: /etc/nginx/conf.d/*.conf included, the logs on the
# container's output. For where Docker Hub cannot be reached: compose-ha.debian.yaml
# builds it (docs/deploy.md). BASE_IMAGE: as in postgres.Dockerfile.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
# Debian's nginx.conf includes conf.d/*.conf and sites-enabled/, whose default site (port
# 80) is removed.
RUN apt-get update \
 && apt-get install -y --no-install-recommends nginx \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && rm -f /etc/nginx/sites-enabled/default \
 && ln -sf /dev/stdout /var/log/nginx/access.log \
 && ln -sf /dev/stderr /var/log/nginx/error.log
EXPOSE 8080
# SIGQUIT: nginx's graceful stop (the requests in progress finish)
STOPSIGNAL SIGQUIT
CMD ["nginx", "-g", "daemon off;"]
