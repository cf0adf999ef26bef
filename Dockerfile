# One image for the webhook, the controller and the certificate bootstrap:
#   docker build -t tower:0.1.0 .          (make image)
#   args: ["webhook", ...] | ["extender", "run", ...] | ["certs", "bootstrap"]
# Wheels are built in the first stage; the final one has no compiler and runs as non-root.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY extender extender
COPY webhook webhook
COPY certs certs
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels \
 && useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin tower
USER 65532:65532
ENTRYPOINT ["python", "-m"]
CMD ["extender", "run"]
