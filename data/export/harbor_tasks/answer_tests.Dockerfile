# The verifier's own container: taskfoundry's answer matcher (foundry_verifier/) and the gold.
FROM python:3.12-slim-bookworm
COPY . /tests/
RUN chmod -R go-rwx /tests
WORKDIR /app
